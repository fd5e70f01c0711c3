import math

import pytest

from gpu import CountMode, Query, QueryError
from gpu.planning._planner import PlanSet, plan_query
from gpu.planning._symmetry import analyse_symmetry, edge_orbits


def _q(n: int, edges: list[tuple[int, int]], labels: list[int | None] | None = None) -> Query:
    labels = labels or [None] * n
    return Query.build([(i, labels[i]) for i in range(n)], [(a, b, None) for a, b in edges])


@pytest.mark.parametrize(("q", "aut"), [
    (_q(3, [(0, 1), (1, 2), (0, 2)]), 6),
    (_q(4, [(0, 1), (1, 2), (2, 3), (3, 0)]), 8),
    (_q(4, [(0, 1), (0, 2), (0, 3)]), 6),
    (_q(3, [(0, 1), (1, 2)]), 2),
    (_q(3, [(0, 1), (1, 2), (0, 2)], [1, 1, 2]), 2),
    (_q(4, [(0, 1), (1, 2), (2, 3), (3, 0)], [1, 2, 1, 2]), 4),
    (_q(12, [(i, j) for i in range(12) for j in range(i + 1, 12)]), math.factorial(12)),
])
def test_automorphism_group_sizes(q: Query, aut: int) -> None:
    s = analyse_symmetry(q)
    assert s.automorphisms == aut
    # conditions are orbit constraints: never more than n(n-1)/2 of them
    assert len(s.conditions) <= q.n * (q.n - 1) // 2


def test_edge_labels_break_symmetry() -> None:
    q = Query.build([(0, None), (1, None), (2, None)], [(0, 1, 1), (1, 2, 2), (0, 2, 3)])
    assert analyse_symmetry(q).automorphisms == 1


def test_one_plan_per_directed_edge_and_backward_sets() -> None:
    q = _q(4, [(0, 1), (1, 2), (2, 3), (3, 0), (0, 2)])
    qp = plan_query(q, CountMode.SUBGRAPHS, listing=True)
    assert len(qp.plans) == 10 and qp.automorphisms == 4
    for p in qp.plans:
        seen = {p.levels[0].vertex, p.levels[1].vertex}
        for L, lv in enumerate(p.levels[2:], start=2):
            assert lv.intersect or lv.reuse >= 0
            assert all(lvl < L for lvl, _ in lv.intersect)
            assert lv.depends_on < L
            seen.add(lv.vertex)
        assert seen == {0, 1, 2, 3}


def test_query_too_large() -> None:
    with pytest.raises(QueryError):
        _q(13, [(i, i + 1) for i in range(12)])


@pytest.mark.parametrize(("q", "sizes"), [
    (_q(3, [(0, 1), (1, 2), (0, 2)]), [6]),                       # triangle: arc-transitive
    (_q(4, [(0, 1), (1, 2), (2, 3), (3, 0)]), [8]),               # 4-cycle
    (_q(3, [(0, 1), (1, 2)]), [2, 2]),                            # path: ends, middle
    (_q(4, [(0, 1), (1, 2), (0, 2), (2, 3)]), [2, 2, 2, 1, 1]),   # tailed triangle
    (_q(3, [(0, 1), (1, 2), (0, 2)], [1, 1, 2]), [2, 2, 2]),
])
def test_edge_orbits_partition_the_directed_edges(q: Query, sizes: list[int]) -> None:
    orbits = edge_orbits(q)
    assert sorted(len(o) for o in orbits) == sorted(sizes)
    flat = [d for o in orbits for d in o]
    assert sorted(flat) == sorted(d for a, b, _ in q.edges for d in ((a, b), (b, a)))
    assert orbits[0][0] == q.edges[0][:2]
    aut = analyse_symmetry(q).automorphisms
    assert all(aut % len(o) == 0 for o in orbits)   # |O| divides |Aut| (orbit-stabiliser)


def test_counting_plans_one_edge_per_orbit_when_orbits_agree_in_size() -> None:
    tri = _q(3, [(0, 1), (1, 2), (0, 2)])
    qp = plan_query(tri, CountMode.SUBGRAPHS)
    assert len(qp.plans) == 1 and qp.scale == (1, 1) and qp.initial_scale == (1, 6)
    assert not any(lv.greater_than or lv.less_than for lv in qp.plans[0].levels)
    qp = plan_query(tri, CountMode.EMBEDDINGS)
    assert len(qp.plans) == 1 and qp.scale == (6, 1) and qp.initial_scale == (1, 1)
    k4 = _q(4, [(0, 1), (0, 2), (0, 3), (1, 2), (1, 3), (2, 3)])
    assert plan_query(k4, CountMode.SUBGRAPHS).scale == (1, 2)
    tailed = _q(4, [(0, 1), (1, 2), (0, 2), (2, 3)])   # orbit sizes differ: conditions
    qp = plan_query(tailed, CountMode.EMBEDDINGS)
    assert len(qp.plans) == 8 and qp.scale == (2, 1)


def test_orbits_of_unequal_size_give_weighted_count_plans() -> None:
    tailed = _q(4, [(0, 1), (1, 2), (0, 2), (2, 3)])
    qp = plan_query(tailed, CountMode.SUBGRAPHS)
    # one unconditioned plan per orbit of directed edges, weighted by the orbit's size
    assert sorted(size for _, size in qp.orbit_plans) == sorted(len(o) for o in edge_orbits(tailed))
    assert sum(size for _, size in qp.orbit_plans) == 2 * len(tailed.edges)
    assert not any(lv.greater_than or lv.less_than
                   for p, _ in qp.orbit_plans for lv in p.levels)
    assert not plan_query(tailed, CountMode.SUBGRAPHS, listing=True).orbit_plans
    ps = PlanSet.pack([qp.plans, qp.plans], [qp.orbit_plans, ()], [qp.automorphisms, 1])
    n = len(qp.plans)
    # the first query counts with rows after both queries' plans; the second with its own
    assert (ps.count_for[0], ps.count_lo[0], ps.count_hi[0]) == (n, 2 * n,
                                                                 2 * n + len(qp.orbit_plans))
    assert ps.count_div[0] == qp.automorphisms
    assert (ps.count_for[n], ps.count_lo[n], ps.count_hi[n],
            ps.count_div[n]) == (2 * n, n, 2 * n, 1)
    k = len(qp.orbit_plans)
    assert list(ps.weight[2 * n:2 * n + k]) == [s for _, s in qp.orbit_plans]
    assert len(ps.n) == 2 * n and ps.weighted
