"""Where the device pipeline's host time goes, and what makes its response-time tail.

Each call on a batch's path is wrapped with a wall-clock timer (inclusive: a call's time
includes its callees'), then batches are submitted and read one at a time (b = 1 and 64,
triangles; b = 8, every query); then the response-time replay of gpu_bench.py runs at a
few rates with counters of host-path recoveries, compactions and graph captures.

    python bench/profile_pipeline.py [--sweep | --enron DIR [QUERIES [B]]]

With ``--sweep`` it profiles the batch sweep of gpu_bench.py instead (pipelined: batches
submitted with up to 8,192 updates in flight, read in order): per b, the wrapped calls per
batch, then cProfile's top functions by own time at b=8.

With ``--enron`` it profiles the Enron reference runs instead (issue 16's per-query
table): QUERIES (default 0,1,5), insertions, the whole stream as one batch and b=B
(default 64; 0: one batch only), the wrapped calls of the second fresh engine and the
device seconds of each launch step.
"""

from __future__ import annotations

import sys
import time
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from _harness import engine, launch_cap_from_env, time_run  # noqa: E402
from gpu_bench import _serve, _window  # noqa: E402

from gpu import CountMode, _engine  # noqa: E402
from gpu.cuda import _pipeline, _updater  # noqa: E402
from streams import iter_chunks, read_graph, read_query, read_stream  # noqa: E402

#: label -> [nanoseconds, calls]
TIMES: defaultdict[str, list[int]] = defaultdict(lambda: [0, 0])
WRAPPED = [(_engine.Engine, "submit"), (_engine.Engine, "_finish"),
           (_engine, "BatchStats"), (_engine, "BatchResult"), (_engine, "PendingBatch"),
           (_pipeline.DevicePipeline, "submit"), (_pipeline.DevicePipeline, "_new_launch"),
           (_pipeline.DevicePipeline, "_start"), (_pipeline.DevicePipeline, "_launch"),
           (_pipeline.DevicePipeline, "take"), (_pipeline.DevicePipeline, "_finish"),
           (_pipeline.DevicePipeline, "_read"), (_pipeline, "_launch_columns"),
           (_pipeline.DevicePipeline, "_recover"), (_pipeline.DevicePipeline, "_graphs"),
           (_pipeline.DevicePipeline, "_collect_garbage"),
           (_pipeline.DevicePipeline, "_configure"), (_pipeline.DevicePipeline, "poll"),
           (_updater.DeviceUpdater, "stage"), (_updater.DeviceUpdater, "compact"),
           (_updater.DeviceUpdater, "compact_in_stream")]


def _wrap(owner: Any, name: str) -> None:
    fn: Callable[..., Any] = getattr(owner, name)
    label = f"{getattr(owner, '__name__', '?').rsplit('.', 1)[-1]}.{name}"

    def timed(*args: Any, **kwargs: Any) -> Any:
        t = time.perf_counter_ns()
        try:
            return fn(*args, **kwargs)
        finally:
            rec = TIMES[label]
            rec[0] += time.perf_counter_ns() - t
            rec[1] += 1

    setattr(owner, name, timed)


def _report(title: str, batches: int) -> None:
    print(f"== {title}: us per batch, inclusive (calls per batch)")
    for label, (ns, calls) in sorted(TIMES.items(), key=lambda kv: -kv[1][0]):
        print(f"  {label:42s} {ns / batches / 1e3:8.1f}  ({calls / batches:.2f})")
    TIMES.clear()


def enron(d: Path, queries: list[int], small: int) -> None:
    """Where an Enron run's time goes: wall seconds, wrapped host calls, device steps."""
    graph, stream = read_graph(d / "initial_graph.graph"), read_stream(d / "insertion_graph.graph")
    for i in queries:
        q = read_query(d / f"query_graph-{i}.graph")
        for b in [len(stream)] + ([small] if small else []):
            time_run("gpu", graph, [q], stream, CountMode.EMBEDDINGS, 1, b)   # warm
            TIMES.clear()
            t, pos, _ = time_run("gpu", graph, [q], stream, CountMode.EMBEDDINGS, 1, b)
            _report(f"Enron q{i} insert, b={b}: {t * 1e3:.2f} ms, +{pos:,}", 1)
            eng = engine("gpu", graph, [q], CountMode.EMBEDDINGS, True)
            pipe = eng.executor._pipeline  # type: ignore[attr-defined]
            pipe.timed = True
            ks = np.zeros(4)
            tickets = [eng.submit(c) for c in iter_chunks(stream, b)]
            launches = {id(p.ticket.launch): p.ticket for p in tickets}
            for p in tickets:
                p.result()
            for tk in launches.values():
                ks += np.array(tk.kernel_seconds())
            print(f"   device, timed launches ({len(launches)}): apply / units / match / "
                  "collect " + " / ".join(f"{x * 1e3:.2f}" for x in ks) + " ms; "
                  f"compactions {pipe.updater.compactions}, recoveries {pipe.recoveries}, "
                  f"graph captures {pipe.captures}, row stride {pipe._stride}")


def sweep() -> None:
    """The batch sweep's loop (``time_run``) with the wrapped calls, then under cProfile."""
    import cProfile
    import pstats

    from gpu_bench import _big_dataset

    _, ds = _big_dataset(1_200_000)
    stream = ds.stream.slice(0, 20_000)
    qs = [q for _, q in ds.queries]
    for b in (1, 8, 64, 4096):
        time_run("gpu", ds.initial, qs, stream, CountMode.EMBEDDINGS, 1, b)   # warm
        st: dict[str, int] = {}
        t, _, _ = time_run("gpu", ds.initial, qs, stream, CountMode.EMBEDDINGS, 1, b, st,
                           started=TIMES.clear)   # the engine's set-up left out
        n = -(-len(stream) // b)
        _report(f"sweep b={b}: {len(stream) / t:,.0f} updates/s, {t / n * 1e6:.1f} us a "
                f"batch, launches {st['launches']}", n)
    for b in (8, 64):
        prof = cProfile.Profile()
        prof.enable()
        time_run("gpu", ds.initial, qs, stream, CountMode.EMBEDDINGS, 1, b)
        prof.disable()
        print(f"== cProfile, sweep b={b} (one fresh engine, its set-up included)")
        pstats.Stats(prof).sort_stats("tottime").print_stats(30)


def main() -> None:
    launch_cap_from_env()
    for owner, name in WRAPPED:
        _wrap(owner, name)
    if sys.argv[1:2] == ["--sweep"]:
        sweep()
        return
    if len(sys.argv) >= 3 and sys.argv[1] == "--enron":
        rest = sys.argv[3:]
        queries = [int(x) for x in (rest[0] if rest else "0,1,5").split(",")]
        enron(Path(sys.argv[2]), queries, int(rest[1]) if len(rest) > 1 else 64)
        return
    ds, qs, stream = _window(1_200_000, 60_000)
    tri = [q for q in qs if q.n == 3]
    for b, queries in ((1, tri), (64, tri), (8, qs)):
        eng = engine("gpu", ds.initial, queries, CountMode.EMBEDDINGS, True)
        chunks = list(iter_chunks(stream.slice(0, 20_000), b))
        for c in chunks[:30]:
            eng.apply(c)
        TIMES.clear()
        n = min(len(chunks) - 30, 3000)
        t = time.perf_counter()
        for c in chunks[30:30 + n]:
            p = eng.submit(c)
            while not p.ready:
                pass
            p.result()
        _report(f"one at a time, b={b}, {len(queries)} queries: "
                f"{(time.perf_counter() - t) / n * 1e6:.1f} us a batch", n)
    for rate, queries in ((1e4, tri), (1e5, tri), (3e5, tri), (1e5, qs)):
        eng = engine("gpu", ds.initial, queries, CountMode.EMBEDDINGS, True)
        n = int(min(60_000, max(2000, rate * 2.0)))
        arr = np.cumsum(np.random.default_rng(1).exponential(1 / rate, n))
        arr -= arr[0]
        TIMES.clear()
        rt, _ = _serve(eng, stream.slice(0, n), arr, 64, 0.000125)
        pipe = eng.executor._pipeline  # type: ignore[attr-defined]
        ps = " / ".join(f"{x:.3f}" for x in np.percentile(rt, [50, 90, 99, 99.9, 100]) * 1e3)
        print(f"== replay at {rate:,.0f}/s, {len(queries)} queries: {n / (arr[-1] + rt[-1]):,.0f}"
              f"/s; p50 / p90 / p99 / p99.9 / max {ps} ms; launches {pipe.launches}, "
              f"host-path recoveries {pipe.recoveries}, compactions {pipe.updater.compactions}")
        for label in ("DevicePipeline._recover", "DevicePipeline._graphs",
                      "DeviceUpdater.compact", "DeviceUpdater.compact_in_stream"):
            if label in TIMES:
                ns, calls = TIMES[label]
                print(f"   {label}: {calls} calls, {ns / 1e6:.1f} ms")
        TIMES.clear()


if __name__ == "__main__":
    main()
