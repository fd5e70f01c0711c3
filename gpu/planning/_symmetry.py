"""Label-preserving automorphisms of ``Q``: symmetry-breaking conditions and the orbits
of the directed query edges.

Subgraph counting keeps one embedding per orbit ``{f∘σ : σ ∈ Aut(Q)}``. The
Grochow-Kellis construction walks a stabiliser chain: pick a vertex ``v`` in a
non-trivial orbit of the current stabiliser, require ``f(v) < f(w)`` for every other
``w`` in that orbit, then fix ``v``. Exactly one embedding per orbit satisfies all
conditions, and ``|Aut(Q)|`` is the product of the orbit sizes met on the way.

Counting needs no conditions at all (see ``plan_query``): an embedding that uses data
edge ``(a, b)`` maps exactly one directed query edge onto it, and the directed edges of
one orbit ``O`` under ``Aut(Q)`` are the image of ``|Aut(Q)| / |O|`` embeddings each.
"""

from __future__ import annotations

from dataclasses import dataclass

from ._query import Query

__all__ = ["Symmetry", "analyse_symmetry", "edge_orbits"]


@dataclass(frozen=True, slots=True)
class Symmetry:
    #: pairs ``(v, w)`` meaning ``f(v) < f(w)`` (data vertex ids)
    conditions: tuple[tuple[int, int], ...]
    automorphisms: int


def _find_automorphism(q: Query, adj: list[dict[int, int | None]], pinned: dict[int, int]) -> bool:
    """Is there an automorphism extending the partial map ``pinned``?"""
    n = q.n
    deg = [len(a) for a in adj]
    sigma = [-1] * n
    used = [False] * n

    def ok(v: int, w: int) -> bool:
        if used[w] or q.vertex_labels[v] != q.vertex_labels[w] or deg[v] != deg[w]:
            return False
        for x, lab in adj[v].items():
            sx = sigma[x]
            if sx >= 0 and (sx not in adj[w] or adj[w][sx] != lab):
                return False
        return True

    for v, w in pinned.items():
        if not ok(v, w):
            return False
        sigma[v] = w
        used[w] = True
    order = [v for v in range(n) if v not in pinned]

    def search(i: int) -> bool:
        if i == len(order):
            return True
        v = order[i]
        for w in range(n):
            if ok(v, w):
                sigma[v] = w
                used[w] = True
                if search(i + 1):
                    return True
                sigma[v] = -1
                used[w] = False
        return False

    return search(0)


def analyse_symmetry(q: Query) -> Symmetry:
    adj = q.adjacency()
    fixed: dict[int, int] = {}
    conditions: list[tuple[int, int]] = []
    size = 1
    while True:
        best: list[int] = []
        for v in range(q.n):
            if v in fixed:
                continue
            orbit = [w for w in range(q.n) if w == v or (
                w not in fixed and _find_automorphism(q, adj, {**fixed, v: w}))]
            if len(orbit) > len(best):
                best = orbit
        if len(best) <= 1:
            break
        v = best[0]
        conditions.extend((v, w) for w in best[1:])
        size *= len(best)
        fixed[v] = v
    return Symmetry(conditions=tuple(conditions), automorphisms=size)


def edge_orbits(q: Query) -> list[list[tuple[int, int]]]:
    """Orbits of the directed query edges under ``Aut(Q)`` (edge labels kept), each
    listed from its first directed edge in the order (u, v), (v, u) of ``q.edges``: the
    first orbit starts with edge 0 as given."""
    adj = q.adjacency()
    directed = [d for a, b, _ in q.edges for d in ((a, b), (b, a))]
    seen: set[tuple[int, int]] = set()
    orbits = []
    for u, v in directed:
        if (u, v) in seen:
            continue
        orbit = [(u, v)] + [
            (x, y) for x, y in directed
            if (x, y) != (u, v) and (x, y) not in seen and adj[x][y] == adj[u][v]
            and len(adj[x]) == len(adj[u]) and len(adj[y]) == len(adj[v])
            and _find_automorphism(q, adj, {u: x, v: y})]
        seen.update(orbit)
        orbits.append(orbit)
    return orbits
