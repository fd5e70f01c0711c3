"""How long one heavy update keeps the device when it is matched alone, and what the work
split settings do to it: the latency replay's stream (queries of 3-5 vertices), each of its
first ``--scan`` updates submitted alone and timed (submit to result), then the heaviest
insertions toggled (inserted, deleted, inserted, ...: the same matches each time) in fresh
engines under each setting, medians of the toggles.

    CSM_BENCH_DEVICE_GRAPH=1 python bench/heavy_update.py [--scan 20000] [--top 5]
        [--max-query 5] [--settings "split_us=10;split_us=2;split_us=0;slice_size=1"]

The p99 of the 3-5 vertex replay above 10,000 updates/s is such updates (docs/design.md
stage 2o): whether spreading them sooner (T-DFS splitting, more warps) shortens them says
whether they are matching-bound or scheduling-bound.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from gpu_bench import _big_dataset  # noqa: E402

from gpu import CountMode, Engine, QuerySpec, UpdateBatch, warm_up  # noqa: E402

TOGGLES = 7   # odd: the graph ends with the update applied, as the stream has it


def _engine(ds, settings: dict[str, float]) -> Engine:  # type: ignore[no-untyped-def]
    from gpu.cuda._executor import GpuConfig, GpuExecutor
    ex = GpuExecutor(GpuConfig(device_graph=True, **settings))  # type: ignore[arg-type]
    eng = Engine(executor=ex)
    g = ds.initial
    eng.load_graph(g.vertex_ids, g.vertex_labels, g.src, g.dst, g.label)
    for _, q in ds.queries:
        eng.register(QuerySpec(q, CountMode.EMBEDDINGS))
    return eng


def _timed(eng: Engine, b: UpdateBatch) -> tuple[float, int]:
    t = time.perf_counter()
    r = eng.submit(b).result()
    return time.perf_counter() - t, int(np.abs(r.counts).sum())


def scan(ds, n: int) -> tuple[np.ndarray, np.ndarray]:  # type: ignore[no-untyped-def]
    """Each of the first ``n`` updates alone: seconds and matches changed."""
    eng = _engine(ds, {})
    secs, matches = np.zeros(n), np.zeros(n, np.int64)
    for i in range(n):
        secs[i], matches[i] = _timed(eng, ds.stream.slice(i, i + 1))
    return secs, matches


def toggles(ds, heavy: list[int], settings: dict[str, float]) -> list[tuple[float, int]]:  # type: ignore[no-untyped-def]
    """Each heavy insertion toggled TOGGLES times in one engine that has the stream up to
    it: median seconds, matches."""
    eng = _engine(ds, settings)
    s = ds.stream
    at, out = 0, []
    for k in heavy:
        if k > at:
            eng.apply(s.slice(at, k))
        one = s.slice(k, k + 1)
        inv = UpdateBatch.build(s.seq[k:k + 1], [1], s.src[k:k + 1], s.dst[k:k + 1],
                                s.label[k:k + 1])
        runs = [_timed(eng, inv if j % 2 else one) for j in range(TOGGLES)]
        out.append((float(np.median([r[0] for r in runs])), runs[0][1]))
        at = k + 1
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--scan", type=int, default=20_000)
    ap.add_argument("--top", type=int, default=5)
    ap.add_argument("--max-query", type=int, default=5)
    ap.add_argument("--settings", default="split_us=10;split_us=2;split_us=0;slice_size=1;"
                                          "min_warps_per_sm=20")
    args = ap.parse_args()
    warm_up("gpu")
    _, ds = _big_dataset(1_200_000, args.max_query)
    secs, matches = scan(ds, args.scan)
    q = np.percentile(secs, [50, 99, 99.9]) * 1e3
    print(f"{args.scan:,} updates alone: p50 {q[0]:.3f} p99 {q[1]:.3f} p99.9 {q[2]:.3f} "
          f"max {secs.max() * 1e3:.3f} ms; {int((secs > 1e-3).sum())} over 1 ms, "
          f"{secs[secs > 1e-3].sum() * 1e3:.1f} ms in them", flush=True)
    ins = np.flatnonzero(ds.stream.op[:args.scan] == 0)
    heavy = sorted(int(k) for k in ins[np.argsort(-secs[ins])[:args.top]])
    for k in heavy:
        print(f"  update {k}: {secs[k] * 1e3:.3f} ms, {matches[k]:,} matches", flush=True)
    for text in args.settings.split(";"):
        settings = {kv.split("=")[0]: float(kv.split("=")[1]) for kv in text.split(",") if kv}
        settings = {k: int(v) if k != "split_us" else v for k, v in settings.items()}
        got = toggles(ds, heavy, settings)
        print(f"{text or 'default'}: " + ", ".join(
            f"{k} {t * 1e3:.3f} ms ({m:,})" for k, (t, m) in zip(heavy, got, strict=True)),
            flush=True)


if __name__ == "__main__":
    main()
