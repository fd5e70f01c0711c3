"""GPU executor benchmarks (issue: DCSM runtime). Writes docs/benchmarks.md (section "GPU
executor") and, with --plots DIR, the two PNG curves.

    python bench/gpu_bench.py [--yeast DIR] [--enron DIR] [--plots docs]
        [--sections yeast,batch,batch-equal,breakdown,updater,pipeline,enron,latency]

* yeast: the 20 Yeast insertion and deletion runs (embeddings), each query on a fresh
  engine, whole stream per run, GPU against the CPU executor on the same machine and
  against RapidFlow's 0.75 s;
* batch: throughput against the updater batch size b on a generated power-law stream
  (45% of the edges inserted, 5% deleted);
* batch-equal: the same sweep with ``--in-flight`` updates in flight at every b (the
  batch section keeps at least 4 batches and 8,192 updates in flight, which gives b=4096
  twice the updates in flight of b=64);
* breakdown: where one batch's time goes on the host-updater path, phase by phase;
* updater: the device graph updater against the host updater, per batch size;
* pipeline: where one batch's time goes on the device pipeline (host submit, device step,
  host result);
* enron: the Enron reference set per query and scenario against RapidFlow;
* latency: response time (arrival to delta ready) against the update rate, with
  exponential inter-arrival times, batches closed at b updates or after t seconds.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import gc
import os
import platform
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import NamedTuple

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from _harness import (IN_FLIGHT_UPDATES, PIPELINE, cpu_model, engine, time_run,  # noqa: E402
                      write_section)

from gpu import CountMode, Engine, QuerySpec, UpdateBatch, warm_up  # noqa: E402
from streams import (  # noqa: E402
    GenConfig,
    generate,
    iter_chunks,
    read_graph,
    read_query,
    read_stream,
)

RAPIDFLOW_INSERT_SECONDS = 0.75
BACKEND = os.environ.get("CSM_BENCH_BACKEND", "gpu")  # "cpu" only to smoke-test this script
BEGIN, END = "<!-- gpu-bench:begin -->", "<!-- gpu-bench:end -->"
PIPE_BEGIN, PIPE_END = "<!-- gpu-pipeline:begin -->", "<!-- gpu-pipeline:end -->"
DEV_BEGIN, DEV_END = "<!-- gpu-device-pipeline:begin -->", "<!-- gpu-device-pipeline:end -->"


@functools.cache
def _device() -> str:
    """The machine line of each section (once a run: it times the host)."""
    if BACKEND != "gpu":
        return f"CPU smoke test ({os.cpu_count()} cores)"
    import cupy
    props = cupy.cuda.runtime.getDeviceProperties(0)
    name = props["name"].decode() if isinstance(props["name"], bytes) else props["name"]
    return (f"{name} ({props['multiProcessorCount']} SMs), CuPy {cupy.__version__}, "
            f"{os.cpu_count()} CPU cores ({cpu_model()}; {_call_ns():.0f} ns a Python "
            f"call), Python {platform.python_version()}")


def _call_ns(calls: int = 200_000) -> float:
    """Nanoseconds a loop step calling a small Python function, best of 5: the small-b figures
    follow the host's speed (two H200 instances differed 2x at b=8 with the same code),
    so the page names it beside each run."""
    def f(x: int) -> int:
        return x + 1
    best = float("inf")
    for _ in range(5):
        t = time.perf_counter()
        for i in range(calls):
            f(i)
        best = min(best, time.perf_counter() - t)
    return best / calls * 1e9


def yeast(d: Path, repeat: int) -> list[str]:
    qs = [read_query(d / "query_graphs" / f"query_graph-{i}.graph") for i in range(20)]
    rows = ["| scenario | backend | updates | embeddings (+/-) | seconds, 20 runs | "
            "vs RapidFlow 0.75 s |", "|---|---|---|---|---|---|"]
    for name, g, s in (("insertion", "initial_graph.graph", "insertion_graph.graph"),
                       ("deletion", "data_graph.graph", "deletion_graph.graph")):
        graph, stream = read_graph(d / g), read_stream(d / s)
        for backend in ("gpu", "cpu"):
            total, pos, neg, each = 0.0, 0, 0, []
            for q in qs:
                t, p, n = time_run(backend, graph, [q], stream, CountMode.EMBEDDINGS, repeat,
                                    len(stream))
                total, pos, neg = total + t, pos + p, neg + n
                each.append(f"{t * 1e3:.1f}")
            rows.append(f"| {name} | {backend} | {len(stream):,} x 20 | +{pos:,} / -{neg:,} | "
                        f"{total:.3f} | {RAPIDFLOW_INSERT_SECONDS / total:.1f}x |")
            print(rows[-1], flush=True)
            print(f"{name} {backend} ms per query 0-19: {' '.join(each)}", flush=True)
    graph = read_graph(d / "initial_graph.graph")
    stream = read_stream(d / "insertion_graph.graph")
    if BACKEND == "gpu":   # work-unit granularity: level-2 slices, sub-task timeout
        from gpu.cuda._executor import GpuConfig, GpuExecutor
        dflt = GpuConfig().split_us
        sweep = [(1, dflt), (4, dflt), (32, dflt)]
        sweep += [(4, us) for us in (0.0, 10.0, 40.0, 160.0) if us != dflt]
        for size, split in sweep:
            ex = GpuExecutor(GpuConfig(slice_size=size, max_slices=4096, split_us=split))
            best = float("inf")
            for _ in range(repeat):
                eng = Engine(executor=ex)
                eng.load_graph(graph.vertex_ids, graph.vertex_labels, graph.src, graph.dst,
                               graph.label)
                for q in qs:
                    eng.register(QuerySpec(q, CountMode.EMBEDDINGS))
                t = time.perf_counter()
                eng.apply(stream)
                best = min(best, time.perf_counter() - t)
            rows.append(f"| insertion, 20 queries at once, one batch, slice_size={size}, "
                        f"split_us={split:g} | gpu "
                        f"| {len(stream):,} | | {best:.3f} | "
                        f"{RAPIDFLOW_INSERT_SECONDS / best:.1f}x |")
            print(rows[-1], flush=True)
    for b in (64, len(stream)):
        t, p, _ = time_run(BACKEND, graph, qs, stream, CountMode.EMBEDDINGS, repeat, b)
        rows.append(f"| insertion, 20 queries standing at once, b={b} | gpu | {len(stream):,} | "
                    f"+{p:,} | {t:.3f} | {RAPIDFLOW_INSERT_SECONDS / t:.1f}x |")
        print(rows[-1], flush=True)
    return rows


def _big_dataset(edges: int, max_query: int = 5):  # type: ignore[no-untyped-def]
    cfg = GenConfig(vertices=edges // 5, edges=edges, labels=8, queries=4, min_query=3,
                    max_query=max_query, insert_ratio=0.45, delete_ratio=0.05, seed=7)
    return cfg, generate(cfg)


def _window(edges: int, window: int):  # type: ignore[no-untyped-def]
    """The generated data set, its queries and the first ``window`` updates."""
    _, ds = _big_dataset(edges)
    return ds, [q for _, q in ds.queries], ds.stream.slice(0, window)


def batch_sweep(edges: int, windows: list[int], plots: Path | None,
                in_flight: int | None = None) -> list[str]:
    """Throughput against b over the first ``windows[i]`` updates of the stream: the short
    window has the pipeline's ramp (its first launches carry one batch each, later ones
    gather what arrives while two run), the long one is closer to a steady stream.
    ``in_flight``: every b keeps the same updates in flight (``time_run``)."""
    cfg, ds = _big_dataset(edges)
    rows = [f"Generated: `GenConfig(vertices={cfg.vertices:,}, edges={cfg.edges:,}, labels="
            f"{cfg.labels}, queries={cfg.queries}, query sizes {cfg.min_query}-"
            f"{cfg.max_query}, insert_ratio=0.45, delete_ratio=0.05, seed=7)`; the first "
            f"{' and the first '.join(f'{w:,}' for w in windows)} updates of the stream, all "
            "queries standing, embeddings mode; batches of b submitted with "
            + (f"up to {IN_FLIGHT_UPDATES:,} updates (at least {PIPELINE} batches) in flight"
               if in_flight is None else
               f"{in_flight:,} updates in flight whatever b (one batch at least)")
            + "; best of 3 "
            "fresh engines (a single run at b=8 varied by 2x on one instance). "
            "Launches: device pipeline launches (batches submitted while it is busy share one).",
            "", "| updates | b | seconds | updates/s | matches (+/-) | share of b=4096 | launches |",
            "|---|---|---|---|---|---|---|"]
    qs = [q for _, q in ds.queries]
    plotted = []
    for window in windows:
        stream = ds.stream.slice(0, window)
        res = []
        for b in (1, 8, 64, 512, 4096):
            st: dict[str, int] = {}
            t, p, n = time_run(BACKEND, ds.initial, qs, stream, CountMode.EMBEDDINGS, 3, b, st,
                               in_flight=in_flight)
            res.append((b, t, p, n, st.get("launches", 0)))
            print(window, b, t, p, n, st, flush=True)
        top = len(stream) / res[-1][1]
        for b, t, p, n, la in res:
            rows.append(f"| {len(stream):,} | {b} | {t:.3f} | {len(stream) / t:,.0f} | +{p:,} / "
                        f"-{n:,} | {len(stream) / t / top:.0%} | {la:,} |")
        plotted.append((len(stream), [(r[0], len(stream) / r[1]) for r in res]))
    if plots is not None:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        fig, ax = plt.subplots(figsize=(5, 3.5))
        for n, pts in plotted:
            ax.plot([x for x, _ in pts], [y for _, y in pts], "o-", label=f"{n:,} updates")
        ax.set_xscale("log", base=2)
        ax.set_xlabel("updater batch size b")
        ax.set_ylabel("updates / s")
        ax.set_title("GPU throughput vs batch size")
        ax.legend()
        fig.tight_layout()
        fig.savefig(plots / ("gpu_batch_size.png" if in_flight is None
                             else "gpu_batch_size_equal.png"), dpi=120)
    return rows


def breakdown(edges: int, window: int) -> list[str]:
    """Where one batch's time goes on today's path (host updater, install, tasks and
    launch, wait and result), one batch at a time so that each phase is its own."""
    ds, qs, stream = _window(edges, window)
    rows = ["The generated 1.2M-edge stream of the batch sweep, its 4 queries (3-5 "
            "vertices) standing, embeddings; one batch at a time (no pipelining); "
            "microseconds per batch, median over the batches.", "",
            "| graph | b | resolve | install | tasks + units + launch | wait + result | "
            "total |", "|---|---|---|---|---|---|---|"]
    for device_graph, b in [(d, b) for d in (False, True) for b in (1, 8, 64, 512)]:
        eng = engine(BACKEND, ds.initial, qs, CountMode.EMBEDDINGS, device_graph)
        g, ex = eng.graph, eng.executor
        phases = []
        for chunk in list(iter_chunks(stream, b))[: max(20, 4000 // b)]:
            t0 = time.perf_counter()
            g.set_watermark(g.tick)
            ops = g.apply(chunk)
            t1 = time.perf_counter()
            ex.on_update(g, ops)
            t2 = time.perf_counter()
            ei = ops.applied_edges()
            ps = eng._plan_set()
            tasks = eng._edge_tasks(ops, ei, ps)
            ticket = ex.submit(g, ps, tasks) if len(tasks) else None
            t3 = time.perf_counter()
            if ticket is not None:
                ticket.wait()
            t4 = time.perf_counter()
            phases.append((t1 - t0, t2 - t1, t3 - t2, t4 - t3, t4 - t0))
        med = np.median(np.array(phases), axis=0) * 1e6
        kind = "device-owned" if device_graph else "host updater + mirror"
        rows.append(f"| {kind} | {b} | " + " | ".join(f"{x:,.0f}" for x in med) + " |")
        print(rows[-1], flush=True)
    return rows


def updater(edges: int, window: int) -> list[str]:
    """The device graph updater (kernels/update.cu) against the host updater (numba) on
    the same stream: wall time per batch (host id map, copy, launch, read-back included)
    and the resolver kernel's own device time."""
    from gpu import HostGraph
    from gpu.cuda._updater import DeviceUpdater

    cfg, ds = _big_dataset(edges)
    stream = ds.stream.slice(0, window)
    g0 = ds.initial
    rows = ["Resolving and installing the same stream (no matching): the host updater "
            "(numba, today's path, without its install step) against the device updater, "
            "parallel (one block: edge-only tiles of 1,024 resolved in parallel, one new "
            "version per touched vertex) and one-warp (sequential); one launch per batch, "
            "synchronous, results read back.", "",
            "| b | host updater (updates/s) | device parallel, wall | device parallel, kernel "
            "only | device one-warp, kernel only | us per batch, parallel wall |",
            "|---|---|---|---|---|---|"]
    for b in (1, 8, 64, 512, 4096):
        chunks = list(iter_chunks(stream, b))[: max(50, 20000 // b)]
        n = sum(len(c) for c in chunks)
        host = HostGraph()
        host.load(g0.vertex_ids, g0.vertex_labels, g0.src, g0.dst, g0.label)
        t = time.perf_counter()
        for c in chunks:
            host.apply(c)
        th = time.perf_counter() - t
        res = []
        for parallel in (True, False):
            dev = DeviceUpdater(parallel=parallel)
            dev.load(g0.vertex_ids, g0.vertex_labels, g0.src, g0.dst, g0.label)
            dev.apply(chunks[0].slice(0, 0))
            dev.kernel_seconds = 0.0
            t = time.perf_counter()
            for c in chunks:
                dev.apply(c)
            res.append((time.perf_counter() - t, dev.kernel_seconds))
        (tp, kp), (_, ks) = res
        rows.append(f"| {b} | {n / th:,.0f} | {n / tp:,.0f} | {n / kp:,.0f} | {n / ks:,.0f} | "
                    f"{tp / len(chunks) * 1e6:,.0f} |")
        print(rows[-1], flush=True)
    return rows


def pipeline(edges: int, window: int) -> list[str]:
    """Where one batch's time goes on the device pipeline (gpu/cuda/_pipeline.py), one batch at
    a time: the host's submit (id map, control block, one graph launch), the device's
    time for the whole step (resolve, units, matching, collection), and the host's
    result (reading the control block, building the BatchResult)."""
    ds, qs, stream = _window(edges, window)
    rows = ["The stream and queries of the breakdown above, device-owned graph through the "
            "device pipeline (`ExecutorOptions(device_graph=True)`, count mode); one batch "
            "at a time; microseconds per batch, median over the batches.", "",
            "| b | host: submit | device: resolve + units + match + collect | host: result | "
            "total (wall) | updates/s one at a time | device per kernel, uncaptured: apply / "
            "units / match / collect |", "|---|---|---|---|---|---|---|"]
    for b in (1, 8, 64, 512, 4096):
        eng = engine(BACKEND, ds.initial, qs, CountMode.EMBEDDINGS, True)
        pipe = eng.executor._pipeline  # type: ignore[attr-defined]
        chunks = list(iter_chunks(stream, b))[: max(30, 8000 // b)]
        eng.apply(chunks[0])   # configure and capture outside the timing
        phases = []
        for chunk in chunks[1:]:
            e0 = pipe.stream.record()
            t0 = time.perf_counter()
            p = eng.submit(chunk)
            t1 = time.perf_counter()
            p.ticket.sync()
            t2 = time.perf_counter()
            p.result()
            t3 = time.perf_counter()
            dev = pipe.cp.cuda.get_elapsed_time(e0, p.ticket.launch.event) / 1e3
            phases.append((t1 - t0, dev, t3 - t2, t3 - t0))
        med = np.median(np.array(phases), axis=0) * 1e6
        # the same batches again, kernels one by one with events between them
        eng = engine(BACKEND, ds.initial, qs, CountMode.EMBEDDINGS, True)
        pipe = eng.executor._pipeline  # type: ignore[attr-defined]
        pipe.timed = True
        eng.apply(chunks[0])
        ks = np.median(np.array([eng.submit(c).ticket.kernel_seconds() for c in chunks[1:]]),
                       axis=0) * 1e6
        rows.append(f"| {b} | " + " | ".join(f"{x:,.0f}" for x in med)
                    + f" | {b / med[3] * 1e6:,.0f} | "
                    + " / ".join(f"{x:,.0f}" for x in ks) + " |")
        print(rows[-1], flush=True)
    return rows


def enron(d: Path, repeat: int) -> list[str]:
    """The Enron reference set per query (issue 20's workload) on the device pipeline:
    the whole stream as one batch and b=64, against RapidFlow's per-query seconds."""
    import csv

    ref = {}
    with (d / "rapidflow_reference.csv").open() as fh:
        for r in csv.DictReader(fh):
            ref[int(r["query"]), r["scenario"]] = float(r["rapidflow_seconds"])
    scen = (("insert", "initial_graph.graph", "insertion_graph.graph"),
            ("delete", "data_graph.graph", "deletion_graph.graph"))
    data = {s: (read_graph(d / g), read_stream(d / u)) for s, g, u in scen}
    rows = ["Device-owned graph and the device pipeline, embeddings mode, each query on a "
            f"fresh engine, minimum of {repeat} runs; RapidFlow's seconds from "
            "`rapidflow_reference.csv` (single-threaded, 2-core machine). Device us: the "
            "one batch's launch once more with its four kernels timed apart (events "
            "between them): resolve / units / match / collect.", "",
            "| query | scenario | matches (+/-) | ours, one batch (s) | ours, b=64 (s) | "
            "RapidFlow (s) | ratio, one batch | ratio, b=64 | device us, one batch |",
            "|---|---|---|---|---|---|---|---|---|"]
    tot: dict[tuple[str, int], float] = {}
    for i in range(8):
        q = read_query(d / f"query_graph-{i}.graph")
        for s, _, _ in scen:
            graph, stream = data[s]
            t1, p, n = time_run(BACKEND, graph, [q], stream, CountMode.EMBEDDINGS, repeat,
                                len(stream))
            t64, _, _ = time_run(BACKEND, graph, [q], stream, CountMode.EMBEDDINGS, repeat, 64)
            r = ref[i, s]
            for k, t in ((0, t1), (64, t64)):
                tot[s, k] = tot.get((s, k), 0.0) + t
            tot[s, -1] = tot.get((s, -1), 0.0) + r
            rows.append(f"| {i} | {s} | +{p:,} / -{n:,} | {t1:.4f} | {t64:.4f} | {r:.4f} | "
                        f"{r / t1:.2f}x | {r / t64:.2f}x | {_kernel_split(graph, q, stream)} |")
            print(rows[-1], flush=True)
    for s, _, _ in scen:
        r = tot[s, -1]
        rows.append(f"| **total** | {s} | | {tot[s, 0]:.4f} | {tot[s, 64]:.4f} | {r:.4f} | "
                    f"{r / tot[s, 0]:.2f}x | {r / tot[s, 64]:.2f}x |")
    return rows


def _kernel_split(graph, q, stream: UpdateBatch) -> str:  # type: ignore[no-untyped-def]
    """Device microseconds of each kernel of ``stream`` as one launch on a fresh engine
    (the pipeline timed: events between its kernels), or n/a without the pipeline."""
    from gpu.cuda._pipeline import LAUNCH_CAP

    eng = engine(BACKEND, graph, [q], CountMode.EMBEDDINGS)
    pipe = getattr(eng.executor, "_pipeline", None)
    if pipe is None or len(stream) > LAUNCH_CAP:
        return "n/a"
    pipe.timed = True
    ks = eng.submit(stream).ticket.kernel_seconds()
    return " / ".join(f"{x * 1e6:,.0f}" for x in ks)


def _serve(eng: Engine, stream: UpdateBatch, arrivals: np.ndarray, b: int,
           wait: float, per_query: bool = False) -> tuple[np.ndarray, np.ndarray | None]:
    """Replays arrivals in real time; returns each update's response time in seconds and,
    with ``per_query``, each delta's (an update's nonzero change to one query's matches).

    Batches close at b updates, once the first waiting update has waited ``wait``, or at
    once when nothing is in flight (the service's batching: it takes what has arrived
    whenever the engine has room, so a lone update never waits for company); up to
    PIPELINE batches, or IN_FLIGHT_UPDATES updates, are in flight at once, and a batch's
    updates are done when its result is read, which each turn does for every finished
    batch at the head of those in flight before it submits more. With ``per_query`` each
    turn also takes every query's next batches that are ready for that query
    (``PendingBatch.ready_queries``: per-query delivery, in seq order within the query); a
    delta is ready then, or when its batch's result is read, whichever comes first.
    """
    n = len(stream)
    done = np.zeros(n)
    qids = [q.id for q in eng.queries] if per_query else []
    qdone = np.zeros((n, len(qids)))
    nonzero = np.zeros((n, len(qids)), np.bool_)
    t0 = time.perf_counter()
    batches: list = []   # (pending, lo, hi) in submission order; None once read
    head = [0] * len(qids)   # each query's next batch not yet delivered
    first = 0                # the oldest batch not yet read
    i = 0

    def flying() -> int:
        return len(batches) - first

    def finish_oldest() -> None:
        nonlocal first
        p, lo, hi = batches[first]
        r = p.result()
        t = time.perf_counter() - t0
        done[lo:hi] = t
        if per_query:
            nonzero[lo:hi] = r.counts != 0
            for j in range(len(qids)):
                if head[j] <= first:   # read before the query was seen ready
                    qdone[lo:hi, j] = t
                    head[j] = first + 1
        batches[first] = None
        first += 1

    def deliver() -> None:
        ready: dict[int, tuple[int, ...]] = {}   # a batch's ready queries, one poll each
        for j, q in enumerate(qids):
            while head[j] < len(batches):
                k = head[j]
                if k not in ready:
                    ready[k] = batches[k][0].ready_queries()
                if q not in ready[k]:
                    break
                qdone[batches[k][1]:batches[k][2], j] = time.perf_counter() - t0
                head[j] += 1

    while i < n:
        # read every finished batch at the head first (the service's reader does): a
        # replay that fell behind submitted at once on every turn and read nothing until
        # its next idle moment, so results ready for 10-60 ms counted as not ready
        deliver()
        while flying() and batches[first][0].ready:
            finish_oldest()
        now = time.perf_counter() - t0
        if arrivals[i] > now:              # idle: finish what is in flight, then wait
            if flying():
                if per_query and not batches[first][0].ready:
                    continue               # (taking each query as it comes)
                finish_oldest()
            continue
        deadline = arrivals[i] + wait
        j = int(np.searchsorted(arrivals, now, side="right"))
        while j - i < b and now < deadline and j < n:
            deliver()
            if flying() and batches[first][0].ready:
                finish_oldest()
            if not flying():   # the device is idle: nothing to wait for
                break
            now = time.perf_counter() - t0
            j = int(np.searchsorted(arrivals, now, side="right"))
        j = min(j, i + b)
        batches.append((eng.submit(stream.slice(i, j)), i, j))
        while flying() > PIPELINE and j - batches[first][1] > IN_FLIGHT_UPDATES:
            finish_oldest()
        i = j
    while flying():
        deliver()
        finish_oldest()
    delta = (qdone - arrivals[:, None])[nonzero] if per_query else None
    return done - arrivals, delta


class CollectorPass(NamedTuple):
    start: float   # time.perf_counter()
    seconds: float
    generation: int


@contextlib.contextmanager
def collector_passes() -> Iterator[list[CollectorPass]]:
    """Each pass of Python's cyclic collector meanwhile."""
    passes: list[CollectorPass] = []
    began = [0.0]

    def watch(phase: str, info: dict) -> None:  # type: ignore[type-arg]
        if phase == "start":
            began[0] = time.perf_counter()
        else:
            passes.append(CollectorPass(began[0], time.perf_counter() - began[0],
                                        info["generation"]))

    gc.callbacks.append(watch)
    try:
        yield passes
    finally:
        gc.callbacks.remove(watch)


def latency(edges: int, count: int, b: int, wait: float, plots: Path | None,
            max_query: int, per_query: bool = False) -> list[str]:
    cfg, ds = _big_dataset(edges, max_query)
    qs = [q for _, q in ds.queries]
    rng = np.random.default_rng(1)
    sizes = "3" if max_query == 3 else f"3-{max_query}"
    rows = [f"Same generated graph, queries of {sizes} vertices; up to {count:,} "
            "updates (about 2 s of arrivals) per rate with exponential "
            f"inter-arrival times; batches close at b={b} updates, after t={wait * 1e3:g} "
            "ms, or at once when nothing is in flight; response time = arrival to delta "
            "ready in the engine."
            + (" Per delta: each query's deltas once that query is ready (per-query "
               "delivery), an update's nonzero change to one query's matches a sample."
               if per_query else ""), "",
            "| offered rate (updates/s) | updates | achieved (updates/s) | p50 (ms) | p99 (ms) |"
            + (" deltas | p50 per delta (ms) | p99 per delta (ms) |" if per_query else ""),
            "|---|---|---|---|---|" + ("---|---|---|" if per_query else "")]
    pts = []
    for rate in (1e3, 1e4, 1e5, 3e5, 1e6, 1e7):
        # the last rate's engine freed before the next is built: reference cycles keep an
        # engine until a full collection (the next one's load collects only what is
        # garbage by then), and meanwhile its launches' result regions block the shared
        # arena's ring, so the next engine's launches grow it (pinned memory, which waits
        # for the device) or a collection frees it inside a timed run: the suspected
        # 2.5-3.8 ms stall at 100,000 updates/s (docs/benchmarks.md, stop 47)
        eng = None
        gc.collect()
        eng = engine(BACKEND, ds.initial, qs, CountMode.EMBEDDINGS)
        n = int(min(count, max(2000, rate * 2.0)))   # at most ~2 s of arrivals per rate
        stream = ds.stream.slice(0, n)
        arr = np.cumsum(rng.exponential(1 / rate, n))
        arr -= arr[0]
        with collector_passes() as passes:
            rt, delta = _serve(eng, stream, arr, b, wait, per_query)
        print(f"rate {rate:,.0f}: {len(passes)} collector passes, the longest "
              f"{max((x.seconds for x in passes), default=0) * 1e3:.2f} ms", flush=True)
        span = arr[-1] + rt[-1]
        p50, p99 = np.percentile(rt, 50) * 1e3, np.percentile(rt, 99) * 1e3
        pts.append((rate, n / span, p50, p99))
        rows.append(f"| {rate:,.0f} | {n:,} | {n / span:,.0f} | {p50:.3f} | {p99:.3f} |")
        if delta is not None and len(delta):
            rows[-1] += (f" {len(delta):,} | {np.percentile(delta, 50) * 1e3:.3f} | "
                         f"{np.percentile(delta, 99) * 1e3:.3f} |")
        print(rows[-1], flush=True)
    if plots is not None:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        fig, ax = plt.subplots(figsize=(5, 3.5))
        ax.plot([p[0] for p in pts], [p[2] for p in pts], "o-", label="p50")
        ax.plot([p[0] for p in pts], [p[3] for p in pts], "s-", label="p99")
        ax.axhline(1.0, color="grey", lw=0.8, ls="--")
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("offered update rate (updates / s)")
        ax.set_ylabel("response time (ms)")
        ax.legend()
        ax.set_title("GPU response time vs update rate")
        fig.tight_layout()
        fig.savefig(plots / f"gpu_response_time_q{max_query}.png", dpi=120)
    return rows


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--yeast", type=Path, default=ROOT / ".local-data" / "yeast")
    ap.add_argument("--enron", type=Path, default=ROOT / ".local-data" / "enron-labeled")
    ap.add_argument("--sections", default="yeast,batch,latency")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--edges", type=int, default=1_200_000)
    ap.add_argument("--window", type=int, default=50_000)
    ap.add_argument("--latency-updates", type=int, default=20_000)
    ap.add_argument("--batch-windows", default=None,
                    help="the batch sweep's stream lengths, comma-separated (default: --window)")
    ap.add_argument("--in-flight", type=int, default=16_384,
                    help="batch-equal: the updates in flight at every b")
    ap.add_argument("--plots", type=Path, default=None)
    ap.add_argument("--out", type=Path, default=ROOT / "docs" / "benchmarks.md")
    args = ap.parse_args()
    warm_up("cpu")
    warm_up(BACKEND)
    secs = args.sections.split(",")
    env = os.environ.get("CSM_BENCH_DEVICE_GRAPH")
    graph = f"CSM_BENCH_DEVICE_GRAPH={env} " if env is not None else ""
    lines = ["## GPU executor", "",
             f"Command: `{graph}python bench/gpu_bench.py --sections {args.sections}`  ",
             f"Machine: {_device()}  ", f"Date: {time.strftime('%Y-%m-%d')}", ""]
    if "yeast" in secs:
        lines += ["### Yeast, queries 0-19, embeddings mode", "",
                  "Each query on a fresh engine, the whole stream as one batch, minimum of "
                  f"{args.repeat} runs; update processing only (`Engine.apply`).", ""]
        lines += yeast(args.yeast, args.repeat)
    windows = [int(x) for x in (args.batch_windows or str(args.window)).split(",")]
    if "batch" in secs:
        lines += ["", "### Throughput against the updater batch size b", ""]
        lines += batch_sweep(args.edges, windows, args.plots)
    if "batch-equal" in secs:
        lines += ["", f"### Throughput against b, {args.in_flight:,} updates in flight for "
                  "every b", ""]
        lines += batch_sweep(args.edges, windows, args.plots, args.in_flight)
    pipe = ["## GPU pipeline (device-resident updates)", "",
            f"Command: `python bench/gpu_bench.py --sections {args.sections} --window "
            f"{args.window}`  ", f"Machine: {_device()}  ", f"Date: {time.strftime('%Y-%m-%d')}"]
    if "breakdown" in secs:
        pipe += ["", "### Where one batch's time goes: host updater + mirror (before) and "
                 "device-owned graph (after)", ""]
        pipe += breakdown(args.edges, args.window)
    if "updater" in secs:
        pipe += ["", "### The graph updater on the device", ""]
        pipe += updater(args.edges, args.window)
    dev = ["## GPU device pipeline (one captured launch per batch)", "",
           f"Command: `CSM_BENCH_DEVICE_GRAPH=1 python bench/gpu_bench.py --sections "
           f"{args.sections} --window {args.window}`  ", f"Machine: {_device()}  ",
           f"Date: {time.strftime('%Y-%m-%d')}"]
    if "pipeline" in secs:
        dev += ["", "### Where one batch's time goes on the device pipeline", ""]
        dev += pipeline(args.edges, args.window)
    if "enron" in secs:
        dev += ["", "### Enron, per query (RapidFlow reference)", ""]
        dev += enron(args.enron, args.repeat)
    if "latency" in secs:
        for mq in (3, 5):
            lines += ["", f"### Response time against the update rate (queries of 3-{mq} "
                      "vertices)", ""]
            lines += latency(args.edges, args.latency_updates, 64, 0.125e-3, args.plots, mq,
                             per_query=True)
    if {"yeast", "batch", "batch-equal", "latency"} & set(secs):
        write_section(args.out, BEGIN, END, lines)
    if {"breakdown", "updater"} & set(secs):
        write_section(args.out, PIPE_BEGIN, PIPE_END, pipe)
    if {"pipeline", "enron"} & set(secs):
        write_section(args.out, DEV_BEGIN, DEV_END, dev)


if __name__ == "__main__":
    main()
