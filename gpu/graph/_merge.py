"""Merging a batch's pending entries into their versions (in place; see ``_pending``).

Each touched vertex is done once: its pending entries sorted by key (stable, so equal
keys keep creation order), room made as a sequential insertion would (purge the dead
entries in place when full, else a new version of capacity 2 x cap + 2, repeated), then
one merge: from the back into the reserved capacity, or forward into the new version.
Resumable per vertex when the pool is full (the caller collects or grows it; pending
entries live outside the pool).
"""

from __future__ import annotations

import numba as nb
import numpy as np

from .._jit import leaf
from ._kernels import BATCH, DONE, GARBAGE, NEED_POOL, POOL_USED, WATERMARK, _copy_live
from ._labels import add_group, recount
from ._pending import select_pending
from ._prefetch import prefetch

# how many pending entries ahead the merge prefetches them, their vertex's row, then its
# version's last _TAIL entries (``merge_pending``; tails of 48-256 and distances 4-48
# measured)
_AHEAD_ENTRY, _AHEAD_ROW, _AHEAD_TAIL, _TAIL = 32, 16, 8, 96


# bits of the owner digit in each pass of ``order_pending``'s radix sort
_DIGIT = 11


@nb.njit(cache=True, nogil=True)
def order_pending(p_owner, sel, nv):  # type: ignore[no-untyped-def]
    """Pending entries ``sel`` (ascending) grouped by owner, entry order kept within a
    group: a radix sort, of one digit spanning every vertex id (a counting sort) when the
    entries are many against the vertices, else of 11-bit digits (numba's merge argsort
    took 215 us of 6,098 entries, Enron q0's whole merge, against 20 us); a merge sort
    when they are few."""
    n = len(sel)
    if n <= 64:
        return sel[np.argsort(p_owner[sel], kind="mergesort")]
    bits = _DIGIT
    if 4 * n >= nv:   # one pass over every vertex id (a counting sort)
        bits = 1
        while (nv - 1) >> bits:
            bits += 1
    mask = (1 << bits) - 1
    cur, nxt = sel.copy(), np.empty(n, np.int64)
    cnt = np.empty(1 << bits, np.int64)
    shift = 0
    while True:   # stable passes, lowest digit first
        cnt[:] = 0
        for i in cur:
            cnt[(p_owner[i] >> shift) & mask] += 1
        s = 0
        for d in range(len(cnt)):
            s, cnt[d] = s + cnt[d], s
        for i in cur:
            d = (p_owner[i] >> shift) & mask
            nxt[cnt[d]] = i
            cnt[d] += 1
        cur, nxt = nxt, cur
        shift += bits
        if not (nv - 1) >> shift:
            break
    return cur


@nb.njit(cache=True, nogil=True)
def _sort_large(idx, g0, g1, p_key):  # type: ignore[no-untyped-def]
    """idx[g0:g1] by key, stable (a group of more than 32: it allocates)."""
    sub = idx[g0:g1].copy()
    order = np.argsort(p_key[sub], kind="mergesort")
    for r in range(g1 - g0):
        idx[g0 + r] = sub[order[r]]


@leaf
def _sort_group(idx, g0, g1, p_key):  # type: ignore[no-untyped-def]
    """idx[g0:g1] by key, stable (an insertion sort: groups of at most 32)."""
    for r in range(g0 + 1, g1):
        x = idx[r]
        kx = p_key[x]
        s = r
        while s > g0 and p_key[idx[s - 1]] > kx:
            idx[s] = idx[s - 1]
            s -= 1
        idx[s] = x


@leaf
def _live(off, n, wm, dt):  # type: ignore[no-untyped-def]
    """Entries of off..off+n a reader can still see (dt > watermark)."""
    m = 0
    for i in range(off, off + n):
        m += dt[i] > wm
    return m


@leaf
def _merge_back(v, idx, g0, g1, p_key, p_elab, p_ct, p_dt, seg_off, seg_len, key, elab, ct,
                dt):  # type: ignore[no-untyped-def]
    """Merge pending idx[g0:g1] into v's version from the back (the capacity has room)."""
    off = seg_off[v]
    n = np.int64(seg_len[v])
    i = off + n - 1
    w = off + n + (g1 - g0) - 1
    j = g1 - 1
    while j >= g0:
        x = idx[j]
        if i >= off and key[i] > p_key[x]:
            key[w], elab[w], ct[w], dt[w] = key[i], elab[i], ct[i], dt[i]
            i -= 1
        else:
            key[w], elab[w], ct[w], dt[w] = p_key[x], p_elab[x], p_ct[x], p_dt[x]
            j -= 1
        w -= 1
    seg_len[v] = n + (g1 - g0)


@leaf
def _merge_into_new(v, cap, idx, g0, g1, p_key, p_elab, p_ct, p_dt, meta, seg_off, seg_len,
                    seg_cap, seg_batch, key, elab, ct, dt):  # type: ignore[no-untyped-def]
    """A new version of capacity ``cap`` at the pool's end: v's entries a reader can still
    see, merged forward with pending idx[g0:g1] (one pass, no copy then merge)."""
    w0 = meta[POOL_USED]
    wm = meta[WATERMARK]
    i, end = seg_off[v], seg_off[v] + seg_len[v]
    w = w0
    for j in range(g0, g1):
        x = idx[j]
        kx = p_key[x]
        while i < end and key[i] <= kx:
            if dt[i] > wm:
                key[w], elab[w], ct[w], dt[w] = key[i], elab[i], ct[i], dt[i]
                w += 1
            i += 1
        key[w], elab[w], ct[w], dt[w] = kx, p_elab[x], p_ct[x], p_dt[x]
        w += 1
    while i < end:
        if dt[i] > wm:
            key[w], elab[w], ct[w], dt[w] = key[i], elab[i], ct[i], dt[i]
            w += 1
        i += 1
    meta[GARBAGE] += seg_cap[v]
    meta[POOL_USED] = w0 + cap
    seg_off[v] = w0
    seg_len[v] = w - w0
    seg_cap[v] = cap
    seg_batch[v] = meta[BATCH]


@nb.njit(cache=True, nogil=True)
def merge_pending(r0, idx, p_owner, p_key, p_elab, p_ct, p_dt, meta, seg_off, seg_len,
                  seg_cap, seg_batch, loff, key, elab, ct, dt):  # type: ignore[no-untyped-def]
    """Merge the groups of ``idx`` (from ``order_pending``) from position r0 on; returns
    (position to resume from, DONE or NEED_POOL). Label offsets (``loff``, if it has
    columns) follow: a group's entries are added to its row, or a purged or moved
    version's row is recounted."""
    lcols = loff.shape[1]
    labels = lcols > 0
    lflat = loff.reshape(loff.size)   # rows by position, for the prefetch
    n_idx = len(idx)
    r = r0
    # prefetch for the groups the merge reaches soon: their pending entries
    # (_AHEAD_ENTRY ahead: written in arrival order, read in owner order, and evicted by
    # the versions streamed since), their owner's row (_AHEAD_ROW), then the last _TAIL
    # entries of its version (_AHEAD_TAIL; the row is in cache by then), where _merge_back
    # starts and which it mostly moves. Without it each vertex is a chain of misses on
    # four arrays (Enron insertion stream: 13k vertices, 211k entries moved); a
    # prefetch of the next vertex's tail alone, by a load, gained nothing. Written here,
    # not in a helper (a call passing these arrays a group), and seg_cap fetched too:
    # Enron q0's merge of 2,921 versions 1.0-1.3 -> 0.83-0.96 ms (alternating runs; the
    # same for _merge_back written here measured worse)
    c_entry = c_row = c_tail = r0
    last = -1
    while r < n_idx:
        e = min(r + _AHEAD_ENTRY, n_idx)
        while c_entry < e:
            x = idx[c_entry]
            prefetch(p_owner, x)
            prefetch(p_key, x)
            prefetch(p_elab, x)
            prefetch(p_ct, x)
            prefetch(p_dt, x)
            c_entry += 1
        e = min(r + _AHEAD_ROW, n_idx)
        while c_row < e:
            u = p_owner[idx[c_row]]
            prefetch(seg_off, u)
            prefetch(seg_len, u)
            prefetch(seg_cap, u)
            if lcols:
                prefetch(lflat, u * lcols)
            c_row += 1
        e = min(r + _AHEAD_TAIL, n_idx)
        while c_tail < e:
            u = p_owner[idx[c_tail]]
            c_tail += 1
            if u == last:
                continue
            last = u
            end = seg_off[u] + seg_len[u]
            t = max(end - _TAIL, seg_off[u])
            while t < end:
                prefetch(key, t)
                prefetch(elab, t)
                prefetch(ct, t)
                prefetch(dt, t)
                t += 8
        v = p_owner[idx[r]]
        g1 = r + 1
        while g1 < n_idx and p_owner[idx[g1]] == v:
            g1 += 1
        k = g1 - r
        if k > 32:
            _sort_large(idx, r, g1, p_key)
        elif k > 1:   # most groups have one entry: no call
            _sort_group(idx, r, g1, p_key)
        n = np.int64(seg_len[v])
        off = seg_off[v]
        purged = False
        if n + k > seg_cap[v]:   # full: purging the dead entries may make room
            n = _live(off, n, meta[WATERMARK], dt)
            if n + k <= seg_cap[v]:
                seg_len[v] = _copy_live(off, seg_len[v], off, meta[WATERMARK], key, elab, ct,
                                        dt)
                purged = True
        if n + k > seg_cap[v]:
            cap = 2 * np.int64(seg_cap[v]) + 2
            while cap < n + k:
                cap = 2 * cap + 2
            if meta[POOL_USED] + cap > len(key):
                return r, NEED_POOL
            _merge_into_new(v, cap, idx, r, g1, p_key, p_elab, p_ct, p_dt, meta, seg_off,
                            seg_len, seg_cap, seg_batch, key, elab, ct, dt)
            if labels:
                recount(v, seg_off, seg_len, key, loff)
        else:
            _merge_back(v, idx, r, g1, p_key, p_elab, p_ct, p_dt, seg_off, seg_len, key,
                        elab, ct, dt)
            if labels and purged:
                recount(v, seg_off, seg_len, key, loff)
            elif labels:
                add_group(v, idx, r, g1, p_key, loff)
        r = g1
    return r, DONE


@nb.njit(cache=True, nogil=True)
def select_and_merge(lo, hi, vlabel, rel, keep, nv, p_owner, p_key, p_elab, p_ct, p_dt, p_mrg,
                     meta, seg_off, seg_len, seg_cap, seg_batch, loff, key, elab, ct, dt):  # type: ignore[no-untyped-def]
    """A batch's merge in one call: ``select_pending``, ``order_pending``, then
    ``merge_pending`` from the start. Returns the ordered entries, how many stay
    deferred, and where the merge stopped (DONE, or NEED_POOL and the position to resume
    from: the caller resumes with ``merge_pending``). One call, not three with Python
    between: the merge runs beside the tasks' set-up on another thread, and every return
    to Python waited for that thread to let go of the interpreter (Enron q3: the selection
    0.3 ms of its own, 1.1-1.2 ms of wall time beside the set-up)."""
    sel, kept = select_pending(p_owner, p_key, p_mrg, lo, hi, vlabel, rel, keep)
    if len(sel) == 0:
        return sel, kept, 0, DONE
    idx = order_pending(p_owner, sel, nv)
    r, code = merge_pending(0, idx, p_owner, p_key, p_elab, p_ct, p_dt, meta, seg_off, seg_len,
                            seg_cap, seg_batch, loff, key, elab, ct, dt)
    return idx, kept, r, code
