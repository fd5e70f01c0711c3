"""Enums, sentinels and the columnar update batch shared by every layer.

Notation used across gpu/: ``Q`` a query graph, ``G`` the data graph, ``ΔG`` a batch
of updates. Internally every primitive update gets a *tick* (strictly increasing int64);
an edge entry with lifetime ``(ct, dt]`` is visible to the update at tick ``k`` iff
``ct < k <= dt``.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

__all__ = [
    "INF_TICK",
    "MAX_QUERY_VERTICES",
    "WILDCARD",
    "CountMode",
    "RejectReason",
    "UpdateBatch",
    "UpdateOp",
    "UpdateStatus",
]

#: Label value meaning "any label" in a query. Data labels may not take this value.
WILDCARD = np.int32(np.iinfo(np.int32).min)
#: Deletion tick of an edge that is still alive.
INF_TICK = np.int64(np.iinfo(np.int64).max)
MAX_QUERY_VERTICES = 12


class UpdateOp(enum.IntEnum):
    INSERT_EDGE = 0
    DELETE_EDGE = 1
    INSERT_VERTEX = 2
    DELETE_VERTEX = 3


class UpdateStatus(enum.IntEnum):
    APPLIED = 0
    IGNORED = 1
    REJECTED = 2


class RejectReason(enum.IntEnum):
    NONE = 0
    SELF_LOOP = 1
    RELABEL_CONNECTED = 2
    WILDCARD_LABEL = 3

    @property
    def message(self) -> str:
        return _REASONS[self]


_REASONS = {
    RejectReason.NONE: "",
    RejectReason.SELF_LOOP: "self-loops are not allowed",
    RejectReason.RELABEL_CONNECTED: "cannot relabel a vertex that has edges; delete it first",
    RejectReason.WILDCARD_LABEL: "label value is reserved for the query wildcard",
}


_new, _set = object.__new__, object.__setattr__


class CountMode(enum.Enum):
    """``EMBEDDINGS`` counts every injective map; ``SUBGRAPHS`` one per automorphism orbit."""

    EMBEDDINGS = "embeddings"
    SUBGRAPHS = "subgraphs"


@dataclass(frozen=True, slots=True)
class UpdateBatch:
    """A batch of raw updates in arrival order, as parallel numpy columns.

    ``label`` is the edge label for edge inserts and the vertex label for vertex inserts;
    it is ignored for deletions (an edge is identified by its endpoints).
    """

    seq: npt.NDArray[np.int64]
    op: npt.NDArray[np.int8]
    src: npt.NDArray[np.int64]
    dst: npt.NDArray[np.int64]
    label: npt.NDArray[np.int32]

    def __post_init__(self) -> None:
        n = len(self.seq)
        for name in ("op", "src", "dst", "label"):
            if len(getattr(self, name)) != n:
                raise ValueError(f"UpdateBatch column {name!r} has a different length")

    def __len__(self) -> int:
        return len(self.seq)

    @classmethod
    def empty(cls) -> UpdateBatch:
        return cls.build([], [], [], [], [])

    @classmethod
    def build(
        cls,
        seq: npt.ArrayLike,
        op: npt.ArrayLike,
        src: npt.ArrayLike,
        dst: npt.ArrayLike,
        label: npt.ArrayLike,
    ) -> UpdateBatch:
        return cls(
            seq=np.ascontiguousarray(seq, dtype=np.int64),
            op=np.ascontiguousarray(op, dtype=np.int8),
            src=np.ascontiguousarray(src, dtype=np.int64),
            dst=np.ascontiguousarray(dst, dtype=np.int64),
            label=np.ascontiguousarray(label, dtype=np.int32),
        )

    def slice(self, start: int, stop: int) -> UpdateBatch:
        """Rows start..stop-1 (views). Its columns are of one length already: no check
        (the checking constructor was 2 of a small batch's 5 us)."""
        b = _new(UpdateBatch)
        _set(b, "seq", self.seq[start:stop])
        _set(b, "op", self.op[start:stop])
        _set(b, "src", self.src[start:stop])
        _set(b, "dst", self.dst[start:stop])
        _set(b, "label", self.label[start:stop])
        return b

    @classmethod
    def concat(cls, parts: list[UpdateBatch]) -> UpdateBatch:
        if not parts:
            return cls.empty()
        return cls(
            seq=np.concatenate([p.seq for p in parts]),
            op=np.concatenate([p.op for p in parts]),
            src=np.concatenate([p.src for p in parts]),
            dst=np.concatenate([p.dst for p in parts]),
            label=np.concatenate([p.label for p in parts]),
        )
