"""The query graph ``Q``: a connected, simple, undirected pattern of 2..12 vertices.

Labels are ints or ``None`` (wildcard). Vertices are addressed by their position
0..n-1; user ids are kept only to name them back in errors and outputs.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np

from .._types import MAX_QUERY_VERTICES, WILDCARD
from ..exceptions import QueryError

__all__ = ["Query"]

_I32 = np.iinfo(np.int32)


def _check_label(label: int | None, what: str) -> int | None:
    if label is None:
        return None
    if isinstance(label, bool) or not isinstance(label, int | np.integer):
        raise QueryError(f"{what}: label {label!r} is not an integer")
    if not (_I32.min < int(label) <= _I32.max):
        raise QueryError(f"{what}: label {label} is outside the 32-bit range")
    return int(label)


@dataclass(frozen=True, slots=True)
class Query:
    """A validated query; build it with :meth:`build`, which raises :class:`QueryError`."""

    vertex_labels: tuple[int | None, ...]
    edges: tuple[tuple[int, int, int | None], ...]
    vertex_ids: tuple[int, ...]

    @property
    def n(self) -> int:
        return len(self.vertex_labels)

    @classmethod
    def build(
        cls,
        vertices: Iterable[tuple[int, int | None]],
        edges: Iterable[tuple[int, int, int | None]],
    ) -> Query:
        vs = list(vertices)
        if not 2 <= len(vs) <= MAX_QUERY_VERTICES:
            raise QueryError(
                f"a query needs 2..{MAX_QUERY_VERTICES} vertices, this one has {len(vs)}"
            )
        pos: dict[int, int] = {}
        labels: list[int | None] = []
        for vid, lab in vs:
            if vid in pos:
                raise QueryError(f"vertex {vid} is declared twice")
            pos[vid] = len(labels)
            labels.append(_check_label(lab, f"vertex {vid}"))
        seen: set[tuple[int, int]] = set()
        out: list[tuple[int, int, int | None]] = []
        for s, d, lab in edges:
            if s not in pos or d not in pos:
                missing = s if s not in pos else d
                raise QueryError(f"edge ({s}, {d}) uses undeclared vertex {missing}")
            if s == d:
                raise QueryError(f"edge ({s}, {d}) is a self-loop")
            a, b = sorted((pos[s], pos[d]))
            if (a, b) in seen:
                raise QueryError(f"edge ({s}, {d}) is declared twice")
            seen.add((a, b))
            out.append((a, b, _check_label(lab, f"edge ({s}, {d})")))
        q = cls(vertex_labels=tuple(labels), edges=tuple(out), vertex_ids=tuple(pos))
        if not q._connected():
            raise QueryError("the query is not connected")
        return q

    def adjacency(self) -> list[dict[int, int | None]]:
        """Per vertex: neighbour -> edge label (None = wildcard)."""
        adj: list[dict[int, int | None]] = [{} for _ in range(self.n)]
        for a, b, lab in self.edges:
            adj[a][b] = lab
            adj[b][a] = lab
        return adj

    def _connected(self) -> bool:
        adj = self.adjacency()
        seen = {0}
        stack = [0]
        while stack:
            for w in adj[stack.pop()]:
                if w not in seen:
                    seen.add(w)
                    stack.append(w)
        return len(seen) == self.n

    def label_array(self) -> np.ndarray:
        return np.array(
            [WILDCARD if lab is None else lab for lab in self.vertex_labels], dtype=np.int32
        )

    def relabeled_ids(self, ids: Sequence[int]) -> Query:
        """The same query with user vertex ids replaced (used by formats)."""
        return Query(self.vertex_labels, self.edges, tuple(ids))
