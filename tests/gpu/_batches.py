"""Shared inputs: a fixed batch of match tasks on a generated power-law graph (estimator and
cache tests), and raw update streams on which every updater rule fires."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import numpy as np

from gpu import (
    WILDCARD,
    CountMode,
    Engine,
    MatchTasks,
    Query,
    QuerySpec,
    UpdateBatch,
)
from gpu.planning._planner import PlanSet
from streams import GenConfig, generate, iter_chunks


def task_batch(backend: str = "cpu", size: int = 512, queries: list[Query] | None = None,
               seed: int = 3, list_matches: bool = False,
               **options: object) -> tuple[Engine, PlanSet, MatchTasks]:
    """The engine after its first ``size`` updates were applied to the host graph (not
    matched), with the plans and tasks that batch would match. Embeddings mode; with
    ``list_matches`` the plans carry no symmetry conditions."""
    from gpu import ExecutorOptions

    ds = generate(GenConfig(vertices=3000, edges=20000, labels=2, queries=3, min_query=4,
                            max_query=5, insert_ratio=0.2, delete_ratio=0.05, seed=seed))
    eng = Engine(backend, options=ExecutorOptions(**options))  # type: ignore[arg-type]
    g = ds.initial
    eng.load_graph(g.vertex_ids, g.vertex_labels, g.src, g.dst, g.label)
    for q in queries if queries is not None else [q for _, q in ds.queries]:
        eng.register(QuerySpec(q, CountMode.EMBEDDINGS, list_matches=list_matches))
    ops = eng.graph.apply(next(iter_chunks(ds.stream, size)))
    eng.executor.on_update(eng.graph, ops)
    ei = ops.applied_edges()
    ps = eng._plan_set()
    return eng, ps, eng._edge_tasks(ops, ei, ps)


def triangle() -> Query:
    return Query.build([(v, None) for v in range(3)], [(0, 1, None), (1, 2, None), (0, 2, None)])


def raw_stream(seed: int, n: int, ids: int, hub_every: int = 0,
               vertex_ops: float | None = None) -> UpdateBatch:
    """Raw updates over a small id space, so most rules fire often; ``vertex_ops`` is the
    share of vertex insertions and deletions (default 10%; the device's parallel
    resolver takes the tiles that have none)."""
    rng = np.random.default_rng(seed)
    v = vertex_ops
    p = [0.62, 0.28, 0.06, 0.04] if v is None else [0.7 * (1 - v), 0.3 * (1 - v), 0.6 * v,
                                                     0.4 * v]
    op = rng.choice(4, n, p=p).astype(np.int8)
    src = rng.integers(0, ids, n).astype(np.int64) * 1_000_003 + (1 << 40)
    dst = rng.integers(0, ids, n).astype(np.int64) * 1_000_003 + (1 << 40)
    if hub_every:   # a hub: many edges to one id, deleted as a vertex now and then
        hub = np.arange(n) % hub_every == 0
        src[hub] = 1 << 40
    label = rng.integers(0, 3, n).astype(np.int32)
    label[rng.random(n) < 0.01] = WILDCARD
    loops = rng.random(n) < 0.02
    dst[loops] = src[loops]
    return UpdateBatch.build(np.arange(n), op, src, dst, label)


def lagged_batches(stream: UpdateBatch, sizes: list[int], lag: int,
                   tick: Callable[[], int]) -> Iterator[tuple[UpdateBatch, int]]:
    """Chunks of ``stream`` with sizes cycling through ``sizes``, each with the watermark a
    pipeline ``lag`` batches deep would set before it (the tick the oldest batch still
    matching started from); ``tick()`` reads the graph's tick after the previous chunk."""
    ticks = [0]
    i = k = 0
    while i < len(stream):
        b = sizes[k % len(sizes)]
        k += 1
        yield stream.slice(i, i + b), ticks[max(0, len(ticks) - lag)]
        ticks.append(tick())
        i += b
