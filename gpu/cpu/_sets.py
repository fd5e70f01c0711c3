"""Neighbour-set primitives of the CPU kernels: label ranges, visibility, scans and
intersections, vertex marks and two-hop weights.

A version is sorted by key = (label << 32 | id) and read as of a tick ``k``: an entry
counts iff ``ct < k <= dt`` and its edge label matches. Marks and weights are per-thread
arrays indexed by vertex id, valid where their token is current, so nothing is cleared
between uses.
"""

from __future__ import annotations

import numba as nb
import numpy as np

from .._jit import leaf
from .._types import MAX_QUERY_VERTICES, WILDCARD
from ..graph._kernels import lower_bound
from ..graph._labels import label_range
from ..planning._planner import F_GT, F_LABEL, F_LT, F_NBCNT, F_NBOFF

M = MAX_QUERY_VERTICES

_WILD = WILDCARD
_LOW32 = np.int64(0xFFFFFFFF)
_ONE32 = np.int64(1) << np.int64(32)


@nb.njit(cache=True, nogil=True, inline="always")
def _visible(elab, ct, dt, i, k, el):  # type: ignore[no-untyped-def]
    return ct[i] < k and k <= dt[i] and (el == _WILD or elab[i] == el)


@nb.njit(cache=True, nogil=True, inline="always")
def _seen(key, elab, ct, dt, r, hi, x, k, el):  # type: ignore[no-untyped-def]
    """1 if one of the entries of key x from r on (r its first, below hi) is visible at
    tick k, else 0 (a neighbour has at most one visible entry a tick)."""
    while r < hi and key[r] == x:
        if _visible(elab, ct, dt, r, k, el):
            return 1
        r += 1
    return 0


@leaf
def _narrow(buf, lo, hi, lab):  # type: ignore[no-untyped-def]
    """The part of sorted keys buf[lo:hi] (a set of every label) in label ``lab``."""
    base = np.int64(lab) << np.int64(32)
    lo2 = lower_bound(buf, lo, hi, base)
    return lo2, lower_bound(buf, lo2, hi, base + _ONE32)


@leaf
def _scan(key, elab, ct, dt, lo, hi, k, el, out):  # type: ignore[no-untyped-def]
    n = 0
    for i in range(lo, hi):
        if _visible(elab, ct, dt, i, k, el):
            out[n] = key[i]
            n += 1
    return n


@leaf
def _intersect(src, slo, shi, key, elab, ct, dt, lo, hi, k, el, out):  # type: ignore[no-untyped-def]
    """out[0:n] = src[slo:shi] ∩ visible(key[lo:hi]); out may alias src when slo == 0."""
    w = 0
    ns = shi - slo
    if ns == 0 or hi <= lo:
        return 0
    if ns * 16 < hi - lo:
        p = lo
        for i in range(slo, shi):
            x = src[i]
            p = lower_bound(key, p, hi, x)
            if p >= hi:
                break
            if _seen(key, elab, ct, dt, p, hi, x, k, el):
                out[w] = x
                w += 1
        return w
    # a merge whose unequal steps are arithmetic, not branches: on Enron's lists which
    # side moves is a coin toss a step, and a mispredicted branch costs more than the step
    i, p = slo, lo
    while i < shi and p < hi:
        x, y = src[i], key[p]
        if x == y:
            found = False
            while p < hi and key[p] == x:
                if not found and _visible(elab, ct, dt, p, k, el):
                    found = True
                p += 1
            if found:
                out[w] = x
                w += 1
            i += 1
        else:
            lt = np.int64(x < y)
            i += lt
            p += 1 - lt
    return w


#: tokens a thread hands out before they wrap (marks are int32)
TOKEN_LIMIT = np.int64(np.iinfo(np.int32).max)


@leaf
def _tokens_left(marks, mk, n):  # type: ignore[no-untyped-def]
    """At least ``n`` tokens before they wrap: else every mark and every level's kept
    token is forgotten now, and tokens start again."""
    if mk[3, 0] + n >= TOKEN_LIMIT:
        marks[:, :] = 0
        mk[0, :] = -1
        mk[3, 0] = 0


@leaf
def _next_token(marks, mk):  # type: ignore[no-untyped-def]
    """A mark token no mark carries yet (``_tokens_left``: they may wrap first)."""
    _tokens_left(marks, mk, 1)
    tok = mk[3, 0] + 1
    mk[3, 0] = tok
    return tok


@leaf
def _marked(L, w, lab, el, k, run, seg_off, seg_len, loff, key, elab, ct, dt, marks, mk):  # type: ignore[no-untyped-def]
    """Token with which marks[L] flags w's visible neighbours of label ``lab`` in this run;
    marked only when w (or the run) changed since level L last asked."""
    if mk[0, L] == w and mk[1, L] == run:
        return mk[2, L]
    tok = _next_token(marks, mk)
    row = marks[L]
    a, b = label_range(w, lab, seg_off, seg_len, loff, key)
    t32 = np.int32(tok)
    for i in range(a, b):
        if _visible(elab, ct, dt, i, k, el):
            row[np.int32(key[i] & _LOW32)] = t32
    mk[0, L], mk[1, L], mk[2, L] = w, run, tok
    return tok


@leaf
def _scan_marked(key, elab, ct, dt, lo, hi, k, el, row, tok, out):  # type: ignore[no-untyped-def]
    """out[0:n] = visible key[lo:hi] whose vertex carries mark ``tok`` in ``row``."""
    n = 0
    t32 = np.int32(tok)
    for i in range(lo, hi):
        if row[np.int32(key[i] & _LOW32)] == t32 and _visible(elab, ct, dt, i, k, el):
            out[n] = key[i]
            n += 1
    return n


@leaf
def _weights_root(p, pl, nb_level, last, d):  # type: ignore[no-untyped-def]
    """Index (into the last level's lists) of its one root list when it intersects just a
    root's list and d's, without symmetry masks; else -1 (see ``_weigh``)."""
    off = pl[p, F_NBOFF, last]
    if pl[p, F_NBCNT, last] != 2 or pl[p, F_GT, last] | pl[p, F_LT, last]:
        return -1
    for j in range(2):
        if nb_level[off + j] <= 1 and nb_level[off + 1 - j] == d:
            return j
    return -1


@leaf
def _weigh(L, jr, p, k, f, pl, nb_level, nb_label, seg_off, seg_len, loff, key, elab, ct, dt, wcnt,
           wtok, tok):  # type: ignore[no-untyped-def]
    """Two-hop weights of a run: wcnt[x] (valid where wtok[x] == tok) = |N(root) ∩ N(x)|
    in level L's label, for every x of d's label, by walking N(root) then each
    neighbour's list once. A memoised last level (``_memo_level``) then costs O(1) per
    new f[d] instead of one scan of N(f[d]): built once a run's scans outgrow it."""
    off = pl[p, F_NBOFF, L]
    d = nb_level[off + 1 - jr]
    lab, lab_d = pl[p, F_LABEL, L], pl[p, F_LABEL, d]
    el_r, el_d = nb_label[off + jr], nb_label[off + 1 - jr]
    r = f[nb_level[off + jr]]
    a, b = label_range(r, lab, seg_off, seg_len, loff, key)
    t32 = np.int32(tok)
    for i in range(a, b):
        if not _visible(elab, ct, dt, i, k, el_r):
            continue
        y = np.int32(key[i] & _LOW32)
        ya, yb = label_range(y, lab_d, seg_off, seg_len, loff, key)
        for e in range(ya, yb):
            if _visible(elab, ct, dt, e, k, el_d):
                x = np.int32(key[e] & _LOW32)
                if wtok[x] == t32:
                    wcnt[x] += 1
                else:
                    wtok[x] = t32
                    wcnt[x] = 1


@leaf
def _weigh_cost(L, jr, p, f, pl, nb_level, seg_off, seg_len, loff, key):  # type: ignore[no-untyped-def]
    """An upper bound of ``_weigh``'s entry reads (lengths of the root's neighbours)."""
    off = pl[p, F_NBOFF, L]
    r = f[nb_level[off + jr]]
    a, b = label_range(r, pl[p, F_LABEL, L], seg_off, seg_len, loff, key)
    c = np.int64(0)
    for i in range(a, b):
        c += seg_len[np.int32(key[i] & _LOW32)]
    return c


#: slots of a thread's memo of counted last levels (run_plan): run, vertex, count
MEMO_SLOTS = 1 << 12


class SetBuffers:
    """Each thread's vertex marks (a row a level: rows no plan marks are never touched) and
    two-hop weights (``_weigh``: counts, tokens), with their state (marks: owner, run and
    token a level, [3, 0] the last token; weights: see run_plan, [3] the last token), kept
    from one count to the next. Tokens only grow, so a mark or weight of an earlier count
    is never current: nothing is cleared between counts. (Made by each count, zeroing
    them was O(vertices) a thread a call: 55 us for Enron's 36,692 vertices, the pages
    touched again each time; round 24.) ``fit`` hands out slot arrays for ``nv`` vertex
    slots (0: marks and weights off), made again, larger, when the graph outgrows them."""

    def __init__(self, threads: int) -> None:
        self.threads = threads
        self._off = self._on = self._make(0)   # (_on is made again by the first fit)

    @staticmethod
    def nbytes(threads: int, nv: int) -> int:
        """Bytes of the vertex-indexed buffers ``fit(nv)`` makes for ``threads`` threads
        (the memo and the states beside them are a few pages a thread)."""
        return threads * (nv + nv // 4) * (M + 2) * 4

    def _make(self, cap: int) -> tuple[np.ndarray, ...]:
        t = self.threads
        mk = np.full((t, 4, M), -1, np.int64)
        mk[:, 3, 0] = 0
        # numpy's zeros: fresh pages, each faulted in when a mark first lands there
        return (np.zeros((t, M, cap), np.int32), mk, np.zeros((t, cap), np.int32),
                np.zeros((t, cap), np.int32), np.zeros((t, 4), np.int64),
                np.zeros((t, 3, MEMO_SLOTS), np.int64), np.zeros(t, np.int64))

    def fits(self, nv: int) -> bool:
        return self._on[0].shape[2] >= nv

    def fit(self, nv: int, touch: bool = False) -> tuple[np.ndarray, ...]:
        """(marks, mark state, weight counts, weight tokens, weight state, memo, clock), a
        slot a thread, with room for ``nv`` vertices (nv = 0: none, the kernels' sets off;
        the memo of counted last levels and the runs' clock are there either way: a memo
        entry names its run, and the clock only grows). ``touch``: fault new buffers'
        pages in now rather than at their first marks."""
        if nv == 0:
            return self._off
        if not self.fits(nv):
            self._on = self._make(nv + nv // 4)
            if touch:
                for arr in (self._on[0], self._on[2], self._on[3]):
                    arr.fill(0)
        return self._on


@nb.njit(cache=True, nogil=True, inline="always")
def _slot_state(mk, wst):  # type: ignore[no-untyped-def]
    """A count's start on a thread's kept buffers: no level's marks belong to a vertex or
    run yet (a listing numbers its runs from 1 again, and counts with and without marks
    keep separate clocks), the tokens go on."""
    mk[:3, :] = -1
    wst[:3] = 0
