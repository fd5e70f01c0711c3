"""Batched in-place insertion (the CPU's host graph, ``copy_on_write`` off).

Inserting each entry into its sorted version with a shift costs O(degree) moves per
entry: a hub that gets k insertions in a batch pays k x degree. In place, the updater
instead appends a batch's new entries to a *pending* list (both directions of an edge
side by side: entries 2j and 2j + 1) and :func:`merge_pending` merges each touched
vertex's pending entries into its version once (``_merge``): O(degree + k) per
touched vertex.

Statuses are resolved in arrival order exactly as before: an edge is alive if its
version holds it alive or the pending list does. A batch-local open-addressing table
maps the canonical pair (min id << 32 | max id) to its newest pending edge. Entries
keep their ticks and the (key, ct) order (equal keys keep creation order), so every
reader sees the same visible sets. Pending edges older than ``pst[BASE]`` were merged
already (a vertex deletion needs every edge in a version first).
"""

from __future__ import annotations

import numba as nb
import numpy as np
import numpy.typing as npt

from .._types import INF_TICK
from ._idmap import _hash

# pst slots: first pending edge not yet merged, pending edges so far
BASE, COUNT = 0, 1
_EMPTY = np.int64(-1)
_INF = INF_TICK


class Pending:
    """A batch's pending edges (room for ``inserts``) and its pair table (load <= 1/2)."""

    def __init__(self, inserts: int) -> None:
        slots = 1 << max(1, (2 * inserts).bit_length())
        self.h_key = np.full(slots, _EMPTY, np.int64)
        self.h_val = np.zeros(slots, np.int64)
        self.pst = np.zeros(2, np.int64)
        m = 2 * inserts
        self.owner = np.zeros(m, np.int32)
        self.key = np.zeros(m, np.int64)
        self.elab = np.zeros(m, np.int32)
        self.ct = np.zeros(m, np.int64)
        self.dt = np.zeros(m, np.int64)

    def arrays(self) -> tuple[npt.NDArray[np.generic], ...]:
        """The arguments of ``apply_batch`` after its output columns."""
        return (self.h_key, self.h_val, self.pst, self.owner, self.key, self.elab, self.ct,
                self.dt)

    @property
    def unmerged(self) -> tuple[int, int]:
        """Entry range not yet merged into versions."""
        return 2 * int(self.pst[BASE]), 2 * int(self.pst[COUNT])

    def merged(self) -> None:
        self.pst[BASE] = self.pst[COUNT]


@nb.njit(cache=True, nogil=True, inline="always")
def pair_of(a, b):  # type: ignore[no-untyped-def]
    lo, hi = (a, b) if a < b else (b, a)
    return (np.int64(lo) << np.int64(32)) | np.int64(hi)


@nb.njit(cache=True, nogil=True, inline="always")
def _slot(h_key, pair):  # type: ignore[no-untyped-def]
    mask = np.uint64(len(h_key) - 1)
    i = _hash(pair) & mask
    while h_key[i] != _EMPTY and h_key[i] != pair:
        i = (i + np.uint64(1)) & mask
    return i


@nb.njit(cache=True, nogil=True)
def find_pending(h_key, h_val, pst, p_dt, pair):  # type: ignore[no-untyped-def]
    """Pending edge j holding ``pair`` alive (not yet merged), or -1."""
    if pst[COUNT] == pst[BASE]:
        return -1
    s = _slot(h_key, pair)
    if h_key[s] != pair:
        return -1
    j = h_val[s]
    if j < pst[BASE] or p_dt[2 * j] != _INF:
        return -1
    return j


@nb.njit(cache=True, nogil=True)
def add_pending(a, b, ka, kb, el, t, h_key, h_val, pst, p_owner, p_key, p_elab, p_ct, p_dt):  # type: ignore[no-untyped-def]
    """Edge a-b inserted at tick t: entry kb in a's version and ka in b's, pending."""
    j = pst[COUNT]
    pst[COUNT] = j + 1
    p_owner[2 * j], p_key[2 * j], p_elab[2 * j], p_ct[2 * j], p_dt[2 * j] = a, kb, el, t, _INF
    p_owner[2 * j + 1], p_key[2 * j + 1] = b, ka
    p_elab[2 * j + 1], p_ct[2 * j + 1], p_dt[2 * j + 1] = el, t, _INF
    pair = pair_of(a, b)
    s = _slot(h_key, pair)
    h_key[s] = pair
    h_val[s] = j
