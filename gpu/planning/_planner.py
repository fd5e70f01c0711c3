"""Matching plans: one nested loop per directed query edge (GCSM formula (1), Fig. 15).

For an update on data edge ``(a, b)`` the plan for directed query edge ``(ux, uy)``
binds ``f(ux)=a, f(uy)=b`` and extends level by level. Level ``L`` lists its
*backward* neighbours (query vertices bound earlier) whose neighbour lists are
intersected; when an earlier level's backward set is a subset of ours with the same
edge labels, its intersection result is reused (T-DFS result reuse, STMatch code
motion) and only the remaining lists are intersected. Symmetry-breaking conditions
become per-level bitmasks of earlier levels the candidate must be greater / less than.

All plans of all queries are packed into flat int32 arrays (:class:`PlanSet`) that the
numba and CUDA kernels read directly.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt

from .._types import MAX_QUERY_VERTICES, WILDCARD, CountMode
from ._query import Query
from ._symmetry import analyse_symmetry, edge_orbits

__all__ = ["LevelPlan", "Plan", "PlanSet", "QueryPlan", "plan_query"]

#: field index in the packed table ``PlanSet.table[plan, field, level]`` read by kernels
(F_VERTEX, F_LABEL, F_DEGREE, F_REUSE, F_NBOFF, F_NBCNT, F_GT, F_LT, F_DEP, F_NLFOFF,
 F_NLFCNT, F_MISC) = range(12)
N_FIELDS = 12  # F_MISC row: [0] = query size, [1] = root edge label, [2] = mirror row (0: none),
#               [1 + j] for levels j >= 2: the last level's collision facts of f(j) (``collisions``)
#: bits of a collision word (``collisions``): the last level's lists that must be searched
#: for f(j) (bits 0..11; all of them where the plan knows nothing), f(j) is never a
#: candidate, the answer holds while f(j) does
C_LISTS, C_NEVER, C_STEADY = (1 << 12) - 1, 1 << 12, 1 << 13

_W = int(WILDCARD)


@dataclass(frozen=True, slots=True)
class LevelPlan:
    vertex: int
    label: int
    degree: int
    #: earlier levels whose neighbour lists are intersected here, with the edge label
    intersect: tuple[tuple[int, int], ...]
    #: earlier level whose intersection result is reused, or -1
    reuse: int
    greater_than: tuple[int, ...]
    less_than: tuple[int, ...]
    #: deepest earlier level this level's candidate set depends on (loop-invariant code
    #: motion: the set is recomputed only when that level moves)
    depends_on: int = 0
    #: neighbour-label filter: (label, how many query neighbours carry it)
    label_needs: tuple[tuple[int, int], ...] = ()


@dataclass(frozen=True, slots=True)
class Plan:
    root_label: int
    levels: tuple[LevelPlan, ...]
    #: the same root with the last two levels swapped (a 4-cycle grown from the other
    #: root), or None: the CPU kernel counts each unit with whichever of the two starts
    #: from the shorter level-2 label range (``PlanSet.table[p, F_MISC, 2]``)
    mirror: Plan | None = None
    #: per level, the last level's collision word of the vertex bound there
    #: (``collisions``; levels 0 and 1 unused)
    collide: tuple[int, ...] = ()


def _order(q: Query, adj: list[dict[int, int | None]], ux: int, uy: int,
           freq: Mapping[int, float] | None) -> list[int]:
    """Greedy order: most backward neighbours first (capped at 2), then the rarest label.

    ``freq`` is each label's share of the data vertices; without it, labelled
    vertices go before wildcards.
    """
    order = [ux, uy]
    while len(order) < q.n:
        placed = set(order)

        def score(v: int, placed: set[int] = placed) -> tuple[float, ...]:
            back = sum(1 for w in adj[v] if w in placed)
            lab = q.vertex_labels[v]
            share = 1.0 if lab is None else (0.5 if freq is None else freq.get(lab, 0.0))
            # labels within a half-octave of each other count as equally rare: then the
            # vertex that closes more others wins (they become independent tail levels,
            # counted as a product rather than enumerated one inside the other)
            rarity = -math.floor(2 * math.log2(share)) if share > 0 else 99
            closes = sum(1 for w in range(q.n) if w not in placed and w != v
                         and all(x in placed or x == v for x in adj[w]))
            # then extend from the deepest placed vertex: a cycle grown from one side of
            # the root closes at a root, so its last level depends on one non-root level
            # only and the kernel memoises its count (``_memo_level``)
            deepest = max((order.index(w) for w in adj[v] if w in placed), default=-1)
            return (min(back, 2), rarity, closes, deepest, -share, back, len(adj[v]), -v)

        frontier = [v for v in range(q.n) if v not in placed and any(w in placed for w in adj[v])]
        # a vertex whose neighbours are all placed constrains nothing later: placed last
        # it is counted (|candidates| less collisions), not enumerated under later levels
        open_ = [v for v in frontier if any(w not in placed for w in adj[v])]
        order.append(max(open_ or frontier, key=score))
    return order


def _plan_edge(q: Query, adj: list[dict[int, int | None]], ux: int, uy: int,
               conditions: Sequence[tuple[int, int]],
               freq: Mapping[int, float] | None, order: list[int] | None = None) -> Plan:
    order = _order(q, adj, ux, uy, freq) if order is None else order
    level_of = {v: i for i, v in enumerate(order)}
    back: list[dict[int, int]] = []
    levels: list[LevelPlan] = []
    for L, v in enumerate(order):
        b = {level_of[w]: _W if lab is None else lab for w, lab in adj[v].items()
             if level_of[w] < L}
        back.append(b)
        reuse = -1
        if L >= 2:
            best = 0
            for i in range(2, L):
                bi = back[i]
                same_label = levels[i].label in (_W, levels_label(q, v))
                if (same_label and bi and len(bi) > best
                        and all(w in b and b[w] == lab for w, lab in bi.items())):
                    best, reuse = len(bi), i
        remaining = b if reuse < 0 else {w: lab for w, lab in b.items() if w not in back[reuse]}
        gt = tuple(sorted(level_of[x] for x, y in conditions if y == v and level_of[x] < L))
        lt = tuple(sorted(level_of[y] for x, y in conditions if x == v and level_of[y] < L))
        intersect = tuple(sorted(remaining.items())) if L >= 2 else ()
        dep = max([lvl for lvl, _ in intersect] + list(gt) + list(lt)
                  + ([levels[reuse].depends_on] if reuse >= 0 else []) + [0])
        levels.append(LevelPlan(
            vertex=v, label=levels_label(q, v), degree=len(adj[v]), intersect=intersect,
            reuse=reuse, greater_than=gt, less_than=lt, depends_on=dep,
            label_needs=tuple(sorted(Counter(q.vertex_labels[w] for w in adj[v]
                                             if q.vertex_labels[w] is not None).items()))))
    root = adj[ux][uy]
    return Plan(root_label=_W if root is None else root, levels=tuple(levels),
                collide=collisions(adj, order, levels))


def collisions(adj: list[dict[int, int | None]], order: list[int],
               levels: Sequence[LevelPlan]) -> tuple[int, ...]:
    """Per level j >= 2, what the query already says of the bound vertex f(j) as a
    candidate of the last level (a memoised last level subtracts the bound vertices among
    its candidates; ``run_plan``): each of the last level's lists is of a level l whose
    vertex, where the query joins it to j's, already put the one data edge of the pair
    (f(j), f(l)) in place, visible at the task's tick (l, j >= 1 and not both roots), with
    its label. So that list holds f(j) for sure when its label is the same or a wildcard,
    never when both labels differ, and must be searched otherwise. The answer stays while
    f(j) does when every list to search and every symmetry condition names a level <= j.
    Where the last level reuses a set (its lists are not all its backward neighbours) every
    list is to be searched."""
    last = levels[-1]
    words = [C_LISTS] * len(levels)
    if len(levels) < 4 or last.reuse >= 0:
        return tuple(words)
    masks = set(last.greater_than) | set(last.less_than)
    for j in range(2, len(levels) - 1):
        lists, never = 0, False
        have = adj[order[j]]
        for i, (lvl, lab) in enumerate(last.intersect):
            if order[lvl] not in have:
                lists |= 1 << i
                continue
            jl = have[order[lvl]]
            jl = _W if jl is None else jl
            if lab == _W or jl == lab:
                continue
            if jl == _W:
                lists |= 1 << i
            else:
                never = True
        steady = all(last.intersect[i][0] <= j for i in range(len(last.intersect))
                     if lists >> i & 1) and all(m <= j for m in masks)
        words[j] = (C_NEVER if never else 0) | (C_STEADY if steady else 0) | lists
    return tuple(words)


def _with_mirror(q: Query, adj: list[dict[int, int | None]], plan: Plan,
                 conditions: Sequence[tuple[int, int]],
                 freq: Mapping[int, float] | None) -> Plan:
    """``plan`` with its mirror where it has one: four levels, level 2 next to one root
    only and level 3 next to the other (a 4-cycle). Which side is cheaper depends on the
    update (RapidFlow orders by data), so the kernel picks per unit."""
    lv = plan.levels
    if len(lv) != 4 or len(lv[2].intersect) != 1 or lv[2].reuse >= 0:
        return plan
    r2 = lv[2].intersect[0][0]
    if r2 > 1 or not any(lvl == 1 - r2 for lvl, _ in lv[3].intersect):
        return plan
    order = [x.vertex for x in lv]
    mirror = _plan_edge(q, adj, order[0], order[1], conditions, freq,
                        order[:2] + [order[3], order[2]])
    return Plan(root_label=plan.root_label, levels=plan.levels, mirror=mirror,
                collide=plan.collide)


def levels_label(q: Query, v: int) -> int:
    lab = q.vertex_labels[v]
    return _W if lab is None else lab


@dataclass(frozen=True, slots=True)
class QueryPlan:
    plans: list[Plan]
    automorphisms: int
    #: an update's count is (sum of its plans' counts) * num // den, exactly
    scale: tuple[int, int]
    #: the static count is (sum of plan 0 over every directed data edge) * num // den
    initial_scale: tuple[int, int]
    #: count-only with orbits of unequal sizes: one plan per orbit of directed edges,
    #: without conditions, and the orbit's size. sum(size x count) over them is
    #: |Aut| x (sum of ``plans``' counts), exactly, per update; the CPU counts with these
    #: (weights per plan), the GPU with ``plans``
    orbit_plans: tuple[tuple[Plan, int], ...] = field(default=())


def _ratio(num: int, den: int) -> tuple[int, int]:
    g = math.gcd(num, den)
    return num // g, den // g


def plan_query(q: Query, mode: CountMode, *, listing: bool = False,
               label_share: Mapping[int, float] | None = None) -> QueryPlan:
    """Plans for the directed query edges (plan 0 is (u0, u1) of edge 0), and |Aut(Q)|.

    Listing keeps one plan per directed edge: ``SUBGRAPHS`` plans carry the
    symmetry-breaking conditions (each match listed once), ``EMBEDDINGS`` plans
    enumerate every injective map.

    Counting plans one edge per orbit of directed edges, without conditions: the
    representative of orbit ``O`` sees ``|Aut|/|O|`` embeddings of every match whose
    updated edge is the image of an edge of ``O``, so ``count * |O| / |Aut|`` counts each
    match once. A triangle needs one plan where listing runs three (one intersection,
    not three). That needs one orbit size for the whole query (one scale per query);
    otherwise a count-only query is planned as for ``SUBGRAPHS`` listing, scaled by
    |Aut| in ``EMBEDDINGS`` mode (each match has exactly |Aut| embeddings).
    ``label_share`` (label -> fraction of data vertices) steers the order towards rare
    labels; it changes speed only, never results.
    """
    sym = analyse_symmetry(q)
    aut = sym.automorphisms
    adj = q.adjacency()
    subgraphs = mode is CountMode.SUBGRAPHS
    orbit_plans: tuple[tuple[Plan, int], ...] = ()
    if not listing and aut > 1:
        orbits = edge_orbits(q)
        if len({len(o) for o in orbits}) > 1:
            orbit_plans = tuple((_with_mirror(q, adj, _plan_edge(q, adj, *o[0], (), label_share),
                                              (), label_share), len(o)) for o in orbits)
        else:
            size = len(orbits[0])
            plans = [_with_mirror(q, adj, _plan_edge(q, adj, *o[0], (), label_share), (),
                                  label_share) for o in orbits]
            return QueryPlan(plans, aut, _ratio(size, aut if subgraphs else 1),
                             _ratio(1, aut if subgraphs else 1))
    conditions = sym.conditions if subgraphs or not listing else ()
    plans = []
    for a, b, _ in q.edges:
        for x, y in ((a, b), (b, a)):
            p = _plan_edge(q, adj, x, y, conditions, label_share)
            plans.append(p if listing else _with_mirror(q, adj, p, conditions, label_share))
    k = 1 if subgraphs or listing else aut
    return QueryPlan(plans, aut, (k, 1), (k, 1), orbit_plans)


@dataclass(frozen=True, slots=True)
class PlanSet:
    """Flat arrays of every plan of every registered query (kernel input)."""

    n: npt.NDArray[np.int32]          # [P] query size
    root_label: npt.NDArray[np.int32]  # [P] edge label of the root query edge
    vertex: npt.NDArray[np.int32]      # [P, 12] query vertex per level
    label: npt.NDArray[np.int32]       # [P, 12]
    degree: npt.NDArray[np.int32]      # [P, 12]
    reuse: npt.NDArray[np.int32]       # [P, 12]
    nb_off: npt.NDArray[np.int32]      # [P, 12] into nb_level / nb_label
    nb_cnt: npt.NDArray[np.int32]      # [P, 12]
    gt_mask: npt.NDArray[np.int32]     # [P, 12] bit l: candidate > f(level l)
    lt_mask: npt.NDArray[np.int32]     # [P, 12] bit l: candidate < f(level l)
    nb_level: npt.NDArray[np.int32]
    nb_label: npt.NDArray[np.int32]
    query_lo: npt.NDArray[np.int32]    # [Qn] first plan of query i
    query_hi: npt.NDArray[np.int32]    # [Qn]
    table: npt.NDArray[np.int32]       # [P, N_FIELDS, 12] the per-plan arrays in one block
    #: the CPU's count plans (``QueryPlan.orbit_plans``), indexed by a query's first
    #: plan (query_lo): the end of the query's own plans (a task over exactly those
    #: counts with these instead), their rows of ``table``, and the divisor of the
    #: weighted sum (1 where the query counts with its own plans)
    count_for: npt.NDArray[np.int32]   # [P + 1]
    count_lo: npt.NDArray[np.int32]    # [P + 1]
    count_hi: npt.NDArray[np.int32]    # [P + 1]
    count_div: npt.NDArray[np.int64]   # [P + 1]
    #: [rows of table] each row's weight in the count (its orbit's size; 1 otherwise)
    weight: npt.NDArray[np.int64]
    #: some query counts with weighted plans
    weighted: bool

    @classmethod
    def pack(cls, per_query: Sequence[Sequence[Plan]],
             orbit_plans: Sequence[tuple[tuple[Plan, int], ...]] | None = None,
             automorphisms: Sequence[int] | None = None) -> PlanSet:
        """Orbit plans (``QueryPlan.orbit_plans``, with each query's |Aut|) and then
        mirrors (``Plan.mirror``) get rows of ``table`` after every query's plans, outside
        every query's range; the other arrays hold the plans only."""
        plans = [p for ps in per_query for p in ps]
        n_plans = len(plans)
        count_for = np.full(n_plans + 1, -1, np.int32)   # + 1: a last query without plans
        count_lo = np.zeros(n_plans + 1, np.int32)
        count_hi = np.zeros(n_plans + 1, np.int32)
        count_div = np.ones(n_plans + 1, np.int64)
        weights: list[int] = [1] * n_plans
        first = 0
        for i, ps in enumerate(per_query):
            if not ps:
                continue
            count_for[first] = first + len(ps)
            count_lo[first], count_hi[first] = first, first + len(ps)
            extra = orbit_plans[i] if orbit_plans is not None else ()
            if extra and automorphisms is not None:
                count_lo[first], count_hi[first] = len(plans), len(plans) + len(extra)
                count_div[first] = automorphisms[i]
                for plan, size in extra:
                    plans.append(plan)
                    weights.append(size)
            first += len(ps)
        weighted = len(plans) > n_plans
        mirror_of = {}
        for p, plan in enumerate(list(plans)):
            if plan.mirror is not None:
                mirror_of[p] = len(plans)
                plans.append(plan.mirror)
                weights.append(1)
        P, M = len(plans), MAX_QUERY_VERTICES
        z = lambda: np.zeros((P, M), np.int32)  # noqa: E731
        n, rl = np.zeros(P, np.int32), np.zeros(P, np.int32)
        vertex, label, degree, reuse = z(), z(), z(), z()
        nb_off, nb_cnt, gt, lt, dep, nlf_off, nlf_cnt = z(), z(), z(), z(), z(), z(), z()
        nb_level: list[int] = []
        nb_label: list[int] = []
        for p, plan in enumerate(plans):
            n[p] = len(plan.levels)
            rl[p] = plan.root_label
            for L, lv in enumerate(plan.levels):
                vertex[p, L], label[p, L], degree[p, L] = lv.vertex, lv.label, lv.degree
                reuse[p, L] = lv.reuse
                nb_off[p, L], nb_cnt[p, L] = len(nb_level), len(lv.intersect)
                for lvl, lab in lv.intersect:
                    nb_level.append(lvl)
                    nb_label.append(lab)
                gt[p, L] = sum(1 << i for i in lv.greater_than)
                lt[p, L] = sum(1 << i for i in lv.less_than)
                dep[p, L] = lv.depends_on
                # label needs share the side lists: nb_level = label, nb_label = count
                nlf_off[p, L], nlf_cnt[p, L] = len(nb_level), len(lv.label_needs)
                for lab, cnt in lv.label_needs:
                    nb_level.append(lab)
                    nb_label.append(cnt)
        table = np.zeros((P, N_FIELDS, M), np.int32)
        for fld, arr in ((F_VERTEX, vertex), (F_LABEL, label), (F_DEGREE, degree),
                         (F_REUSE, reuse), (F_NBOFF, nb_off), (F_NBCNT, nb_cnt), (F_GT, gt),
                         (F_LT, lt), (F_DEP, dep), (F_NLFOFF, nlf_off), (F_NLFCNT, nlf_cnt)):
            table[:, fld, :] = arr
        table[:, F_MISC, 0] = n
        table[:, F_MISC, 1] = rl
        table[:, F_MISC, 3:] = C_LISTS   # a plan without words searches every list
        for p, plan in enumerate(plans):
            for j in range(2, len(plan.collide)):
                table[p, F_MISC, 1 + j] = plan.collide[j]
        for p, m in mirror_of.items():
            table[p, F_MISC, 2] = m
        counts = [len(ps) for ps in per_query]
        hi = np.cumsum(counts, dtype=np.int64).astype(np.int32)
        k = n_plans
        return cls(n=n[:k], root_label=rl[:k], vertex=vertex[:k], label=label[:k],
                   degree=degree[:k], reuse=reuse[:k], nb_off=nb_off[:k], nb_cnt=nb_cnt[:k],
                   gt_mask=gt[:k], lt_mask=lt[:k], count_for=count_for, count_lo=count_lo,
                   count_hi=count_hi,
                   count_div=count_div, weight=np.array(weights, np.int64), weighted=weighted,
                   nb_level=np.array(nb_level + [0], np.int32),
                   nb_label=np.array(nb_label + [0], np.int32),
                   query_lo=(hi - np.array(counts, np.int32)).astype(np.int32), query_hi=hi,
                   table=table)


def level2_sources(plans: PlanSet) -> npt.NDArray[np.int64]:
    """Per plan, which of levels 0 / 1 level 2 intersects (bit 1 / bit 2): sizes slices.

    Level 2's backward neighbours are among levels 0 and 1, so at most two entries.
    """
    tbl = plans.table
    off, cnt = tbl[:, F_NBOFF, 2], tbl[:, F_NBCNT, 2]
    deep = tbl[:, F_MISC, 0] > 2
    first = np.where(deep & (cnt >= 1), 1 << plans.nb_level[off].astype(np.int64), 0)
    second = np.where(deep & (cnt >= 2),
                      1 << plans.nb_level[np.minimum(off + 1, len(plans.nb_level) - 1)]
                      .astype(np.int64), 0)
    return first | second
