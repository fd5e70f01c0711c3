"""Out-of-core benchmark (issue: graphs larger than GPU memory). Writes docs/benchmarks.md
(section "Out-of-core") and, with --plots DIR, ooc_<dataset>.png.

    python bench/ooc_bench.py [--enron FILE] [--edges N] [--plots docs]

For a generated power-law graph and email-Enron (10% of its edges as the update stream,
half inserted, half deleted, GCSM's setting), with the device budget for neighbour arrays
at a tenth of the pool: per batch size b, the same window of updates through the random-
walk cache, the degree cache and zero-copy only (and the whole graph on the device, for
reference). Reported: wall time, kernel time, host bytes read over PCIe, cache hit ratio,
and the estimation (FE) and cache copy (DC: host packing + one transfer) overheads as
shares of the batch time, like GCSM Table 5. Every mode's signed counts must be equal.
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

from _harness import write_section  # noqa: E402
from gpu_bench import _device  # noqa: E402

from gpu import CountMode, Engine, ExecutorOptions, Query, QuerySpec, UpdateBatch, warm_up  # noqa: E402
from gpu.cuda._device_graph import ENTRY_BYTES  # noqa: E402
from streams import GenConfig, GraphData, generate, iter_chunks  # noqa: E402
from streams.formats.snap import read_graph as read_snap  # noqa: E402

PIPELINE = 4   # batches in flight, as in the service (GpuConfig.depth)
#: walk / degree / none: one cache of the whole budget, taken in turns (the default);
#: walk-per-batch: a quarter of it for each batch in flight (GpuConfig.cache_slots=4)
MODES = ("walk", "walk-per-batch", "degree", "none", "in-memory")


def _unlabelled(n: int, edges: list[tuple[int, int]]) -> Query:
    return Query.build([(v, None) for v in range(n)], [(a, b, None) for a, b in edges])


def enron(path: Path, seed: int = 7) -> tuple[GraphData, UpdateBatch, list[Query]]:
    g = read_snap(path)
    lo, hi = np.minimum(g.src, g.dst), np.maximum(g.src, g.dst)
    keys = np.unique((lo << 32) | hi)
    rng = np.random.default_rng(seed)
    pick = rng.permutation(len(keys))[: len(keys) // 10]
    ins = rng.random(len(pick)) < 0.5
    removed = np.zeros(len(keys), bool)
    removed[pick[ins]] = True
    kept = keys[~removed]
    initial = GraphData(np.zeros(0, np.int64), np.zeros(0, np.int32), kept >> 32,
                        kept & 0xFFFFFFFF, np.zeros(len(kept), np.int32))
    upd = keys[pick]
    n = len(upd)
    stream = UpdateBatch.build(np.arange(n), np.where(ins, 0, 1), upd >> 32, upd & 0xFFFFFFFF,
                               np.zeros(n))
    qs = [_unlabelled(3, [(0, 1), (1, 2), (0, 2)]),
          _unlabelled(4, [(0, 1), (1, 2), (2, 3), (0, 3)]),
          _unlabelled(4, [(0, 1), (1, 2), (2, 3), (0, 3), (0, 2)])]
    return initial, stream, qs


def power_law(edges: int) -> tuple[GraphData, UpdateBatch, list[Query], str]:
    cfg = GenConfig(vertices=edges // 8, edges=edges, labels=4, queries=3, min_query=4,
                    max_query=5, insert_ratio=0.05, delete_ratio=0.05, seed=7)
    ds = generate(cfg)
    text = (f"`GenConfig(vertices={cfg.vertices:,}, edges={cfg.edges:,}, labels=4, "
            f"queries=3 of 4-5 vertices, insert_ratio=0.05, delete_ratio=0.05, seed=7)`")
    return ds.initial, ds.stream, [q for _, q in ds.queries], text


def _engine(mode: str, budget: int) -> Engine:
    from gpu.cuda._executor import GpuConfig, GpuExecutor

    if mode == "in-memory":
        return Engine("gpu")
    if mode == "walk-per-batch":
        return Engine("gpu", executor=GpuExecutor(GpuConfig(graph_budget_bytes=budget,
                                                            cache_slots=PIPELINE)))
    return Engine("gpu", options=ExecutorOptions(graph_budget_bytes=budget, cache=mode))


def run(initial: GraphData, stream: UpdateBatch, queries: list[Query], b: int, mode: str,
        budget: int) -> dict[str, float]:
    eng = _engine(mode, budget)
    eng.load_graph(initial.vertex_ids, initial.vertex_labels, initial.src, initial.dst,
                   initial.label)
    for q in queries:
        eng.register(QuerySpec(q, CountMode.EMBEDDINGS))
    assert eng.executor.out_of_core == (mode != "in-memory")  # type: ignore[attr-defined]
    acc = dict(wall=0.0, kernel=0.0, estimate=0.0, pack=0.0, copy=0.0, host_bytes=0.0,
               hits=0.0, misses=0.0, cache_bytes=0.0, walks=0.0, batches=0.0)
    counts = []
    window: list = []  # type: ignore[type-arg]

    def collect(p) -> None:  # type: ignore[no-untyped-def]
        res = p.result()
        counts.append(res.counts)
        io = p.ticket.wait().io if p.ticket is not None else None
        acc["batches"] += 1
        if io is not None:
            acc["kernel"] += io.kernel_seconds
            acc["estimate"] += io.estimate_seconds
            acc["pack"] += io.pack_seconds
            acc["copy"] += io.copy_seconds
            acc["host_bytes"] += io.host_bytes
            acc["hits"] += io.cache_hits
            acc["misses"] += io.cache_misses
            acc["cache_bytes"] += io.cache_bytes
            acc["walks"] += io.walks

    t = time.perf_counter()
    for chunk in iter_chunks(stream, b):
        window.append(eng.submit(chunk))
        if len(window) > PIPELINE:
            collect(window.pop(0))
    for p in window:
        collect(p)
    acc["wall"] = time.perf_counter() - t
    acc["digest"] = hash(np.concatenate(counts).tobytes())
    return acc


def coverage(initial: GraphData, stream: UpdateBatch, queries: list[Query], b: int,
             budget: int) -> tuple[float, float, int, int]:
    """GCSM Fig. 28b on the device: share of the kernel's top 1% / 5% most-read vertices
    that the random-walk cache holds, for the first batch of size b."""
    from gpu.ooc._cache import by_value
    from gpu.ooc._estimate import estimate_reads

    eng = Engine("gpu", options=ExecutorOptions(graph_budget_bytes=budget, cache="walk"))
    eng.load_graph(initial.vertex_ids, initial.vertex_labels, initial.src, initial.dst,
                   initial.label)
    for q in queries:
        eng.register(QuerySpec(q, CountMode.EMBEDDINGS))
    ops = eng.graph.apply(next(iter_chunks(stream, b)))
    eng.executor.on_update(eng.graph, ops)
    ps = eng._plan_set()
    tasks = eng._edge_tasks(ops, ops.applied_edges(), ps)
    reads = eng.executor.read_counts(eng.graph, ps, tasks)  # type: ignore[attr-defined]
    ex = eng.executor
    nbytes = ex.config.graph_budget_bytes // ex.config.cache_slots  # type: ignore[attr-defined]
    seg_len = eng.graph.seg_len
    keep = lambda v, r: by_value(v, r, seg_len, nbytes)  # noqa: E731
    est = estimate_reads(eng.graph, ps, tasks, ex.config.walk, keep)  # type: ignore[attr-defined]
    cached = set(est.vertices[keep(est.vertices, est.reads)].tolist())
    read = int((reads > 0).sum())
    top = np.argsort(-reads, kind="stable")
    out = []
    for share in (0.01, 0.05):
        k = max(1, int(share * read))
        out.append(len(cached & set(top[:k].tolist())) / k)
    return out[0], out[1], read, len(cached)


def section(name: str, initial: GraphData, stream: UpdateBatch, queries: list[Query],
            sizes: list[int], window: int, modes: tuple[str, ...]
            ) -> tuple[list[str], dict]:  # type: ignore[type-arg]
    pool = 2 * len(initial.src) * ENTRY_BYTES
    budget = pool // 10
    stream = stream.slice(0, min(window, len(stream)))
    res: dict[tuple[int, str], dict[str, float]] = {}
    for b in sizes:
        for mode in modes:
            r = run(initial, stream, queries, b, mode, budget)
            res[b, mode] = r
            print(name, b, mode, {k: round(v, 4) for k, v in r.items()}, flush=True)
        sig = {res[b, m]["digest"] for m in modes}
        assert len(sig) == 1, f"{name} b={b}: modes disagree"
    rows = _table(res, sizes, pool, len(stream), len(queries), modes)
    return rows, res


def _table(res: dict, sizes: list[int], pool: int, updates: int,  # type: ignore[type-arg]
           nq: int, modes: tuple[str, ...] = MODES) -> list[str]:
    budget = pool // 10
    rows = [f"Pool {pool / 2**20:.1f} MiB on the host, device budget {budget / 2**20:.2f} "
            f"MiB (a tenth): one cache of the whole budget, taken in turns by the 4 batches "
            f"in flight (walk-per-batch: a quarter of it for each); "
            f"{updates:,} updates per run; {nq} standing queries, embeddings. Kernel s: "
            "summed kernel times (they overlap in the pipeline).",
            "", "| b | mode | wall s | kernel s | host MiB | hit ratio | FE % | DC % | "
            "wall vs zero-copy | kernel vs zero-copy | host bytes vs zero-copy |",
            "|---|---|---|---|---|---|---|---|---|---|---|"]
    for b in sizes:
        zc = res[b, "none"]
        for mode in [m for m in modes if (b, m) in res]:
            r = res[b, mode]
            looked = r["hits"] + r["misses"]
            hit = f"{r['hits'] / looked:.2f}" if looked else "-"
            fe = 100 * r["estimate"] / r["wall"]
            dc = 100 * (r["pack"] + r["copy"]) / r["wall"]
            kern = f"{zc['kernel'] / r['kernel']:.2f}x" if r["kernel"] else "-"
            fewer = (f"{zc['host_bytes'] / r['host_bytes']:.1f}x fewer" if r["host_bytes"]
                     else "none read")
            rows.append(f"| {b} | {mode} | {r['wall']:.3f} | {r['kernel']:.3f} | "
                        f"{r['host_bytes'] / 2**20:,.0f} | {hit} | {fe:.1f} | {dc:.1f} | "
                        f"{zc['wall'] / r['wall']:.2f}x | {kern} | {fewer} |")
    return rows


def from_log(log: Path, name: str, sizes: list[int], updates: int, queries: int,
             pool: int, modes: tuple[str, ...] = MODES) -> list[str]:
    """The table of ``section`` rebuilt from the lines a run printed (``name b mode {..}``)."""
    import ast
    res = {}
    for line in log.read_text().splitlines():
        parts = line.split(" ", 3)
        if len(parts) == 4 and parts[0] == name:
            res[int(parts[1]), parts[2]] = ast.literal_eval(parts[3])
    return _table(res, sizes, pool, updates, queries, modes)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--datasets", default="power-law,enron")
    ap.add_argument("--enron", type=Path, default=ROOT / ".local-data" / "email-Enron.txt")
    ap.add_argument("--edges", type=int, default=3_000_000)
    ap.add_argument("--sizes", default="64,512,4096,8192")
    ap.add_argument("--window", type=int, default=16384)
    ap.add_argument("--modes", default=",".join(MODES))
    ap.add_argument("--coverage-batch", type=int, default=4096)
    ap.add_argument("--plots", type=Path, default=None)
    ap.add_argument("--out", type=Path, default=ROOT / "docs" / "benchmarks.md")
    args = ap.parse_args()
    sizes = [int(x) for x in args.sizes.split(",")]
    modes = tuple(args.modes.split(","))
    warm_up("gpu")
    head = ["## Out-of-core: host-resident graph, random-walk cache, zero-copy (GCSM)", "",
            f"Machine: {_device()}", "",
            "Batches are pipelined as in the service (up to 4 in flight). FE: random-walk "
            "estimation (CPU seconds; it overlaps the kernels of earlier batches); DC: "
            "packing the cache on the host plus its one host-to-device copy; both in % of "
            "the run's wall time, like GCSM Table 5. Host MiB: bytes the kernels *requested* "
            "from mapped host memory (counted in the kernel, 32-byte sectors); the GPU's L2 "
            "serves repeats, so this is not PCIe traffic. Every mode's signed counts were "
            "checked equal (one digest per b). Plots: docs/ooc_<dataset>.png.", ""]
    write_section(args.out, "<!-- ooc-bench:begin -->", "<!-- ooc-bench:end -->", head)
    for name in args.datasets.split(","):
        if name == "power-law":
            g, s, qs, text = power_law(args.edges)
            lines = ["### Generated power-law graph", "", text, ""]
        else:
            g, s, qs = enron(args.enron)
            lines = ["### email-Enron", "", "SNAP email-Enron; 10% of its edges, chosen at "
                     "random, form the stream (half inserted: removed from the initial graph "
                     "first; half deleted); queries: triangle, 4-cycle, diamond.", ""]
        rows, res = section(name, g, s, qs, sizes, args.window, modes)
        lines += [f"`python bench/ooc_bench.py --datasets {name} --edges {args.edges} "
                  f"--sizes {args.sizes} --window {args.window} --modes {args.modes}`", "",
                  *rows]
        cb = args.coverage_batch
        c1, c5, read, held = coverage(g, s, qs, cb, 2 * len(g.src) * ENTRY_BYTES // 10)
        lines += ["", f"Coverage (GCSM Fig. 28b), first batch of b={cb}: of the {read:,} "
                  f"vertices whose arrays the kernel read, the walk cache ({held:,} vertices) "
                  f"holds {c1:.0%} of the top 1% and {c5:.0%} of the top 5% most read "
                  f"(kernel debug counters).", ""]
        write_section(args.out, f"<!-- ooc-bench:{name}:begin -->",
                      f"<!-- ooc-bench:{name}:end -->", lines)
        if args.plots is not None:
            _plot(name, res, sizes, args.plots, modes)


def _plot(name: str, res: dict, sizes: list[int], plots: Path,  # type: ignore[type-arg]
          modes: tuple[str, ...]) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, axes = plt.subplots(1, 2, figsize=(9, 3.2))
    for mode in modes:
        axes[0].plot(sizes, [res[b, mode]["wall"] for b in sizes], "o-", label=mode)
        if mode != "in-memory":
            axes[1].plot(sizes, [res[b, mode]["host_bytes"] / 2**20 for b in sizes], "o-",
                         label=mode)
    for ax, what in zip(axes, ("seconds per window", "host MiB read"), strict=True):
        ax.set_xscale("log", base=2)
        ax.set_xlabel("batch size b")
        ax.set_ylabel(what)
        ax.set_title(name)
        ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(plots / f"ooc_{name}.png", dpi=120)


if __name__ == "__main__":
    main()
