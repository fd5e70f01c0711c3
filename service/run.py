"""Run a stream of updates through the engine from files: what ``csm run`` does."""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TextIO

from gpu import (
    BatchResult,
    BatchStats,
    CountMode,
    Engine,
    ExecutorOptions,
    PendingBatch,
    QuerySpec,
    UpdateBatch,
    warm_up,
)
from streams import GraphData, iter_chunks, read_graph, read_query, read_stream, write_deltas

__all__ = ["RunConfig", "RunReport", "run_engine", "run_files"]

_IN_FLIGHT = 4  # batches matched at once (GpuConfig.depth); 1 result read per submit


@dataclass(frozen=True, slots=True)
class RunConfig:
    backend: str = "auto"
    mode: CountMode = CountMode.SUBGRAPHS
    batch_size: int = 1024
    list_matches: bool = False
    max_matches: int = 1000
    executor: ExecutorOptions = ExecutorOptions()


@dataclass(frozen=True, slots=True)
class QueryReport:
    id: int
    source: str
    vertices: int
    edges: int
    automorphisms: int
    positive: int
    negative: int


@dataclass(frozen=True, slots=True)
class RunReport:
    backend: str
    mode: str
    graph_vertices: int
    graph_edges: int
    updates: int
    edge_updates: int
    applied: int
    ignored: int
    rejected: int
    positive: int
    negative: int
    seconds: float
    load_seconds: float
    deltas_written: int
    queries: list[QueryReport] = field(default_factory=list)

    @property
    def updates_per_second(self) -> float:
        return self.updates / self.seconds if self.seconds > 0 else 0.0

    def as_dict(self) -> dict[str, object]:
        d = {f: getattr(self, f) for f in self.__slots__ if f != "queries"}
        d["updates_per_second"] = self.updates_per_second
        d["queries"] = [{f: getattr(q, f) for f in q.__slots__} for q in self.queries]
        return d


def run_engine(engine: Engine, graph: GraphData, queries: Sequence[tuple[str, object]],
               stream: UpdateBatch, cfg: RunConfig, deltas: TextIO | None = None,
               progress: Callable[[int], None] | None = None) -> RunReport:
    t0 = time.perf_counter()
    load = engine.load_graph(graph.vertex_ids, graph.vertex_labels, graph.src, graph.dst,
                             graph.label)
    regs = []
    for _, q in queries:
        reg, _ = engine.register(QuerySpec(q, cfg.mode, list_matches=cfg.list_matches,  # type: ignore[arg-type]
                                           max_matches_per_update=cfg.max_matches))
        regs.append(reg)
    load_seconds = time.perf_counter() - t0
    total = BatchStats()
    per_q = {r.id: [0, 0] for r in regs}
    written = 0
    def consume(res: BatchResult, n: int) -> None:
        nonlocal total, written
        total = total + res.stats
        for j, q in enumerate(res.query_ids):
            col = res.counts[:, j]
            per_q[q][0] += int(col[col > 0].sum())
            per_q[q][1] += int(-col[col < 0].sum())
        if deltas is not None:
            written += write_deltas(deltas, res)
        if progress is not None:
            progress(n)

    # a few batches in flight (the GPU matches them at once); results are read in order
    t = time.perf_counter()
    window: deque[tuple[PendingBatch, int]] = deque()
    for chunk in iter_chunks(stream, cfg.batch_size):
        window.append((engine.submit(chunk), len(chunk)))
        if len(window) > _IN_FLIGHT:
            p, n = window.popleft()
            consume(p.result(), n)
    while window:
        p, n = window.popleft()
        consume(p.result(), n)
    seconds = time.perf_counter() - t
    return RunReport(
        backend=engine.backend, mode=cfg.mode.value, graph_vertices=load.vertices,
        graph_edges=load.edges, updates=total.updates, edge_updates=total.edge_updates,
        applied=total.applied, ignored=total.ignored, rejected=total.rejected,
        positive=total.positive, negative=total.negative, seconds=seconds,
        load_seconds=load_seconds, deltas_written=written,
        queries=[QueryReport(id=r.id, source=src, vertices=r.spec.query.n,
                             edges=len(r.spec.query.edges), automorphisms=r.automorphisms,
                             positive=per_q[r.id][0], negative=per_q[r.id][1])
                 for (src, _), r in zip(queries, regs, strict=True)])


def run_files(graph: str | Path, queries: Sequence[str | Path], stream: str | Path,
              fmt: str, cfg: RunConfig, deltas: TextIO | None = None,
              progress: Callable[[int], None] | None = None,
              on_stream: Callable[[int], None] | None = None) -> RunReport:
    """Parse everything first (bad input fails before anything runs), then run."""
    g = read_graph(graph, fmt)
    qs = [(str(p), read_query(p)) for p in queries]
    s = read_stream(stream, fmt)
    engine = Engine(cfg.backend, options=cfg.executor)
    warm_up(engine.backend)     # compile time is not update processing time
    if on_stream is not None:
        on_stream(len(s))
    return run_engine(engine, g, qs, s, cfg, deltas, progress)


