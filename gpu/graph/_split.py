"""A large in-place batch's edge updates resolved on two threads, split by pair.

``apply_batch`` resolves one update after another on one core: a chain of cache misses
per update (its ids, the alive-edge set, the pending table) while the other core waits
(design.md round 22). An edge update's status depends only on its pair's history, so the
pairs are split in two by their hash's top bit, the bit that also splits the alive-edge
set and the pending table (``_halves``): each thread walks the whole batch and resolves
its own pairs' updates in arrival order, writing only its half of both tables and a
record per update it owns (``resolve_half``). What depends on arrival order across pairs
(ticks, the deletion logs in order, the output rows) comes after, from the two record
streams, on the same two threads, each taking half the batch by position with the counts
of the records before its half (``finish_range``); one thread then applies the degrees.
The threads meet once in between (``run_half``).

Both threads stop at the first update that needs the serial loop (a vertex operation,
an insertion with a new vertex); ``apply_batch`` goes on from there. Only in place: a
batch's insertions wait in the pending store and no version changes.

A batch's pending entries are thread 0's insertions, then thread 1's (each in arrival
order: the merge needs creation order only among a pair's entries, all of one thread),
written by the threads as they resolve but for their ticks. Thread 1's start past room
for every insertion thread 0 owns (each thread first finds whose each update is,
``_owners``); what thread 0 left of that room (its ignored insertions) is flagged merged,
which nothing reads.
"""

from __future__ import annotations

import numba as nb
import numpy as np
import numpy.typing as npt

from .._intrinsics import fetch_add
from ._edgeset import _EMPTY as _ES_EMPTY
from ._edgeset import _TOMB as _ES_TOMB
from ._edgeset import COUNT as _ES_COUNT
from ._edgeset import TOMBS as _ES_TOMBS
from ._halves import half_home, half_next, half_of
from ._idmap import _hash, slot_of
from ._kernels import (
    _APPLIED,
    _DEL_E,
    _IGNORED,
    _INF,
    _INS_E,
    _R_LOOP,
    _R_NONE,
    _R_WILD,
    _REJECTED,
    _WILD,
    make_key,
)
from ._pending import _EMPTY as _P_EMPTY
from ._pending import pair_of, relevant
from ._prefetch import prefetch

__all__ = ["Records", "finish_counts", "run_half"]

# what a record says of its update: an insertion, an ended edge (a pending one, this
# batch's or older; one logged in the deferred edges' log or the batch's), the rest
R_INSERT, R_END, R_DLOG, R_LLOG, R_IGNORED, R_LOOP, R_WILD = range(7)
# count_kinds' slots: applied updates, deferred-log and batch-log deletions
_APPLIED_N, _DLOG_N, _LLOG_N = range(3)
# _split_point's further slots: the first record of each thread past the split
_FIRST_X, _FIRST_Y = 3, 4
# a thread's counters: edge-set pairs added, dropped, tombstones reused; insertions, and
# where its pending entries start
_ADDS, _DROPS, _REUSED, _INSERTED, _BASE = range(5)
# updates ahead that a thread prefetches (its own pairs' slots; twice that, direct ids)
_AHEAD = 12


class Records:
    """One thread's view of a batch (room for ``n`` updates): whose each update is and its
    ends' ids, then a record per update it owns, and its counters."""

    def __init__(self, n: int) -> None:
        self.own = np.empty(n, np.int8)       # the thread of each update (2: no pair)
        self.pa = np.empty(n, np.int32)       # its ends' internal ids
        self.pb = np.empty(n, np.int32)
        self.idx = np.empty(n, np.int32)      # a record's update
        self.kind = np.empty(n, np.int8)
        self.a = np.empty(n, np.int32)
        self.b = np.empty(n, np.int32)
        self.el = np.empty(n, np.int32)       # the edge's label
        self.aux = np.empty(n, np.int32)      # an insertion's or an ended edge's entry
        self.ctr = np.zeros(5, np.int64)      # _ADDS, _DROPS, _REUSED, _INSERTED, _BASE

    def arrays(self) -> tuple[npt.NDArray[np.generic], ...]:
        """``run_half``'s arguments of this thread's view (x_* or y_*)."""
        return (self.own, self.pa, self.pb, self.idx, self.kind, self.a, self.b, self.el,
                self.aux, self.ctr)

    def columns(self) -> tuple[npt.NDArray[np.generic], ...]:
        """``finish_range``'s record arguments (without the count)."""
        return self.idx, self.kind, self.a, self.b, self.el, self.aux

    def fits(self, n: int) -> bool:
        return len(self.idx) >= n


@nb.njit(cache=True, nogil=True)
def _owners(i0, ops, src, dst, lab, keys, vals, used, direct, own, pa, pb):  # type: ignore[no-untyped-def]
    """Whose each update of ops[i0:] is (own: 0 or 1 by its pair, 2 for no pair: thread
    0's) and its ends' ids, up to where the serial loop must go on; returns that index
    and thread 0's insertions (its room in the pending store, an upper bound)."""
    n_ops = len(ops)
    nd = np.uint64(len(direct))
    ins0 = 0
    for i in range(i0, n_ops):
        far = i + 2 * _AHEAD
        if far < n_ops and np.uint64(src[far]) < nd and np.uint64(dst[far]) < nd:
            prefetch(direct, src[far])
            prefetch(direct, dst[far])
        op = ops[i]
        if op > _DEL_E:   # a vertex operation
            return i, ins0
        x, y = src[i], dst[i]
        a = b = np.int32(-1)
        o = 2
        if x != y and not (op == _INS_E and lab[i] == _WILD):
            # (the id map's lookup written here, as in apply_batch: design.md round 15)
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
            if a >= 0 and b >= 0:
                o = half_of(_hash(pair_of(a, b)))
            elif op == _INS_E:   # a new vertex
                return i, ins0
        own[i], pa[i], pb[i] = o, a, b
        ins0 += (o == 0) & (op == _INS_E)
    return n_ops, ins0


@nb.njit(cache=True, nogil=True)
def resolve_half(me, i0, base, ops, src, dst, lab, keys, vals, used, direct, vlabel, rel,
                 logged, e_keys, e_vals, h_key, h_val, p_owner, p_key, p_elab, p_dt, p_mrg,
                 own, pa, pb, r_idx, r_kind, r_a, r_b, r_el, r_aux, ctr):  # type: ignore[no-untyped-def]
    """Thread ``me``'s updates of ops[i0:]: those of pairs in its half, and for thread 0
    those of no pair (self-loops, wildcard insertions, deletions of an unknown vertex).
    Its insertions' pending entries go from ``base`` (thread 0) or past thread 0's room
    (thread 1; ctr[_BASE] says where). Returns where both threads stop and this one's
    record count. ``logged``: deletions of edges no standing query reads go to the
    deletion log (``apply_batch``'s ``len(d_t)``)."""
    stop, ins0 = _owners(i0, ops, src, dst, lab, keys, vals, used, direct, own, pa, pb)
    older = base > 0   # pending edges of earlier batches: a deletion asks the table
    if me == 1:
        base += ins0
    emask = np.uint64(len(e_keys) - 1)
    hmask = np.uint64(len(h_key) - 1)
    n = 0
    adds = drops = reused = inserted = 0
    for i in range(i0, stop):
        ahead = i + _AHEAD
        if ahead < stop and own[ahead] == me:
            hp = _hash(pair_of(pa[ahead], pb[ahead]))
            prefetch(e_keys, half_home(hp, emask))
            if ops[ahead] == _DEL_E:
                prefetch(e_vals, half_home(hp, emask))
            if ops[ahead] == _INS_E or older or inserted > 0:
                prefetch(h_key, half_home(hp, hmask))
            prefetch(vlabel, pa[ahead])
            prefetch(vlabel, pb[ahead])
        o = own[i]
        if o != me and not (me == 0 and o == 2):
            continue
        op, x, y, lb = ops[i], src[i], dst[i], lab[i]
        a, b = pa[i], pb[i]
        kind = R_IGNORED
        if x == y:
            kind = R_LOOP
        elif op == _INS_E and lb == _WILD:
            kind = R_WILD
        elif o != 2:
            pair = pair_of(a, b)
            h = _hash(pair)
            # the pair's walk in the alive-edge set: its slot, or the first free one
            s = half_home(h, emask)
            free = np.int64(-1)
            alive = False
            while e_keys[s] != _ES_EMPTY:
                if e_keys[s] == pair:
                    alive = True
                    break
                if e_keys[s] == _ES_TOMB and free < 0:
                    free = np.int64(s)
                s = half_next(s, emask)
            if op == _DEL_E and alive:
                r_el[n] = e_vals[s]
                e_keys[s] = _ES_TOMB
                drops += 1
                kind = R_LLOG
                if older or inserted > 0:   # (else the table holds none of its pairs)
                    hs = half_home(h, hmask)
                    while h_key[hs] != _P_EMPTY and h_key[hs] != pair:
                        hs = half_next(hs, hmask)
                    if h_key[hs] == pair:   # a pending edge of the pair: alive, or ended
                        v = h_val[hs]
                        if p_mrg[v] == 0 and p_dt[2 * v] == _INF:
                            kind = R_END
                            r_aux[n] = v
                if kind == R_LLOG and logged and not relevant(vlabel[a], vlabel[b], rel):
                    kind = R_DLOG
            elif op == _INS_E and not alive:
                put = free if free >= 0 else np.int64(s)
                if e_keys[put] == _ES_TOMB:
                    reused += 1
                e_keys[put] = pair
                e_vals[put] = lb
                adds += 1
                hs = half_home(h, hmask)
                while h_key[hs] != _P_EMPTY and h_key[hs] != pair:
                    hs = half_next(hs, hmask)
                pn = base + inserted
                inserted += 1
                # its entries but their tick (finish_range's): kb in a's version, ka in b's
                p_owner[2 * pn], p_key[2 * pn] = a, make_key(vlabel[b], b)
                p_owner[2 * pn + 1], p_key[2 * pn + 1] = b, make_key(vlabel[a], a)
                p_elab[2 * pn], p_elab[2 * pn + 1] = lb, lb
                p_dt[2 * pn], p_dt[2 * pn + 1] = _INF, _INF
                p_mrg[pn] = 0
                h_key[hs] = pair
                h_val[hs] = pn
                kind = R_INSERT
                r_aux[n] = pn
                r_el[n] = lb
        if kind == R_IGNORED or kind == R_LOOP or kind == R_WILD:
            a = b = np.int32(-1)
        r_idx[n] = i
        r_kind[n] = kind
        r_a[n] = a
        r_b[n] = b
        n += 1
    ctr[_ADDS] = adds
    ctr[_DROPS] = drops
    ctr[_REUSED] = reused
    ctr[_INSERTED] = inserted
    ctr[_BASE] = base
    return stop, n


@nb.njit(cache=True, nogil=True)
def count_kinds(r_kind, hi, out):  # type: ignore[no-untyped-def]
    """Into ``out``: of records 0..hi-1, the applied updates and the logged deletions of
    each log (added to what it holds)."""
    for r in range(hi):
        k = r_kind[r]
        out[_APPLIED_N] += k <= R_LLOG
        out[_DLOG_N] += k == R_DLOG
        out[_LLOG_N] += k == R_LLOG


@nb.njit(cache=True, nogil=True)
def finish_range(lo, hi, n_out, tick, dl, ll, cx, cy, degrees, ops, src, dst, lab, vdeg,
                 o_raw, o_op, o_a, o_b, o_src, o_dst, o_el, o_tick, o_status, o_reason,
                 p_ct, p_dt, d_a, d_b, d_t, l_a, l_b, l_t,
                 x_idx, x_kind, x_a, x_b, x_el, x_aux, xn,
                 y_idx, y_kind, y_a, y_b, y_el, y_aux, yn):  # type: ignore[no-untyped-def]
    """Updates lo..hi-1 in arrival order from the two threads' records (x: thread 0's,
    from record cx; y: thread 1's, from cy): output rows from ``n_out``, ticks after
    ``tick`` (an insertion's entries' start, an ended one's end), logged deletions from
    ``dl`` and ``ll``, as ``apply_batch`` writes them; ``degrees``: then every record's
    degree changes, both halves' (atomic adds from both threads were 2-3 times slower: a
    hub's degree moved between the cores at each update). Returns where the two logs end."""
    for i in range(lo, hi):
        # (no array variable chosen per update: numba would count its references, two
        # atomic operations an update)
        if cx < xn and x_idx[cx] == i:
            kind, a, b, el, aux = x_kind[cx], x_a[cx], x_b[cx], x_el[cx], x_aux[cx]
            cx += 1
        else:
            kind, a, b, el, aux = y_kind[cy], y_a[cy], y_b[cy], y_el[cy], y_aux[cy]
            cy += 1
        j = n_out
        n_out += 1
        o_raw[j] = i
        o_op[j] = ops[i]
        o_src[j] = src[i]
        o_dst[j] = dst[i]
        o_a[j] = a
        o_b[j] = b
        o_el[j] = lab[i]
        o_tick[j] = 0
        o_status[j] = _APPLIED
        o_reason[j] = _R_NONE
        if kind == R_INSERT:
            tick += 1
            p_ct[2 * aux] = tick
            p_ct[2 * aux + 1] = tick
            o_tick[j] = tick
        elif kind <= R_LLOG:
            tick += 1
            if kind == R_END:   # (its insertion, in this batch or before, wrote no end)
                p_dt[2 * aux] = tick
                p_dt[2 * aux + 1] = tick
            elif kind == R_DLOG:
                d_a[dl], d_b[dl], d_t[dl] = a, b, tick
                dl += 1
            else:
                l_a[ll], l_b[ll], l_t[ll] = a, b, tick
                ll += 1
            o_el[j] = el
            o_tick[j] = tick
        elif kind == R_IGNORED:
            o_status[j] = _IGNORED
        else:
            o_status[j] = _REJECTED
            o_reason[j] = _R_LOOP if kind == R_LOOP else _R_WILD
    if degrees:
        _degrees(vdeg, x_kind, x_a, x_b, xn)
        _degrees(vdeg, y_kind, y_a, y_b, yn)
    return dl, ll


@nb.njit(cache=True, nogil=True)
def _degrees(vdeg, r_kind, r_a, r_b, n):  # type: ignore[no-untyped-def]
    """Each applied record's change to its ends' degrees."""
    for r in range(n):
        k = r_kind[r]
        d = np.int32(1) if k == R_INSERT else np.int32(-1)
        if k <= R_LLOG:
            vdeg[r_a[r]] += d
            vdeg[r_b[r]] += d


@nb.njit(cache=True, nogil=True)
def _split_point(x_idx, x_kind, xn, y_idx, y_kind, yn, mid, out):  # type: ignore[no-untyped-def]
    """The records of both threads before update ``mid``: into ``out`` their counts
    (count_kinds') and where each thread's records from ``mid`` on begin."""
    cx = np.searchsorted(x_idx[:xn], mid)
    cy = np.searchsorted(y_idx[:yn], mid)
    out[:] = 0
    count_kinds(x_kind, cx, out)
    count_kinds(y_kind, cy, out)
    out[_FIRST_X] = cx
    out[_FIRST_Y] = cy


@nb.njit(cache=True, nogil=True)
def run_half(me, i0, base, ops, src, dst, lab, keys, vals, used, direct, vlabel, rel, logged,
             e_keys, e_vals, h_key, h_val, p_owner, p_key, p_elab, p_ct, p_dt, p_mrg,
             vdeg, o_raw, o_op, o_a, o_b, o_src, o_dst, o_el, o_tick, o_status, o_reason,
             tick, dl, d_a, d_b, d_t, ll, l_a, l_b, l_t, sync,
             x_own, x_pa, x_pb, x_idx, x_kind, x_a, x_b, x_el, x_aux, x_ctr,
             y_own, y_pa, y_pb, y_idx, y_kind, y_a, y_b, y_el, y_aux, y_ctr):  # type: ignore[no-untyped-def]
    """Thread ``me``'s part of a batch: its pairs' updates (``resolve_half``, into x's
    records for thread 0, y's for thread 1), then, once the other thread's are done too
    (``sync``: a counter both add to; each meets the other there, nothing else waits),
    its half of the batch by position (``finish_range``; thread 0 the first and every
    degree). sync[1]: where the batch stops; sync[2] / sync[3]: the two record counts;
    sync[4] / sync[5]: where the two logs end (thread 1's range ends the batch)."""
    if me == 0:
        stop, n = resolve_half(0, i0, base, ops, src, dst, lab, keys, vals, used, direct,
                               vlabel, rel, logged, e_keys, e_vals, h_key, h_val, p_owner,
                               p_key, p_elab, p_dt, p_mrg, x_own, x_pa, x_pb, x_idx, x_kind,
                               x_a, x_b, x_el, x_aux, x_ctr)
    else:
        stop, n = resolve_half(1, i0, base, ops, src, dst, lab, keys, vals, used, direct,
                               vlabel, rel, logged, e_keys, e_vals, h_key, h_val, p_owner,
                               p_key, p_elab, p_dt, p_mrg, y_own, y_pa, y_pb, y_idx, y_kind,
                               y_a, y_b, y_el, y_aux, y_ctr)
    sync[2 + me] = n
    sync[1] = stop
    fetch_add(sync, 0, 1)
    while fetch_add(sync, 0, 0) < 2:
        pass
    xn, yn = sync[2], sync[3]
    mid = i0 + (stop - i0) // 2
    cols = (ops, src, dst, lab, vdeg, o_raw, o_op, o_a, o_b, o_src, o_dst, o_el, o_tick,
            o_status, o_reason, p_ct, p_dt, d_a, d_b, d_t, l_a, l_b, l_t,
            x_idx, x_kind, x_a, x_b, x_el, x_aux, xn, y_idx, y_kind, y_a, y_b, y_el, y_aux, yn)
    if me == 0:
        finish_range(i0, mid, i0, tick, dl, ll, 0, 0, True, *cols)
    else:
        before = np.zeros(_FIRST_Y + 1, np.int64)
        _split_point(x_idx, x_kind, xn, y_idx, y_kind, yn, mid, before)
        sync[4], sync[5] = finish_range(mid, stop, mid, tick + before[_APPLIED_N],
                                        dl + before[_DLOG_N], ll + before[_LLOG_N],
                                        before[_FIRST_X], before[_FIRST_Y], False, *cols)
    return stop


def finish_counts(x: Records, y: Records, sync: npt.NDArray[np.int64],
                  meta: npt.NDArray[np.int64], tick_slot: int, edge_slot: int,
                  e_st: npt.NDArray[np.int64], pst: npt.NDArray[np.int64], count_slot: int,
                  p_mrg: npt.NDArray[np.uint8], dlen: npt.NDArray[np.int64],
                  llen: npt.NDArray[np.int64]) -> None:
    """After both threads' ``run_half``: the graph's counters (an applied update adds or
    drops a pair), the pending store's count (thread 0's room past its insertions flagged
    merged: nothing reads it) and the logs' lengths (where thread 1's finish left them)."""
    adds = int(x.ctr[_ADDS] + y.ctr[_ADDS])
    drops = int(x.ctr[_DROPS] + y.ctr[_DROPS])
    meta[tick_slot] += adds + drops
    meta[edge_slot] += adds - drops
    end_x, base_y = int(x.ctr[_BASE] + x.ctr[_INSERTED]), int(y.ctr[_BASE])
    p_mrg[end_x:base_y] = 1
    pst[count_slot] = base_y + int(y.ctr[_INSERTED])
    dlen[0] = int(sync[4])
    llen[0] = int(sync[5])
    e_st[_ES_COUNT] += adds - drops
    e_st[_ES_TOMBS] += drops - int(x.ctr[_REUSED] + y.ctr[_REUSED])
