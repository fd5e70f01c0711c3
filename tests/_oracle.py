"""A slow, obviously-correct reference: networkx recomputes matches around each update."""

from __future__ import annotations

from dataclasses import dataclass, field

import networkx as nx
from networkx.algorithms import isomorphism as iso

from gpu import CountMode, Query, UpdateOp


def _nm(g_attrs: dict, q_attrs: dict) -> bool:
    return q_attrs["label"] is None or g_attrs["label"] == q_attrs["label"]


def query_graph(q: Query) -> nx.Graph:
    g = nx.Graph()
    for v, lab in enumerate(q.vertex_labels):
        g.add_node(v, label=lab)
    for a, b, lab in q.edges:
        g.add_edge(a, b, label=lab)
    return g


def automorphisms(q: Query) -> list[tuple[int, ...]]:
    qg = query_graph(q)
    gm = iso.GraphMatcher(qg, qg, node_match=lambda x, y: x["label"] == y["label"],
                          edge_match=lambda x, y: x["label"] == y["label"])
    return [tuple(m[v] for v in range(q.n)) for m in gm.isomorphisms_iter()]


def embeddings(g: nx.Graph, q: Query) -> set[tuple[int, ...]]:
    gm = iso.GraphMatcher(g, query_graph(q), node_match=_nm, edge_match=_nm)
    out = set()
    for m in gm.subgraph_monomorphisms_iter():
        inv = {qv: gv for gv, qv in m.items()}
        out.add(tuple(inv[v] for v in range(q.n)))
    return out


def orbit_key(f: tuple[int, ...], auts: list[tuple[int, ...]]) -> tuple[int, ...]:
    # (f∘σ)(v) = f(σ(v))
    return min(tuple(f[s[v]] for v in range(len(f))) for s in auts)


def uses_edge(f: tuple[int, ...], q: Query, u: int, v: int) -> bool:
    return any({f[a], f[b]} == {u, v} for a, b, _ in q.edges)


@dataclass
class Expected:
    """Per primitive update: (seq, op, src, dst, sign, matches-using-the-edge)."""

    records: list[tuple[int, int, int, int, int, set[tuple[int, ...]]]] = field(
        default_factory=list)
    statuses: list[str] = field(default_factory=list)


class OracleGraph:
    def __init__(self) -> None:
        self.g = nx.Graph()

    def _ensure(self, x: int) -> None:
        if x not in self.g:
            self.g.add_node(x, label=0)

    def run(self, updates: list[tuple[int, int, int, int, int]], q: Query) -> Expected:
        """updates: (seq, op, src, dst, label) -> expected deltas for query q."""
        exp = Expected()
        for seq, op, x, y, lab in updates:
            if op in (UpdateOp.INSERT_EDGE, UpdateOp.DELETE_EDGE):
                if x == y:
                    exp.statuses.append("rejected")
                    continue
                if op == UpdateOp.INSERT_EDGE:
                    if self.g.has_edge(x, y):
                        exp.statuses.append("ignored")
                        continue
                    self._ensure(x)
                    self._ensure(y)
                    self.g.add_edge(x, y, label=lab)
                    m = {f for f in embeddings(self.g, q) if uses_edge(f, q, x, y)}
                    exp.records.append((seq, op, x, y, +1, m))
                else:
                    if not self.g.has_edge(x, y):
                        exp.statuses.append("ignored")
                        continue
                    self._delete(seq, op, x, y, q, exp)
                exp.statuses.append("applied")
            elif op == UpdateOp.INSERT_VERTEX:
                if x in self.g and self.g.nodes[x]["label"] == lab:
                    exp.statuses.append("ignored")
                elif x in self.g and self.g.degree(x) > 0:
                    exp.statuses.append("rejected")
                else:
                    self.g.add_node(x, label=lab)
                    exp.statuses.append("applied")
            else:
                if x not in self.g:
                    exp.statuses.append("ignored")
                    continue
                for w in sorted(self.g.neighbors(x)):
                    self._delete(seq, UpdateOp.DELETE_VERTEX, x, w, q, exp)
                self.g.remove_node(x)
                exp.statuses.append("applied")
        return exp

    def _delete(self, seq: int, op: int, x: int, y: int, q: Query, exp: Expected) -> None:
        m = {f for f in embeddings(self.g, q) if uses_edge(f, q, x, y)}
        self.g.remove_edge(x, y)
        exp.records.append((seq, op, x, y, -1, m))


def project(matches: set[tuple[int, ...]], mode: CountMode,
            auts: list[tuple[int, ...]]) -> set[tuple[int, ...]]:
    if mode is CountMode.EMBEDDINGS:
        return matches
    return {orbit_key(f, auts) for f in matches}
