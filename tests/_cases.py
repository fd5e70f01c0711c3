"""Small seeded random cases: graph, queries and an update stream hitting every rule."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from gpu import Query, UpdateBatch, UpdateOp

BIG = 1 << 40  # external ids far outside int32, to exercise the id map


@dataclass
class Case:
    vertices: list[tuple[int, int]]
    edges: list[tuple[int, int, int]]
    queries: list[Query]
    updates: list[tuple[int, int, int, int, int]]

    def batch(self, lo: int = 0, hi: int | None = None) -> UpdateBatch:
        u = self.updates[lo:hi]
        return UpdateBatch.build([x[0] for x in u], [x[1] for x in u], [x[2] for x in u],
                                 [x[3] for x in u], [x[4] for x in u])


def random_query(rng: np.random.Generator, n_labels: int, e_labels: int,
                 max_n: int = 5) -> Query:
    n = int(rng.integers(2, max_n + 1))
    edges = set()
    for v in range(1, n):
        edges.add((int(rng.integers(0, v)), v))
    for _ in range(int(rng.integers(0, n))):
        a, b = sorted(rng.choice(n, 2, replace=False).tolist())
        edges.add((a, b))
    lab = lambda k: None if rng.random() < 0.35 else int(rng.integers(0, k))  # noqa: E731
    return Query.build([(v, lab(n_labels)) for v in range(n)],
                       [(a, b, lab(e_labels)) for a, b in sorted(edges)])


def random_case(seed: int, n_updates: int = 40) -> Case:
    rng = np.random.default_rng(seed)
    nv = int(rng.integers(5, 11))
    n_labels = int(rng.integers(1, 3))
    e_labels = int(rng.integers(1, 3))
    ids = [BIG + 7 * i if rng.random() < 0.5 else i for i in range(nv + 3)]
    vertices = [(ids[i], int(rng.integers(0, n_labels))) for i in range(nv)]
    edges = []
    for _ in range(int(rng.integers(nv, 3 * nv))):
        a, b = rng.choice(nv, 2, replace=False)
        edges.append((ids[a], ids[b], int(rng.integers(0, e_labels))))
    queries = [random_query(rng, n_labels, e_labels) for _ in range(2)]
    updates = []
    live = {(min(a, b), max(a, b)) for a, b, _ in edges}
    for s in range(n_updates):
        r = rng.random()
        x, y = (ids[int(i)] for i in rng.choice(len(ids), 2, replace=True))
        if r < 0.45:
            op = UpdateOp.INSERT_EDGE
        elif r < 0.8:
            op = UpdateOp.DELETE_EDGE
            if live and rng.random() < 0.7:
                x, y = sorted(live)[int(rng.integers(0, len(live)))]
                if rng.random() < 0.5:
                    x, y = y, x
        elif r < 0.9:
            op = UpdateOp.INSERT_VERTEX
        else:
            op = UpdateOp.DELETE_VERTEX
        label = int(rng.integers(0, e_labels if op == UpdateOp.INSERT_EDGE else n_labels))
        if op in (UpdateOp.INSERT_EDGE,) and x != y:
            live.add((min(x, y), max(x, y)))
        if op == UpdateOp.DELETE_EDGE:
            live.discard((min(x, y), max(x, y)))
        updates.append((1000 + s, int(op), x, y, label))
    return Case(vertices, edges, queries, updates)


def churn_engine(backend: str, seed: int = 5):  # type: ignore[no-untyped-def]
    """A 200-vertex random graph with a triangle query standing, and a function that runs
    one churn round: 300 fresh edges inserted, then the same 300 deleted."""
    from gpu import CountMode, Engine, QuerySpec

    rng = np.random.default_rng(seed)
    eng = Engine(backend)
    n, k = 200, 300
    a = rng.integers(0, n, 600)
    b = (a + 1 + rng.integers(0, n - 1, 600)) % n
    eng.load_graph([], [], a, b, np.zeros(600))
    tri = Query.build([(0, None), (1, None), (2, None)], [(0, 1, None), (1, 2, None),
                                                           (0, 2, None)])
    eng.register(QuerySpec(tri, CountMode.SUBGRAPHS))

    def churn(rnd: int) -> None:
        x = n + np.arange(k)                     # disjoint from the loaded edges
        y = n + k + rng.permutation(k)
        eng.apply(UpdateBatch.build(np.arange(k) + 2 * k * rnd, np.zeros(k), x, y, np.zeros(k)))
        eng.apply(UpdateBatch.build(np.arange(k) + 2 * k * rnd + k, np.ones(k), x, y,
                                    np.zeros(k)))

    return eng, churn
