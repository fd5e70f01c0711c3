"""What the benchmark scripts share: timing a stream through an engine, and writing one
marked section of docs/benchmarks.md."""

from __future__ import annotations

import os
import platform
import time
from collections import deque
from collections.abc import Callable
from pathlib import Path

from gpu import CountMode, Engine, ExecutorOptions, QuerySpec, UpdateBatch
from streams import GraphData, iter_chunks

#: batches in flight while timing, at least (GpuConfig.depth); the CPU executor finishes
#: each at once
PIPELINE = 4
#: updates in flight while timing, at least: a client sending small batches as fast as it
#: can does not wait for each one (the device pipeline gathers the batches submitted while
#: it is busy into one launch; each keeps its own results)
IN_FLIGHT_UPDATES = 8192


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
             mode: CountMode, repeat: int, batch: int,
             stats: dict[str, int] | None = None,
             started: Callable[[], None] | None = None,
             in_flight: int | None = None) -> tuple[float, int, int]:
    """Best seconds over ``repeat`` fresh engines, and the matches created / destroyed.

    Only update processing is timed; results are read in order once more than PIPELINE
    batches and IN_FLIGHT_UPDATES updates are in flight (DCSM inter-batch parallelism).
    ``stats`` gets the device pipeline's launches of the last run (0 without one);
    ``started`` is called as each run's timing starts (a profiler leaves set-up out).
    ``in_flight``: instead, the same ``in_flight`` updates at most in flight whatever b
    (one batch at least): the rule above gives b=4096 16-20k updates in flight and b=64
    8k, so this one compares batch sizes alone.
    """
    best, pos, neg = float("inf"), 0, 0
    for _ in range(repeat):
        eng = engine(backend, graph, queries, mode)
        if started is not None:
            started()
        t = time.perf_counter()
        pos = neg = 0
        window: deque = deque()  # type: ignore[type-arg]
        flying = 0
        for chunk in iter_chunks(stream, batch):
            window.append(eng.submit(chunk))
            flying += len(chunk)
            while (len(window) > 1 and flying > in_flight if in_flight is not None
                   else len(window) > PIPELINE and flying > IN_FLIGHT_UPDATES):
                p = window.popleft()
                r = p.result()
                flying -= len(p.batch)
                pos, neg = pos + r.stats.positive, neg + r.stats.negative
        for p in window:
            r = p.result()
            pos, neg = pos + r.stats.positive, neg + r.stats.negative
        best = min(best, time.perf_counter() - t)
        if stats is not None:
            pipe = getattr(eng.executor, "_pipeline", None)
            stats["launches"] = pipe.launches if pipe is not None else 0
    return best, pos, neg


def cpu_model() -> str:
    """The host CPU's model name (``/proc/cpuinfo``; elsewhere what platform knows)."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown CPU"


def launch_cap_from_env() -> None:
    """LAUNCH_CAP, where set, replaces the device pipeline's launch capacity (an A/B of
    the capacity on one tree)."""
    if "LAUNCH_CAP" in os.environ:
        from gpu.cuda import _pipeline

        _pipeline.LAUNCH_CAP = int(os.environ["LAUNCH_CAP"])


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
