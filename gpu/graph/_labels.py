"""Per-vertex label offsets of the host graph (CPU side, in place only).

A version is sorted by key = (label << 32 | id), so each neighbour label is one
contiguous range, found by two binary searches over the version: on a hub, about 20
mispredicted steps, repeated for every label range a match or an update reads.
``loff[v, c]`` (int32, relative to ``seg_off[v]``) is instead the first entry of v's
version whose neighbour label is >= c, for c in 0..C: label c is
``[loff[v, c], loff[v, c + 1])`` and ``loff[v, C] == seg_len[v]``, two loads.

It is kept beside the arrays the GPU mirrors, which keep their layout, and only while
the graph is updated in place (the CPU executor) and every vertex label is in
[0, C) with C <= ``LABEL_COLUMNS``; otherwise it has no columns and readers search.
Exact through every change of a version: deletions move no entry; the merge adds each
group's entries to its row (``add_group``); a purge, a new version, compaction, a load
or a restore recount rows (``recount``); a new vertex's row is zero.
"""

from __future__ import annotations

import numba as nb
import numpy as np

from .._jit import leaf
from .._types import WILDCARD
from ._kernels import lower_bound

#: labels 0..LABEL_COLUMNS-1 get columns (a row is (C + 1) int32 per vertex); a graph
#: with any other vertex label keeps none
LABEL_COLUMNS = 16

_WILD = WILDCARD
_ONE32 = np.int64(1) << np.int64(32)


@nb.njit(cache=True, nogil=True, inline="always")
def label_range(w, lab, seg_off, seg_len, loff, key):  # type: ignore[no-untyped-def]
    """Pool range of label ``lab`` in w's version (wildcard: all of it): two loads from
    ``loff``, or two binary searches where it has no columns. With columns every vertex
    label is a column, so any other label's range is empty."""
    o = seg_off[w]
    if lab == _WILD:
        return o, o + seg_len[w]
    nc = loff.shape[1] - 1
    if nc < 0:
        base = np.int64(lab) << np.int64(32)
        lo = lower_bound(key, o, o + seg_len[w], base)
        return lo, lower_bound(key, lo, o + seg_len[w], base + _ONE32)
    if np.uint32(lab) < np.uint32(nc):
        return o + loff[w, lab], o + loff[w, lab + 1]
    return o, o


@leaf
def recount(v, seg_off, seg_len, key, loff):  # type: ignore[no-untyped-def]
    """Row v from its version's keys (one pass)."""
    nc = loff.shape[1] - 1
    off, n = seg_off[v], seg_len[v]
    i = off
    for c in range(nc):
        bound = np.int64(c) << np.int64(32)
        while i < off + n and key[i] < bound:
            i += 1
        loff[v, c] = np.int32(i - off)
    loff[v, nc] = np.int32(n)


@nb.njit(cache=True, nogil=True)
def recount_all(nv, seg_off, seg_len, key, loff):  # type: ignore[no-untyped-def]
    for v in range(nv):
        recount(v, seg_off, seg_len, key, loff)


@leaf
def add_group(v, idx, g0, g1, p_key, loff):  # type: ignore[no-untyped-def]
    """Row v after merging pending idx[g0:g1] into v's version without dropping any
    entry: an entry of label l adds one to columns l + 1..C. Every column is visited,
    compared and added (a loop from l + 1 mispredicts its exit: 13k groups of the Enron
    insertion stream 0.31 -> 0.2 ms)."""
    nc = loff.shape[1] - 1
    for j in range(g0, g1):
        lab = p_key[idx[j]] >> np.int64(32)
        for c in range(1, nc + 1):
            loff[v, c] += np.int32(lab < c)
