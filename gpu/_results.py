"""What the engine returns: per-update signed counts, capped listings, and stats."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field, replace

import numpy as np
import numpy.typing as npt

from ._types import UpdateOp, UpdateStatus
from .graph._host import OpTable

__all__ = ["BatchResult", "BatchStats", "Listing", "MatchDelta"]


@dataclass(frozen=True, slots=True)
class Listing:
    """Listed matches of one query: rows[off[i]:off[i+1]] belong to update ``op_index[i]``."""

    op_index: npt.NDArray[np.int64]
    offsets: npt.NDArray[np.int64]
    tuples: npt.NDArray[np.int64]       # [rows, n] external vertex ids, query-vertex order
    truncated: npt.NDArray[np.bool_]

    @classmethod
    def empty(cls, n: int) -> Listing:
        return cls(op_index=np.zeros(0, np.int64), offsets=np.zeros(1, np.int64),
                   tuples=np.zeros((0, n), np.int64), truncated=np.zeros(0, np.bool_))

    def rows_of(self, i: int) -> npt.NDArray[np.int64]:
        return self.tuples[self.offsets[i]:self.offsets[i + 1]]


@dataclass(frozen=True, slots=True)
class BatchStats:
    updates: int = 0
    edge_updates: int = 0
    applied: int = 0
    ignored: int = 0
    rejected: int = 0
    positive: int = 0
    negative: int = 0
    resolve_seconds: float = 0.0
    match_seconds: float = 0.0
    tasks: int = 0
    #: out-of-core mode: bytes kernels read from host memory, device-cache lookups
    host_bytes: int = 0
    cache_hits: int = 0
    cache_misses: int = 0

    def __add__(self, o: BatchStats) -> BatchStats:
        return BatchStats(*(getattr(self, f) + getattr(o, f) for f in self.__slots__))


@dataclass(frozen=True, slots=True)
class MatchDelta:
    """One (update, query) pair with a non-empty delta."""

    query: int
    seq: int
    sub: int
    op: UpdateOp
    #: the op the user sent (DELETE_VERTEX for the edge deletions it expands into)
    request_op: UpdateOp
    src: int
    dst: int
    sign: int
    count: int
    matches: npt.NDArray[np.int64] | None
    truncated: bool


@dataclass(frozen=True, slots=True)
class BatchResult:
    ops: OpTable
    seq: npt.NDArray[np.int64]          # per primitive update
    sub: npt.NDArray[np.int32]          # position within its raw update (vertex deletes)
    request_op: npt.NDArray[np.int8]    # the raw update's op, per primitive update
    query_ids: tuple[int, ...]
    counts: npt.NDArray[np.int64]       # [len(ops), len(query_ids)] signed
    listings: dict[int, Listing] = field(default_factory=dict)
    stats: BatchStats = BatchStats()

    def deltas(self) -> Iterator[MatchDelta]:
        """Non-empty deltas in update order, then query order (for output, not hot paths)."""
        ii, jj = np.nonzero(self.counts)
        where = {q: {int(o): r for r, o in enumerate(lst.op_index)}
                 for q, lst in self.listings.items()}
        for i, j in zip(ii.tolist(), jj.tolist(), strict=True):
            q = self.query_ids[j]
            c = int(self.counts[i, j])
            matches, trunc = None, False
            if q in where and i in where[q]:
                lst = self.listings[q]
                r = where[q][i]
                matches, trunc = lst.rows_of(r), bool(lst.truncated[r])
            yield MatchDelta(query=q, seq=int(self.seq[i]), sub=int(self.sub[i]),
                             op=UpdateOp(int(self.ops.op[i])),
                             request_op=UpdateOp(int(self.request_op[i])),
                             src=int(self.ops.src[i]),
                             dst=int(self.ops.dst[i]), sign=1 if c > 0 else -1, count=abs(c),
                             matches=matches, truncated=trunc)

    def status_counts(self) -> dict[UpdateStatus, int]:
        return {s: int((self.ops.status == s).sum()) for s in UpdateStatus}

    def select(self, query_ids: Iterable[int]) -> BatchResult:
        """This result for some of its queries (in its own order; others are ignored):
        their count columns (a copy), their listings, and stats whose matches and tasks are
        theirs (per-query delivery hands a query's part on ahead of the rest)."""
        want = set(query_ids)
        cols = [j for j, q in enumerate(self.query_ids) if q in want]
        qids = tuple(self.query_ids[j] for j in cols)
        counts = np.ascontiguousarray(self.counts[:, cols])
        stats = replace(self.stats, positive=int(counts[counts > 0].sum()),
                        negative=int(-counts[counts < 0].sum()),
                        tasks=self.stats.edge_updates * len(cols))
        return replace(self, query_ids=qids, counts=counts, stats=stats,
                       listings={q: v for q, v in self.listings.items() if q in want})
