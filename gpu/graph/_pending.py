"""Batched in-place insertion (the CPU's host graph, ``copy_on_write`` off).

Inserting each entry into its sorted version with a shift costs O(degree) moves per
entry: a hub that gets k insertions in a batch pays k x degree. In place, the updater
instead appends a batch's new entries to a *pending* list (both directions of an edge
side by side: entries 2j and 2j + 1) and :func:`merge_pending` merges each touched
vertex's pending entries into its version once (``_merge``): O(degree + k) per
touched vertex.

Statuses are resolved in arrival order exactly as before: an edge is alive if its
version holds it alive or the pending list does. An open-addressing table maps the
canonical pair (min id << 32 | max id) to its newest pending edge, and a flag per edge
says whether it has been merged. Entries keep their ticks and the (key, ct) order (equal
keys keep creation order), so every reader sees the same visible sets.

Deferred edges (``HostGraph.set_relevant_labels``): an edge whose ends' labels no standing
query reads can stay pending after its batch, across batches (``pst[DEFERRED]`` of them,
all below ``pst[BASE]``), since no matching of those queries reads it; whatever reads the
whole graph merges them first (a vertex deletion, a new query, a snapshot). All edges of a
pair share that class (internal ids never change label), so a pair's entries are merged
in creation order whatever the batches.
"""

from __future__ import annotations

import numba as nb
import numpy as np
import numpy.typing as npt

from .._jit import leaf
from .._types import INF_TICK
from ._halves import half_home, half_next
from ._idmap import _hash

# pst slots: the first edge of the batch being applied (those below are merged or
# deferred), pending edges so far, deferred edges among those below BASE
BASE, COUNT, DEFERRED = 0, 1, 2
_EMPTY = np.int64(-1)
_INF = INF_TICK


class Pending:
    """Pending edges (room for ``edges``), their merged flags and their pair table (load
    <= 1/2). ``within``: a store whose memory this one takes the front of (a new store for
    Enron's 18,383 insertions, allocated and zeroed, was 0.25-0.28 ms of a one-batch run
    here, medians in fresh engines; in the spare 0.09, the table reset only where an
    earlier one wrote); ``touch``: its pages now (a graph's spare store, made at load)."""

    def __init__(self, edges: int, within: Pending | None = None, touch: bool = False) -> None:
        slots = _slots(edges)
        m = 2 * edges
        self.backing = within
        if within is None:
            self.h_key = np.full(slots, _EMPTY, np.int64)
            self.h_val = np.zeros(slots, np.int32)   # an edge index: below 2^31
            self.owner = np.zeros(m, np.int32)
            self.key = np.zeros(m, np.int64)
            self.elab = np.zeros(m, np.int32)
            self.ct = np.zeros(m, np.int64)
            self.dt = np.zeros(m, np.int64)
            self.mrg = np.zeros(edges, np.uint8)
            if touch:
                for col in (self.h_val, self.owner, self.key, self.elab, self.ct, self.dt,
                            self.mrg):
                    col.fill(0)
        else:   # what the loop reads before writing: the table and the merged flags
            assert within.fits(edges)
            self.h_key, self.h_val = within.h_key[:slots], within.h_val[:slots]
            self.h_key[:min(within.dirty, slots)].fill(_EMPTY)   # what earlier ones wrote
            within.dirty = max(within.dirty, slots)
            self.owner, self.key, self.elab = within.owner[:m], within.key[:m], within.elab[:m]
            self.ct, self.dt, self.mrg = within.ct[:m], within.dt[:m], within.mrg[:edges]
            self.mrg.fill(0)
        self.pst = np.zeros(3, np.int64)
        #: slots of the table that stores within this one may have written (the front)
        self.dirty = 0
        #: a merge an exception stopped: its grouped entries and where to go on
        self.inflight: tuple[npt.NDArray[np.int64], int] | None = None

    def fits(self, edges: int) -> bool:
        """Whether a store for ``edges`` can take the front of this one's memory."""
        return len(self.mrg) >= edges and len(self.h_key) >= _slots(edges)

    def arrays(self) -> tuple[npt.NDArray[np.generic], ...]:
        """The arguments of ``apply_batch`` after its output columns."""
        return (self.h_key, self.h_val, self.pst, self.owner, self.key, self.elab, self.ct,
                self.dt, self.mrg)

    @property
    def room(self) -> int:
        """Edges it can still take."""
        return len(self.mrg) - int(self.pst[COUNT])

    @property
    def deferred(self) -> int:
        return int(self.pst[DEFERRED])

    def carried(self, edges: int) -> Pending:
        """A store holding this one's deferred edges, with room for ``edges`` more and as
        many again (it doubles: carrying them over costs O(1) an edge)."""
        new = Pending(2 * (self.deferred + edges))
        carry_deferred(*self.arrays(), *new.arrays())
        return new


def _slots(edges: int) -> int:
    """The pair table's size for ``edges`` pending edges (load under 1/2: a half of it
    (``_halves``) always has an empty slot)."""
    return 1 << max(1, (2 * edges).bit_length())


@nb.njit(cache=True, nogil=True, inline="always")
def pair_of(a, b):  # type: ignore[no-untyped-def]
    lo, hi = (a, b) if a < b else (b, a)
    return (np.int64(lo) << np.int64(32)) | np.int64(hi)


@nb.njit(cache=True, nogil=True, inline="always")
def _slot(h_key, pair):  # type: ignore[no-untyped-def]
    mask = np.uint64(len(h_key) - 1)
    i = half_home(_hash(pair), mask)
    while h_key[i] != _EMPTY and h_key[i] != pair:
        i = half_next(i, mask)
    return i


@leaf
def find_pending(h_key, h_val, pst, p_dt, p_mrg, pair):  # type: ignore[no-untyped-def]
    """Pending edge j holding ``pair`` alive (not yet merged), or -1."""
    if pst[COUNT] == 0:
        return -1
    s = _slot(h_key, pair)
    if h_key[s] != pair:
        return -1
    j = h_val[s]
    if p_mrg[j] != 0 or p_dt[2 * j] != _INF:
        return -1
    return j


@nb.njit(cache=True, nogil=True)
def carry_deferred(h_key, h_val, pst, p_owner, p_key, p_elab, p_ct, p_dt, p_mrg,
                   n_key, n_val, nst, n_owner, n_key_, n_elab, n_ct, n_dt, n_mrg):  # type: ignore[no-untyped-def]
    """Copy the unmerged edges (in order) into an empty store, and their pairs' table
    entries (the newest edge of a pair last, so the table points at it). Those below BASE
    are the deferred ones; any after it (a batch an exception stopped) stay to be
    considered by the next merge."""
    k = 0
    below = 0
    for j in range(pst[COUNT]):
        if p_mrg[j] != 0:
            continue
        for side in range(2):
            src, dst = 2 * j + side, 2 * k + side
            n_owner[dst], n_key_[dst], n_elab[dst] = p_owner[src], p_key[src], p_elab[src]
            n_ct[dst], n_dt[dst] = p_ct[src], p_dt[src]
        n_mrg[k] = 0
        pair = pair_of(p_owner[2 * j], p_owner[2 * j + 1])
        s = _slot(n_key, pair)
        n_key[s] = pair
        n_val[s] = k
        if j < pst[BASE]:
            below += 1
        k += 1
    nst[BASE] = below
    nst[COUNT] = k
    nst[DEFERRED] = below


@leaf
def relevant(la, lb, rel):  # type: ignore[no-untyped-def]
    """Both labels among those the standing queries read (``rel``: a flag per label): the
    edge's entries are merged before matching, not deferred."""
    n = len(rel)
    return 0 <= la < n and 0 <= lb < n and rel[la] and rel[lb]


@nb.njit(cache=True, nogil=True)
def select_pending(p_owner, p_key, p_mrg, lo, hi, vlabel, rel, keep):  # type: ignore[no-untyped-def]
    """The entries of the unmerged edges lo..hi-1 to merge now, flagged merged: every one
    (``keep`` off), or those whose ends' labels both have ``rel`` set (the others stay
    pending: returns them as a count too)."""
    out = np.empty(2 * (hi - lo), np.int64)
    n = 0
    kept = 0
    nr = len(rel)
    top = nr - 1   # (read only when nr > 0)
    for j in range(lo, hi):
        if p_mrg[j] != 0:   # merged already
            continue
        # branch-free: which edges are read is a coin toss an edge (Enron q0: 3,049 of
        # 18,383), and a jump on it mispredicted at every other toss
        take = not keep
        if keep and nr > 0:
            la = np.int64(vlabel[p_owner[2 * j]])
            lb = p_key[2 * j] >> np.int64(32)
            inside = (la >= 0) & (la < nr) & (lb >= 0) & (lb < nr)
            take = inside & rel[min(max(la, 0), top)] & rel[min(max(lb, 0), top)]
        out[n] = 2 * j
        out[n + 1] = 2 * j + 1
        n += 2 * np.int64(take)
        kept += 1 - np.int64(take)
        p_mrg[j] = np.uint8(take)
    return out[:n], kept
