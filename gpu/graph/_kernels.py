"""numba kernels of the host multi-version graph (see ``_host.py`` for the layout).

``apply_batch`` is the sequential graph updater: it resolves each raw update in arrival
order (ignored / rejected / applied, vertex deletions expanded into edge deletions in
ascending external neighbour id), gives every primitive update a tick, and writes the
new lifetimes. It is resumable: when the pool or the output is full it returns the index
to resume from, having changed nothing for that update.
"""

from __future__ import annotations

import numba as nb
import numpy as np

from .._jit import leaf
from .._types import INF_TICK, WILDCARD, RejectReason, UpdateOp, UpdateStatus
from ._edgeset import _EMPTY as _ES_EMPTY
from ._edgeset import _TOMB as _ES_TOMB
from ._edgeset import COUNT as _ES_COUNT
from ._edgeset import TOMBS as _ES_TOMBS
from ._edgeset import es_drop, es_find, es_remove
from ._halves import half_home, half_next
from ._idmap import _hash, set_direct, slot_of
from ._pending import _EMPTY as _P_EMPTY
from ._pending import BASE, COUNT, DEFERRED, find_pending, pair_of, relevant
from ._prefetch import prefetch

# meta slots
NV, POOL_USED, TICK, BATCH, WATERMARK, IDCOUNT, NEDGES, GARBAGE, IN_PLACE = range(9)
META_SIZE = 9
# apply_batch return codes (NEED_MERGE: in place, a vertex deletion needs the pending
# entries in their versions first; NEED_VERTS: no room for two more internal ids)
DONE, NEED_POOL, NEED_OUT, NEED_MERGE, NEED_VERTS = 0, 1, 2, 3, 4

_INF = INF_TICK
# how many updates ahead apply_batch prefetches an edge update's slots in the alive-edge
# set and the pending table, its vertices' rows (and twice that, their direct ids)
_AHEAD = 12
# binary searches ``apply_deletion_log`` runs in lockstep
_LANES = 64
_WILD = WILDCARD
_INS_E, _DEL_E = np.int8(UpdateOp.INSERT_EDGE), np.int8(UpdateOp.DELETE_EDGE)
_INS_V, _DEL_V = np.int8(UpdateOp.INSERT_VERTEX), np.int8(UpdateOp.DELETE_VERTEX)
_APPLIED, _IGNORED, _REJECTED = (np.int8(UpdateStatus.APPLIED), np.int8(UpdateStatus.IGNORED),
                                 np.int8(UpdateStatus.REJECTED))
_R_NONE, _R_LOOP = np.int8(RejectReason.NONE), np.int8(RejectReason.SELF_LOOP)
_R_RELABEL, _R_WILD = np.int8(RejectReason.RELABEL_CONNECTED), np.int8(RejectReason.WILDCARD_LABEL)


@nb.njit(cache=True, nogil=True, inline="always")
def make_key(label, v):  # type: ignore[no-untyped-def]
    """Sort key of a neighbour: (label, id), so each label is one contiguous range."""
    return (np.int64(label) << np.int64(32)) | np.int64(v)


@nb.njit(cache=True, nogil=True, inline="always")
def lower_bound(a, lo, hi, x):  # type: ignore[no-untyped-def]
    while lo < hi:
        mid = (lo + hi) >> 1
        if a[mid] < x:
            lo = mid + 1
        else:
            hi = mid
    return lo


@leaf
def find_alive(key, dt, off, n, k):  # type: ignore[no-untyped-def]
    i = lower_bound(key, off, off + n, k)
    while i < off + n and key[i] == k:
        if dt[i] == _INF:
            return i
        i += 1
    return -1


@leaf
def find_edge(v, w, vlabel, seg_off, seg_len, loff, key, dt):  # type: ignore[no-untyped-def]
    """The alive entry of w in v's version: a search of w's label range where the label
    offsets have its column (``_labels``; a hub's range is a fifth of its version on
    Enron), else of the whole version."""
    off, n = _label_span(v, vlabel[w], seg_off, seg_len, loff)
    return find_alive(key, dt, off, n, make_key(vlabel[w], w))


@nb.njit(cache=True, nogil=True, inline="always")
def _label_span(v, lab, seg_off, seg_len, loff):  # type: ignore[no-untyped-def]
    """(first entry, length) of label ``lab`` in v's version where the label offsets have
    its column, else of the whole version."""
    if np.int64(lab) >= 0 and np.int64(lab) < loff.shape[1] - 1:   # none: no columns
        return seg_off[v] + loff[v, lab], np.int64(loff[v, lab + 1] - loff[v, lab])
    return seg_off[v], np.int64(seg_len[v])


@nb.njit(cache=True, nogil=True)
def apply_deletion_log(d_a, d_b, d_t, n, vlabel, seg_off, seg_len, loff, key, dt):  # type: ignore[no-untyped-def]
    """End the entries of the logged deletions (edges deleted while in their versions)
    at their ticks: both entries of each, found by binary searches of the label range,
    _LANES of them in lockstep, branch-free (a select, not a jump: the comparisons are
    coin flips), each probe prefetched a round ahead. One search after another waited on
    a miss and a mispredicted jump a step (a hub's label range is hundreds of entries in
    a pool of megabytes): Enron q0's in-batch deletions took 0.6 ms of a 1.1 ms updater."""
    base = np.empty(_LANES, np.int64)
    span = np.empty(_LANES, np.int64)
    end = np.empty(_LANES, np.int64)
    kk = np.empty(_LANES, np.int64)
    m = 2 * n   # searches: (a, b) then (b, a) of each deletion
    lcols = loff.shape[1]
    lflat = loff.reshape(loff.size)   # rows by position, for the prefetch
    for g0 in range(0, m, _LANES):
        g = min(_LANES, m - g0)
        for j in range(g0 + _LANES, min(g0 + 2 * _LANES, m)):   # the next group's rows
            v = d_a[j >> 1] if (j & 1) == 0 else d_b[j >> 1]
            prefetch(seg_off, v)
            prefetch(seg_len, v)
            if lcols:
                prefetch(lflat, v * lcols)
        for s in range(g):
            j = g0 + s
            v, w = (d_a[j >> 1], d_b[j >> 1]) if (j & 1) == 0 else (d_b[j >> 1], d_a[j >> 1])
            off, ln = _label_span(v, vlabel[w], seg_off, seg_len, loff)
            base[s], span[s], end[s] = off, ln, off + ln
            kk[s] = make_key(vlabel[w], w)
            prefetch(key, off + (ln >> 1))
        busy = True
        while busy:   # base: the last entry below the key so far (or the first)
            busy = False
            for s in range(g):
                ln = span[s]
                if ln > 1:
                    half = ln >> 1
                    b = base[s]
                    b = b + half if key[b + half] < kk[s] else b
                    ln -= half
                    base[s], span[s] = b, ln
                    if ln > 1:
                        prefetch(key, b + (ln >> 1))
                        busy = True
        for s in range(g):
            e = base[s]
            if e < end[s] and key[e] < kk[s]:
                e += 1
            base[s] = e
            prefetch(dt, e)
        for s in range(g):
            e = base[s]
            while e < end[s] and key[e] == kk[s] and dt[e] != _INF:
                e += 1
            if e < end[s] and key[e] == kk[s]:   # always, for an edge alive in its version
                dt[e] = d_t[(g0 + s) >> 1]


@nb.njit(cache=True, nogil=True)
def _end_edge(e, a, b, meta, vlabel, vdeg, seg_off, seg_len, loff, key, dt):  # type: ignore[no-untyped-def]
    """Delete alive edge a-b (entry e in a's version) at a new tick; returns the tick."""
    f = find_edge(b, a, vlabel, seg_off, seg_len, loff, key, dt)
    t = _end_tick(a, b, meta, vdeg)
    dt[e] = t
    dt[f] = t
    return t


@leaf
def _end_tick(a, b, meta, vdeg):  # type: ignore[no-untyped-def]
    """The tick that ends edge a-b, and the degree and edge counts it changes."""
    t = meta[TICK] + 1
    meta[TICK] = t
    vdeg[a] -= 1
    vdeg[b] -= 1
    meta[NEDGES] -= 1
    return t


@nb.njit(cache=True, nogil=True)
def _new_vertex(x, label, keys, vals, used, direct, meta, vlabel, vext, valive, vdeg,
                seg_off, seg_len, seg_cap, seg_batch, loff):  # type: ignore[no-untyped-def]
    v = meta[NV]
    meta[NV] = v + 1
    vlabel[v] = label
    vext[v] = x
    valive[v] = 1
    vdeg[v] = 0
    seg_off[v] = 0
    seg_len[v] = 0
    seg_cap[v] = 0
    seg_batch[v] = -1
    loff[v, :] = 0
    s = slot_of(keys, used, x)
    if used[s] == 0:
        used[s] = 1
        keys[s] = x
        meta[IDCOUNT] += 1
    vals[s] = v
    set_direct(direct, x, v)
    return np.int32(v)


@nb.njit(cache=True, nogil=True, inline="always")
def _room(meta, vlabel, keys):  # type: ignore[no-untyped-def]
    """Two more internal ids fit: vertex arrays, and the id table stays under half full."""
    return meta[NV] + 2 <= len(vlabel) and 2 * (meta[IDCOUNT] + 2) <= len(keys)


@nb.njit(cache=True, nogil=True)
def _need(v, meta, seg_len, seg_cap, seg_batch):  # type: ignore[no-untyped-def]
    """Pool entries inserting into v may take (copy-on-write; in place, insertions wait in
    the pending list and ``_merge`` makes room)."""
    if seg_batch[v] != meta[BATCH]:
        # a new version once per batch; 1/8 headroom: a hub's copy is its degree, not twice
        n = np.int64(seg_len[v])
        return n + max(np.int64(4), n >> np.int64(3))
    if seg_len[v] == seg_cap[v]:
        return 2 * np.int64(seg_cap[v]) + 2
    return 0


@nb.njit(cache=True, nogil=True)
def _copy_live(src, n, dst, w, key, elab, ct, dt):  # type: ignore[no-untyped-def]
    """Copy entries src..src+n that a reader can still see (dt > watermark ``w``) to dst
    on, in order; returns how many. dst <= src is safe (the copy runs forward)."""
    m = 0
    for i in range(src, src + n):
        if dt[i] > w:
            if dst + m != i:
                key[dst + m] = key[i]
                elab[dst + m] = elab[i]
                ct[dst + m] = ct[i]
                dt[dst + m] = dt[i]
            m += 1
    return m


@nb.njit(cache=True, nogil=True)
def _relocate(v, cap, meta, seg_off, seg_len, seg_cap, seg_batch, key, elab, ct, dt):  # type: ignore[no-untyped-def]
    """New version of v's neighbour array (copy-on-write); drops entries no reader can see."""
    dst = meta[POOL_USED]
    m = _copy_live(seg_off[v], seg_len[v], dst, meta[WATERMARK], key, elab, ct, dt)
    meta[GARBAGE] += seg_cap[v]
    meta[POOL_USED] = dst + cap
    seg_off[v] = dst
    seg_len[v] = m
    seg_cap[v] = cap
    seg_batch[v] = meta[BATCH]


@nb.njit(cache=True, nogil=True, inline="always")
def _shift_up(a, lo, hi):  # type: ignore[no-untyped-def]
    """a[lo+1:hi+1] = a[lo:hi]. Unsigned indices (no wraparound branch) and one array per
    loop let LLVM vectorise it: a hub's insertion moves hundreds of entries, and this is
    2x faster than the four arrays moved together with signed indices."""
    one = np.uint64(1)
    i = np.uint64(hi)
    stop = np.uint64(lo)
    while i > stop:
        a[i] = a[i - one]
        i -= one


@nb.njit(cache=True, nogil=True)
def _insert_entry(v, k, el, tick, meta, seg_off, seg_len, seg_cap, seg_batch,
                  key, elab, ct, dt):  # type: ignore[no-untyped-def]
    need = _need(v, meta, seg_len, seg_cap, seg_batch)
    if need > 0:
        _relocate(v, need, meta, seg_off, seg_len, seg_cap, seg_batch, key, elab, ct, dt)
    off, n = seg_off[v], seg_len[v]
    # upper bound: equal keys keep creation order
    lo, hi = off, off + n
    while lo < hi:
        mid = (lo + hi) >> 1
        if key[mid] <= k:
            lo = mid + 1
        else:
            hi = mid
    _shift_up(key, lo, off + n)
    _shift_up(elab, lo, off + n)
    _shift_up(ct, lo, off + n)
    _shift_up(dt, lo, off + n)
    key[lo] = k
    elab[lo] = el
    ct[lo] = tick
    dt[lo] = _INF
    seg_len[v] = n + 1


@nb.njit(cache=True, nogil=True)
def apply_batch(i0, n_out, ops, src, dst, lab, keys, vals, used, direct, meta,
                vlabel, vext, valive, vdeg, seg_off, seg_len, seg_cap, seg_batch, loff,
                key, elab, ct, dt,
                o_raw, o_op, o_a, o_b, o_src, o_dst, o_el, o_tick, o_status, o_reason,
                h_key, h_val, pst, p_owner, p_key, p_elab, p_ct, p_dt, p_mrg, e_keys, e_vals,
                e_st, rel, d_a, d_b, d_t, dlen, l_a, l_b, l_t, llen):  # type: ignore[no-untyped-def]
    """In place (``meta[IN_PLACE]``) edge insertions go to the pending arrays (see
    ``_pending``), merged by the caller; copy-on-write inserts into new versions. In
    place, a deletion of an edge in its version is logged (``l_*``, room for the batch's
    deletions) and the caller ends its entries after the loop (``apply_deletion_log``:
    searches in lockstep); until then only a vertex deletion reads them (it asks for the
    log first: NEED_MERGE)."""
    pool_cap = len(key)
    in_place = meta[IN_PLACE] != 0
    out_cap = len(o_raw)
    n_ops = len(ops)
    nd = np.uint64(len(direct))
    emask = np.uint64(len(e_keys) - 1)
    hmask = np.uint64(len(h_key) - 1)
    for i in range(i0, n_ops):
        # look ahead: the direct ids of update i + 2A, then the edge-set and pending-table
        # slots and vertex rows of update i + A (written here, not in a helper: a call
        # passing these arrays costs more than it hides). Each update otherwise waits on
        # a chain of misses: Enron one batch 0.85-0.95 -> 0.57 ms inserting, 1.10-1.15 ->
        # 0.93 ms deleting
        far = i + 2 * _AHEAD
        if far < n_ops:
            if np.uint64(src[far]) < nd and np.uint64(dst[far]) < nd:
                prefetch(direct, src[far])
                prefetch(direct, dst[far])
        ahead = i + _AHEAD
        if ahead < n_ops and ops[ahead] <= _DEL_E:
            xa, ya = src[ahead], dst[ahead]
            if np.uint64(xa) < nd and np.uint64(ya) < nd:
                pa, pb = direct[xa], direct[ya]
                if pa >= 0 and pb >= 0:
                    hp = _hash(pair_of(pa, pb))
                    prefetch(e_keys, half_home(hp, emask))
                    prefetch(h_key, half_home(hp, hmask))
                    if ops[ahead] == _DEL_E:   # a deletion reads the pair's label
                        prefetch(e_vals, half_home(hp, emask))
                    prefetch(vlabel, pa)
                    prefetch(vlabel, pb)
                    prefetch(vdeg, pa)
                    prefetch(vdeg, pb)
        op = ops[i]
        x, y, lb = src[i], dst[i], lab[i]
        if n_out >= out_cap:
            return i, n_out, NEED_OUT
        j = n_out
        o_raw[j] = i
        o_op[j] = op
        o_a[j] = -1
        o_b[j] = -1
        o_src[j] = x
        o_dst[j] = y
        o_el[j] = lb
        o_tick[j] = 0
        o_status[j] = _APPLIED
        o_reason[j] = _R_NONE
        if op == _INS_E or op == _DEL_E:
            if x == y:
                o_status[j] = _REJECTED
                o_reason[j] = _R_LOOP
                n_out += 1
                continue
            if op == _INS_E and lb == _WILD:
                o_status[j] = _REJECTED
                o_reason[j] = _R_WILD
                n_out += 1
                continue
            # the ends' ids (the id map's lookup written here: numba's IR inlining of a
            # helper binds its arrays anew, two atomic reference counts each a call, and a
            # leaf's call passes seven words an array; design.md round 15)
            if np.uint64(x) < nd:
                a = direct[x]
            else:
                sa = slot_of(keys, used, x)
                a = vals[sa] if used[sa] != 0 else np.int32(-1)
            if np.uint64(y) < nd:
                b = direct[y]
            else:
                sb = slot_of(keys, used, y)
                b = vals[sb] if used[sb] != 0 else np.int32(-1)
            if op == _DEL_E:
                s_ = es_find(e_keys, pair_of(a, b)) if a >= 0 and b >= 0 else np.int64(-1)
                if s_ < 0:   # not alive: a missing delete costs one probe
                    o_status[j] = _IGNORED
                    n_out += 1
                    continue
                el = e_vals[s_]
                es_drop(e_keys, e_st, s_)
                if in_place:
                    pj = find_pending(h_key, h_val, pst, p_dt, p_mrg, pair_of(a, b))
                    if pj >= 0:   # ends a pending insertion (deferred or this batch's)
                        t = _end_tick(a, b, meta, vdeg)
                        p_dt[2 * pj] = t
                        p_dt[2 * pj + 1] = t
                        o_a[j], o_b[j], o_el[j], o_tick[j] = a, b, el, t
                        n_out += 1
                        continue
                if len(d_t) and not relevant(vlabel[a], vlabel[b], rel):
                    # no standing query reads it: its entries end when the deferred
                    # edges are merged (the deletion log), not now
                    t = _end_tick(a, b, meta, vdeg)
                    k = dlen[0]
                    d_a[k], d_b[k], d_t[k] = a, b, t
                    dlen[0] = k + 1
                    o_a[j], o_b[j], o_el[j], o_tick[j] = a, b, el, t
                    n_out += 1
                    continue
                if in_place:
                    t = _end_tick(a, b, meta, vdeg)
                    k = llen[0]
                    l_a[k], l_b[k], l_t[k] = a, b, t
                    llen[0] = k + 1
                else:
                    e = find_edge(a, b, vlabel, seg_off, seg_len, loff, key, dt)
                    t = _end_edge(e, a, b, meta, vlabel, vdeg, seg_off, seg_len, loff, key, dt)
                o_a[j], o_b[j], o_el[j], o_tick[j] = a, b, el, t
                n_out += 1
                continue
            if (a < 0 or b < 0) and not _room(meta, vlabel, keys):
                return i, n_out, NEED_VERTS
            if a < 0:
                a = _new_vertex(x, 0, keys, vals, used, direct, meta, vlabel, vext, valive, vdeg,
                                seg_off, seg_len, seg_cap, seg_batch, loff)
            if b < 0:
                b = _new_vertex(y, 0, keys, vals, used, direct, meta, vlabel, vext, valive, vdeg,
                                seg_off, seg_len, seg_cap, seg_batch, loff)
            pair = pair_of(a, b)
            # the edge set's probe (es_probe written here): alive, or the first tombstone
            # or empty slot on the pair's walk, which the insertion fills below
            slot = half_home(_hash(pair), emask)
            free = np.int64(-1)
            alive = False
            while e_keys[slot] != _ES_EMPTY:
                if e_keys[slot] == pair:
                    alive = True
                    break
                if e_keys[slot] == _ES_TOMB and free < 0:
                    free = np.int64(slot)
                slot = half_next(slot, emask)
            if alive:   # in a version or pending
                o_status[j] = _IGNORED
                n_out += 1
                continue
            put = free if free >= 0 else np.int64(slot)
            kb = make_key(vlabel[b], b)
            if not in_place:   # in place, insertions wait in the pending list
                need = (_need(a, meta, seg_len, seg_cap, seg_batch)
                        + _need(b, meta, seg_len, seg_cap, seg_batch))
                if meta[POOL_USED] + need > pool_cap:
                    return i, n_out, NEED_POOL
            t = meta[TICK] + 1
            meta[TICK] = t
            if in_place:   # pending: entry kb in a's version, ka in b's (add_pending's)
                pn = pst[COUNT]
                pst[COUNT] = pn + 1
                p_owner[2 * pn], p_key[2 * pn], p_elab[2 * pn] = a, kb, lb
                p_ct[2 * pn], p_dt[2 * pn] = t, _INF
                p_owner[2 * pn + 1], p_key[2 * pn + 1] = b, make_key(vlabel[a], a)
                p_elab[2 * pn + 1], p_ct[2 * pn + 1], p_dt[2 * pn + 1] = lb, t, _INF
                p_mrg[pn] = 0
                hs = half_home(_hash(pair), hmask)
                while h_key[hs] != _P_EMPTY and h_key[hs] != pair:
                    hs = half_next(hs, hmask)
                h_key[hs] = pair
                h_val[hs] = pn
            else:
                _insert_entry(a, kb, lb, t, meta, seg_off, seg_len, seg_cap, seg_batch,
                              key, elab, ct, dt)
                _insert_entry(b, make_key(vlabel[a], a), lb, t, meta, seg_off, seg_len,
                              seg_cap, seg_batch, key, elab, ct, dt)
            if e_keys[put] == _ES_TOMB:   # es_put's
                e_st[_ES_TOMBS] -= 1
            e_keys[put] = pair
            e_vals[put] = lb
            e_st[_ES_COUNT] += 1
            vdeg[a] += 1
            vdeg[b] += 1
            meta[NEDGES] += 1
            o_a[j], o_b[j], o_tick[j] = a, b, t
            n_out += 1
            continue
        # vertex operations
        sx = slot_of(keys, used, x)
        a = vals[sx] if used[sx] != 0 else np.int32(-1)
        o_dst[j] = -1
        if op == _INS_V:
            if lb == _WILD:
                o_status[j] = _REJECTED
                o_reason[j] = _R_WILD
            elif a >= 0 and vlabel[a] == lb:
                o_status[j] = _IGNORED
                o_a[j] = a
            elif a >= 0 and vdeg[a] > 0:
                o_status[j] = _REJECTED
                o_reason[j] = _R_RELABEL
                o_a[j] = a
            else:
                if not _room(meta, vlabel, keys):
                    return i, n_out, NEED_VERTS
                if a >= 0:
                    valive[a] = 0
                a = _new_vertex(x, lb, keys, vals, used, direct, meta, vlabel, vext, valive, vdeg,
                                seg_off, seg_len, seg_cap, seg_batch, loff)
                t = meta[TICK] + 1
                meta[TICK] = t
                o_a[j], o_tick[j] = a, t
            n_out += 1
            continue
        # DELETE_VERTEX: its edges first, ascending external neighbour id, one tick each
        if a < 0:
            o_status[j] = _IGNORED
            n_out += 1
            continue
        if in_place and (pst[COUNT] > pst[BASE] or pst[DEFERRED] > 0 or dlen[0] > 0
                         or llen[0] > 0):
            return i, n_out, NEED_MERGE
        d = vdeg[a]
        if n_out + d + 1 > out_cap:
            return i, n_out, NEED_OUT
        off, n = seg_off[a], seg_len[a]
        # allocated here, not kept across updates: an array variable live around the
        # update loop costs two atomic reference-count operations every update; n
        # entries bound the live ones whatever the degree says
        nbrs = np.empty(n, np.int32)
        m = 0
        for e in range(off, off + n):
            if dt[e] == _INF:
                nbrs[m] = np.int32(key[e] & np.int64(0xFFFFFFFF))
                m += 1
        order = np.argsort(vext[nbrs[:m]], kind="mergesort")
        for r in range(m):
            w = nbrs[order[r]]
            e = find_alive(key, dt, off, n, make_key(vlabel[w], w))
            t = _end_edge(e, a, w, meta, vlabel, vdeg, seg_off, seg_len, loff, key, dt)
            es_remove(e_keys, e_st, pair_of(a, w))
            q = n_out
            o_raw[q], o_op[q], o_a[q], o_b[q] = i, _DEL_E, a, w
            o_src[q], o_dst[q], o_el[q], o_tick[q] = x, vext[w], elab[e], t
            o_status[q], o_reason[q] = _APPLIED, _R_NONE
            n_out += 1
        j = n_out
        o_raw[j], o_op[j], o_a[j], o_b[j] = i, _DEL_V, a, -1
        o_src[j], o_dst[j], o_el[j] = x, -1, lb
        t = meta[TICK] + 1
        meta[TICK] = t
        o_tick[j], o_status[j], o_reason[j] = t, _APPLIED, _R_NONE
        valive[a] = 0
        vals[sx] = -1
        set_direct(direct, x, -1)
        n_out += 1
    return len(ops), n_out, DONE


@nb.njit(cache=True, nogil=True)
def compact(meta, nv, order, end, seg_off, seg_len, seg_cap, key, elab, ct, dt):  # type: ignore[no-untyped-def]
    """Drop entries no reader can see and pack the current versions to the pool's front;
    returns the new packing order.

    Packing in place needs the versions in pool order. ``order`` is the previous packing
    order and ``end`` where it ended: versions below ``end`` are still in that order, and
    only the versions written since (at or past ``end``) need sorting, which keeps this
    O(pool) rather than a sort of every vertex. Only valid while no matching is in flight
    (old versions are overwritten).
    """
    n_old = len(order)
    n_new = 0
    for v in range(nv):
        if seg_off[v] >= end:
            n_new += 1
    moved = np.empty(n_new, np.int32)
    offs = np.empty(n_new, np.int64)
    j = 0
    for v in range(nv):
        if seg_off[v] >= end:
            moved[j] = v
            offs[j] = seg_off[v]
            j += 1
    moved = moved[np.argsort(offs, kind="mergesort")]
    out = np.empty(nv, np.int32)
    m = 0
    for r in range(n_old):
        v = order[r]
        if v < nv and seg_off[v] < end:
            out[m] = v
            m += 1
    for v in range(n_old, nv):   # created since, never written: nothing to copy
        if seg_off[v] < end:
            out[m] = v
            m += 1
    for r in range(n_new):
        out[m] = moved[r]
        m += 1
    w = meta[WATERMARK]
    p = 0
    for r in range(nv):
        v = out[r]
        m = _copy_live(seg_off[v], seg_len[v], p, w, key, elab, ct, dt)
        seg_off[v] = p
        seg_len[v] = m
        seg_cap[v] = m
        p += m
    meta[POOL_USED] = p
    meta[GARBAGE] = 0
    return out


@nb.njit(cache=True, nogil=True)
def op_counts(op):  # type: ignore[no-untyped-def]
    """A batch's edge insertions, edge deletions and largest op, in one pass (three numpy
    reductions and their enum lookups were about 6 us of a 64-update batch)."""
    ins = dels = 0
    top = np.int8(-1)
    for i in range(len(op)):
        ins += op[i] == _INS_E
        dels += op[i] == _DEL_E
        top = max(top, op[i])
    return ins, dels, top


@nb.njit(cache=True, nogil=True)
def applied_edges(op, status):  # type: ignore[no-untyped-def]
    """Indices of the applied edge updates (OpTable.applied_edges): one pass, where numpy
    took four calls (about 7 us a batch at b = 8)."""
    out = np.empty(len(op), np.int64)
    k = 0
    for i in range(len(op)):
        if op[i] <= _DEL_E and status[i] == _APPLIED:
            out[k] = i
            k += 1
    return out[:k]
