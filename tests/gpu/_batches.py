"""A fixed batch of match tasks on a generated power-law graph (estimator and cache tests)."""

from __future__ import annotations

import numpy as np

from gpu import CountMode, Engine, MatchTasks, Query, QuerySpec, UpdateOp, UpdateStatus
from gpu._planner import PlanSet
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
    edge = ((ops.op == UpdateOp.INSERT_EDGE) | (ops.op == UpdateOp.DELETE_EDGE)) & \
        (ops.status == UpdateStatus.APPLIED)
    ei = np.flatnonzero(edge)
    ps = eng._plan_set()
    return eng, ps, eng._edge_tasks(ops, ei, ps, tuple(eng._queries))


def triangle() -> Query:
    return Query.build([(v, None) for v in range(3)], [(0, 1, None), (1, 2, None), (0, 2, None)])
