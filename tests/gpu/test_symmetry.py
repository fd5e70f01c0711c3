import math

import pytest

from gpu import CountMode, Query, QueryError
from gpu._planner import plan_query
from gpu._symmetry import analyse_symmetry


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
    plans, aut = plan_query(q, CountMode.SUBGRAPHS)
    assert len(plans) == 10 and aut == 4
    for p in plans:
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
