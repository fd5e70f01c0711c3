"""Cut an update stream into engine batches (results never depend on the cut)."""

from __future__ import annotations

from collections.abc import Iterator

from gpu import UpdateBatch

__all__ = ["iter_chunks"]


def iter_chunks(batch: UpdateBatch, size: int) -> Iterator[UpdateBatch]:
    if size < 1:
        raise ValueError("batch size must be >= 1")
    for lo in range(0, len(batch), size):
        yield batch.slice(lo, lo + size)
