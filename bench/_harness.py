"""What the benchmark scripts share: timing a stream through an engine, and writing one
marked section of docs/benchmarks.md."""

from __future__ import annotations

import os
import time
from pathlib import Path

from gpu import CountMode, Engine, ExecutorOptions, QuerySpec, UpdateBatch
from streams import GraphData, iter_chunks

#: batches in flight while timing (GpuConfig.depth); the CPU executor finishes each at once
PIPELINE = 4


def engine(backend: str, graph: GraphData, queries: list, mode: CountMode,  # type: ignore[type-arg]
           device_graph: bool | None = None) -> Engine:
    """A loaded engine with ``queries`` standing. ``device_graph`` (GPU): the device owns
    the graph; None reads CSM_BENCH_DEVICE_GRAPH (1 or 0; unset: the executor's default)."""
    env = os.environ.get("CSM_BENCH_DEVICE_GRAPH")
    if device_graph is None and env is not None:
        device_graph = env != "0"
    opts = ExecutorOptions() if device_graph is None else ExecutorOptions(device_graph=device_graph)
    eng = Engine(backend, options=opts)
    eng.load_graph(graph.vertex_ids, graph.vertex_labels, graph.src, graph.dst, graph.label)
    for q in queries:
        eng.register(QuerySpec(q, mode))
    return eng


def time_run(backend: str, graph: GraphData, queries: list, stream: UpdateBatch,  # type: ignore[type-arg]
             mode: CountMode, repeat: int, batch: int) -> tuple[float, int, int]:
    """Best seconds over ``repeat`` fresh engines, and the matches created / destroyed.

    Only update processing is timed; results are read in order with up to PIPELINE
    batches in flight (DCSM inter-batch parallelism).
    """
    best, pos, neg = float("inf"), 0, 0
    for _ in range(repeat):
        eng = engine(backend, graph, queries, mode)
        t = time.perf_counter()
        pos = neg = 0
        window: list = []  # type: ignore[type-arg]
        for chunk in iter_chunks(stream, batch):
            window.append(eng.submit(chunk))
            if len(window) > PIPELINE:
                r = window.pop(0).result()
                pos, neg = pos + r.stats.positive, neg + r.stats.negative
        for p in window:
            r = p.result()
            pos, neg = pos + r.stats.positive, neg + r.stats.negative
        best = min(best, time.perf_counter() - t)
    return best, pos, neg


def write_section(out: Path, begin: str, end: str, lines: list[str]) -> None:
    """Replace the text between the markers (or append it) in ``out``."""
    block = "\n".join([begin, *lines, end])
    text = out.read_text() if out.exists() else "# Benchmarks\n\n"
    if begin in text:
        head, rest = text.split(begin, 1)
        text = head + block + rest.split(end, 1)[1]
    else:
        text = text.rstrip() + "\n\n" + block + "\n"
    out.write_text(text)
