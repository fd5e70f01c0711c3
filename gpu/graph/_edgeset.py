"""The alive edges as a set of unordered pairs of internal ids, with their labels.

An insertion's status needs to know whether its pair is alive: a search of the label
range of one end's version (a row of label offsets, then a binary search: misses on a
hub) and a probe of the pending table. One probe of this table answers it, and a missing
delete likewise (issue 20: Enron's insertion runs are bound by the updater's searches).
Open addressing with linear probing over a power-of-two table in two halves
(``_halves``: the updater's two threads own one each); a removed pair leaves a
tombstone. The updater adds a pair when an insertion applies and removes it when the
edge is deleted (a vertex deletion removes its edges); load and restore build it.
"""

from __future__ import annotations

import numba as nb
import numpy as np
import numpy.typing as npt

from .._jit import leaf
from ._halves import half_home, half_next
from ._idmap import _hash

__all__ = ["EdgeSet", "es_add", "es_drop", "es_find", "es_put", "es_remove"]

_EMPTY, _TOMB = np.int64(-1), np.int64(-2)
# st slots: pairs in the set, tombstones
COUNT, TOMBS = 0, 1


class EdgeSet:
    """Room for ``pairs`` under half load."""

    def __init__(self, pairs: int = 0) -> None:
        self.keys = np.full(_size(pairs), _EMPTY, np.int64)
        self.vals = np.zeros(len(self.keys), np.int32)   # each pair's edge label
        self.st = np.zeros(2, np.int64)

    def arrays(self) -> tuple[npt.NDArray[np.generic], ...]:
        return self.keys, self.vals, self.st

    def reserve(self, extra: int) -> None:
        """Room for ``extra`` more pairs under half load (tombstones count: a rebuild drops
        them): a half then always has an empty slot, even if every pair fell in it."""
        if 2 * (int(self.st[COUNT]) + int(self.st[TOMBS]) + extra) < len(self.keys):
            return
        # rebuilt at a quarter load at most: at half, a sliding window (as many deletions
        # as insertions a batch) just under a power of two would rebuild every batch
        keys = np.full(_size(2 * (int(self.st[COUNT]) + extra)), _EMPTY, np.int64)
        vals = np.zeros(len(keys), np.int32)
        st = np.zeros(2, np.int64)
        _rehash(self.keys, self.vals, keys, vals, st)
        self.keys, self.vals, self.st = keys, vals, st

    @classmethod
    def of(cls, pairs: npt.NDArray[np.int64], labels: npt.NDArray[np.int32]) -> EdgeSet:
        """A set of distinct ``pairs`` (min id << 32 | max id) and their edge labels."""
        s = cls(len(pairs))
        _add_all(s.keys, s.vals, s.st, pairs, labels)
        return s


def _size(pairs: int) -> int:
    """Slots for ``pairs``: a load of a quarter to under a half. At a quarter to an eighth
    (Enron: 8 MB of keys) the probe of each insertion missed the cache for 55% of
    ``apply_batch``'s samples; half the table took it from 1.7 to 1.25 ms."""
    return 1 << max(4, (2 * max(pairs, 1)).bit_length())


@leaf
def es_find(keys, pair):  # type: ignore[no-untyped-def]
    """The slot holding ``pair`` (its label: vals[slot]), or -1."""
    mask = np.uint64(len(keys) - 1)
    i = half_home(_hash(pair), mask)
    while keys[i] != _EMPTY:
        if keys[i] == pair:
            return np.int64(i)
        i = half_next(i, mask)
    return np.int64(-1)


@nb.njit(cache=True, nogil=True, inline="always")
def es_put(keys, vals, st, i, pair, label):  # type: ignore[no-untyped-def]
    """Add ``pair`` at slot ``i``, the first tombstone or empty slot on its walk (nothing
    written to the set since it was found; apply_batch does both inline)."""
    if keys[i] == _TOMB:
        st[TOMBS] -= 1
    keys[i] = pair
    vals[i] = label
    st[COUNT] += 1


@leaf
def es_drop(keys, st, i):  # type: ignore[no-untyped-def]
    """Remove the pair at slot ``i``."""
    keys[i] = _TOMB
    st[COUNT] -= 1
    st[TOMBS] += 1


@nb.njit(cache=True, nogil=True)
def es_add(keys, vals, st, pair, label):  # type: ignore[no-untyped-def]
    """Add ``pair`` (absent; the caller reserved room)."""
    mask = np.uint64(len(keys) - 1)
    i = half_home(_hash(pair), mask)
    while keys[i] != _EMPTY and keys[i] != _TOMB:
        i = half_next(i, mask)
    es_put(keys, vals, st, i, pair, label)


@nb.njit(cache=True, nogil=True)
def es_remove(keys, st, pair):  # type: ignore[no-untyped-def]
    """Remove ``pair`` if present."""
    i = es_find(keys, pair)
    if i >= 0:
        es_drop(keys, st, i)


@nb.njit(cache=True, nogil=True)
def _add_all(keys, vals, st, pairs, labels):  # type: ignore[no-untyped-def]
    for i in range(len(pairs)):
        es_add(keys, vals, st, pairs[i], labels[i])


@nb.njit(cache=True, nogil=True)
def _rehash(old, old_vals, keys, vals, st):  # type: ignore[no-untyped-def]
    for i in range(len(old)):
        if old[i] >= 0:
            es_add(keys, vals, st, old[i], old_vals[i])
