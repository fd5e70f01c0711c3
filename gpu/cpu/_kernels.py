"""numba kernels of the CPU executor: incremental matching from each updated edge.

One *task* is (update, query); it runs every plan of the query (one per directed query
edge) with the update's endpoints bound at levels 0 and 1, and explores the rest with an
explicit stack (STMatch Fig. 3 on one core). Every neighbour list is read as of the
task's tick ``k``: an entry counts iff ``ct < k <= dt`` (DCSM Property 2), so all
updates of a batch run in parallel against their own graph versions.

Neighbour arrays are sorted by key = (label << 32 | id), so a labelled query vertex
reads one contiguous label range; set intersections merge or gallop by size, or scan
the deeper list against marks of a shallower one that stays put (``_sets``). The
last level is counted, not enumerated, unless matches are listed.
"""

from __future__ import annotations

import os

import numba as nb
import numpy as np

from .._intrinsics import fetch_add
from .._jit import leaf
from .._types import MAX_QUERY_VERTICES, WILDCARD
from ..graph._kernels import lower_bound, make_key
from ..graph._labels import label_range
from ..planning._planner import (
    C_LISTS,
    C_NEVER,
    C_STEADY,
    F_DEGREE,
    F_DEP,
    F_GT,
    F_LABEL,
    F_LT,
    F_MISC,
    F_NBCNT,
    F_NBOFF,
    F_NLFCNT,
    F_NLFOFF,
    F_REUSE,
    F_VERTEX,
)
from ._sets import (
    _LOW32,
    _ONE32,
    MEMO_SLOTS,
    _intersect,
    _marked,
    _narrow,
    _next_token,
    _scan,
    _scan_marked,
    _seen,
    _slot_state,
    _tokens_left,
    _visible,
    _weigh,
    _weigh_cost,
    _weights_root,
)

# OpenMP's workers (numba's usual threading layer) spin for milliseconds after each
# parallel region by default: on a 2-core machine that took a core from the updater and
# the merge thread (21% of a one-batch Enron run's samples; design round 14). Passive, they
# sleep; a small batch's count stays on the calling thread (CpuExecutor._count). Read when
# the layer starts, at the first parallel call: after this module is imported.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

M = MAX_QUERY_VERTICES

_WILD = WILDCARD


@leaf
def _prepare(L, p, k, f, pl, nb_level, nb_label, seg_off, seg_len, loff, vlabel, key, elab, ct, dt,
             raw, rrow, rlo, rhi, ilo, ihi, ranges, run, marks, mk):  # type: ignore[no-untyped-def]
    """Candidates of level L into raw[rrow[L], rlo[L]:rhi[L]]; iteration bounds ilo/ihi.

    Two lists, the shallower one stays put while the deeper level loops: its vertices are
    marked once (``_marked``) and the deeper list is scanned against the marks, O(|deep|)
    per candidate set instead of a merge's O(|shallow| + |deep|). ``marks`` with no
    columns turns this off (the estimator)."""
    lab = pl[p, F_LABEL, L]
    src = pl[p, F_REUSE, L]
    off = pl[p, F_NBOFF, L]
    cnt = pl[p, F_NBCNT, L]
    out = raw[L]
    done = False
    # marks pay only when the deeper list's level loops under the shallow one (>= 2): two
    # root lists are intersected once per run, where a merge reads the same entries
    if src < 0 and cnt == 2 and marks.shape[1] > 0 and max(nb_level[off], nb_level[off + 1]) >= 2:
        jo = 0 if nb_level[off] < nb_level[off + 1] else 1
        wo, wi = f[nb_level[off + jo]], f[nb_level[off + 1 - jo]]
        a, b = label_range(wi, lab, seg_off, seg_len, loff, key)
        if b - a <= 16 * seg_len[wo]:   # else galloping the shallow list wins (below)
            tok = _marked(L, wo, lab, nb_label[off + jo], k, run, seg_off, seg_len, loff, key, elab,
                          ct, dt, marks, mk)
            n = _scan_marked(key, elab, ct, dt, a, b, k, nb_label[off + 1 - jo], marks[L],
                             tok, out)
            rrow[L], rlo[L], rhi[L] = L, 0, n
            done = True
    if done:
        pass
    elif src >= 0:
        row = rrow[src]
        lo, hi = rlo[src], rhi[src]
        if lab != _WILD and pl[p, F_LABEL, src] == _WILD:
            lo, hi = _narrow(raw[row], lo, hi, lab)
        if cnt == 0:
            rrow[L], rlo[L], rhi[L] = row, lo, hi
        else:
            n = hi - lo
            for j in range(cnt):
                w = f[nb_level[off + j]]
                a, b = label_range(w, lab, seg_off, seg_len, loff, key)
                if j == 0:
                    n = _intersect(raw[row], lo, hi, key, elab, ct, dt, a, b, k,
                                   nb_label[off + j], out)
                else:
                    n = _intersect(out, 0, n, key, elab, ct, dt, a, b, k,
                                   nb_label[off + j], out)
                if n == 0:
                    break
            rrow[L], rlo[L], rhi[L] = L, 0, n
    else:
        best = 0
        for j in range(cnt):
            w = f[nb_level[off + j]]
            a, b = label_range(w, lab, seg_off, seg_len, loff, key)
            ranges[j, 0], ranges[j, 1] = a, b
            if b - a < ranges[best, 1] - ranges[best, 0]:
                best = j
        n = _scan(key, elab, ct, dt, ranges[best, 0], ranges[best, 1], k,
                  nb_label[off + best], out)
        for j in range(cnt):
            if j != best and n > 0:
                n = _intersect(out, 0, n, key, elab, ct, dt, ranges[j, 0], ranges[j, 1], k,
                               nb_label[off + j], out)
        rrow[L], rlo[L], rhi[L] = L, 0, n
    # symmetry conditions narrow a labelled level to one key interval
    lo, hi = rlo[L], rhi[L]
    if lab != _WILD and hi > lo:
        buf = raw[rrow[L]]
        gm = pl[p, F_GT, L]
        lm = pl[p, F_LT, L]
        lb = np.int64(lab) << np.int64(32)
        for j in range(L):
            if (gm >> j) & 1:
                lo = max(lo, lower_bound(buf, lo, hi, lb | np.int64(f[j]) + 1))
            if (lm >> j) & 1:
                hi = min(hi, lower_bound(buf, lo, hi, lb | np.int64(f[j])))
        if hi < lo:
            hi = lo
    ilo[L], ihi[L] = lo, hi


@leaf
def _label_filter(x, L, p, pl, side_a, side_b, seg_off, seg_len, loff, key):  # type: ignore[no-untyped-def]
    """Degree and neighbour-label counts of x can cover query level L's needs.

    Version lengths include not-yet-reclaimed entries, so they are upper bounds: the
    filter may keep a vertex that fails later, never drop one that matches.
    """
    if seg_len[x] < pl[p, F_DEGREE, L]:
        return False
    off = pl[p, F_NLFOFF, L]
    for j in range(pl[p, F_NLFCNT, L]):
        lo, hi = label_range(x, side_a[off + j], seg_off, seg_len, loff, key)
        if hi - lo < side_b[off + j]:
            return False
    return True


@nb.njit(cache=True, nogil=True, inline="always")
def _root_fits(a, b, el, p, pl, vlabel, seg_len):  # type: ignore[no-untyped-def]
    """The cheap checks of root (a, b) for plan p: end labels, root edge label, degree
    bounds, level-1 symmetry condition (no neighbour array is read)."""
    l0, l1, rl = pl[p, F_LABEL, 0], pl[p, F_LABEL, 1], pl[p, F_MISC, 1]
    # bitwise, no short-circuit: branch-free, 8x faster over a batch's pairs than `and`
    ok = (l0 == _WILD) | (l0 == vlabel[a])
    ok &= (l1 == _WILD) | (l1 == vlabel[b])
    ok &= (rl == _WILD) | (rl == el)
    ok &= (seg_len[a] >= pl[p, F_DEGREE, 0]) & (seg_len[b] >= pl[p, F_DEGREE, 1])
    ok &= ((pl[p, F_GT, 1] & 1) == 0) | (b > a)
    ok &= ((pl[p, F_LT, 1] & 1) == 0) | (b < a)
    return ok


@leaf
def root_ok(a, b, el, p, pl, nb_level, nb_label, seg_off, seg_len, loff, vlabel, key):  # type: ignore[no-untyped-def]
    """Every check of root (a, b) for plan p before any level is extended: the cheap
    ones and both ends' neighbour-label filters (shared by the kernel and the estimator)."""
    return (_root_fits(a, b, el, p, pl, vlabel, seg_len)
            and _label_filter(a, 0, p, pl, nb_level, nb_label, seg_off, seg_len, loff, key)
            and _label_filter(b, 1, p, pl, nb_level, nb_label, seg_off, seg_len, loff, key))


@nb.njit(cache=True, nogil=True, inline="always")
def _valid(x, L, upto, p, f, pl):  # type: ignore[no-untyped-def]
    """x differs from f[0:upto] and meets level L's symmetry masks (they name levels < upto)."""
    for j in range(upto):
        if f[j] == x:
            return False
    gm = pl[p, F_GT, L]
    lm = pl[p, F_LT, L]
    if gm | lm:
        for j in range(upto):
            if (gm >> j) & 1 and x <= f[j]:
                return False
            if (lm >> j) & 1 and x >= f[j]:
                return False
    return True


@leaf
def _count_level(L, upto, p, f, pl, vlabel, raw, rrow, ilo, ihi):  # type: ignore[no-untyped-def]
    """Candidates of level L that differ from f[0:upto] and meet L's symmetry masks."""
    buf = raw[rrow[L]]
    lo, hi = ilo[L], ihi[L]
    lab = pl[p, F_LABEL, L]
    if lab != _WILD:
        # one label range with the masks already applied as key bounds
        c = hi - lo
        for j in range(upto):
            if vlabel[f[j]] == lab:
                kk = make_key(lab, f[j])
                q = lower_bound(buf, lo, hi, kk)
                if q < hi and buf[q] == kk:
                    c -= 1
        return c
    c = 0
    for i in range(lo, hi):
        if _valid(np.int32(buf[i] & _LOW32), L, upto, p, f, pl):
            c += 1
    return c


@leaf
def _memo_level(p, pl, nb_level, n):  # type: ignore[no-untyped-def]
    """The one non-root level d the last level's candidates depend on, or -1.

    When the last level is labelled, intersects the lists of the roots and of d only
    (no reused set) and its masks name only those levels, its count less the roots is a
    function of f[d] alone for the whole run: hubs come back as f[d] under many prefixes
    (a 5-cycle's middle vertex), and each comes back to a memo, not an intersection.
    """
    last = n - 1
    if last < 3 or pl[p, F_LABEL, last] == _WILD or pl[p, F_REUSE, last] >= 0:
        return -1
    d = -1
    off = pl[p, F_NBOFF, last]
    for j in range(pl[p, F_NBCNT, last]):
        lvl = nb_level[off + j]
        if lvl >= 2:
            if d >= 0:
                return -1
            d = lvl
    if d < 0:
        return -1
    other = (pl[p, F_GT, last] | pl[p, F_LT, last]) & ~(3 | (1 << d))
    return -1 if other else d


@leaf
def _member(x, L, p, k, f, pl, nb_level, nb_label, seg_off, seg_len, loff, key, elab, ct, dt,
            lists):  # type: ignore[no-untyped-def]
    """x (of level L's label) is a candidate of level L under f: adjacent to every
    intersected level at tick k (of those whose bit is set in ``lists``: the others are
    known to hold x), within the masks."""
    lab = pl[p, F_LABEL, L]
    kx = make_key(lab, x)
    off = pl[p, F_NBOFF, L]
    for j in range(pl[p, F_NBCNT, L]):
        if not (lists >> j) & 1:
            continue
        w = f[nb_level[off + j]]
        lo, hi = label_range(w, lab, seg_off, seg_len, loff, key)
        if not _seen(key, elab, ct, dt, lower_bound(key, lo, hi, kx), hi, kx, k,
                     nb_label[off + j]):
            return False
    gm = pl[p, F_GT, L]
    lm = pl[p, F_LT, L]
    for j in range(L):
        if ((gm >> j) & 1 and x <= f[j]) or ((lm >> j) & 1 and x >= f[j]):
            return False
    return True


@leaf
def _collides(j, L, p, k, f, pl, nb_level, nb_label, seg_off, seg_len, loff, key, elab, ct, dt,
              stamp):  # type: ignore[no-untyped-def]
    """1 if the vertex bound at level j (of the last level L's label) is one of L's
    candidates, else 0: the lists the plan's collision word (``collisions``) leaves to
    search, once per binding of f[j] where the word says the answer stays (stamp rows 3
    and 4: when it was found, and what). A 5-cycle's last level asked this of the same
    f[j] under every f[d], two binary searches each: 31% of Enron q5's samples."""
    word = pl[p, F_MISC, 1 + j]
    if word & C_NEVER:
        return 0
    steady = (word & C_STEADY) != 0
    if steady and stamp[3, j] == stamp[1, j]:
        return stamp[4, j]
    r = 1 if _member(f[j], L, p, k, f, pl, nb_level, nb_label, seg_off, seg_len, loff, key,
                     elab, ct, dt, word & C_LISTS) else 0
    if steady:
        stamp[3, j], stamp[4, j] = stamp[1, j], r
    return r


@leaf
def _is_triangle(p, pl, nb_level):  # type: ignore[no-untyped-def]
    """Plan p has three levels and its last intersects the lists of both roots, in one
    label, reusing no set (``count_triangle`` counts it)."""
    off = pl[p, F_NBOFF, 2]
    return (pl[p, F_MISC, 0] == 3 and pl[p, F_REUSE, 2] < 0 and pl[p, F_NBCNT, 2] == 2
            and pl[p, F_LABEL, 2] != _WILD and nb_level[off] + nb_level[off + 1] == 1)


@leaf
def count_triangle(a, b, k, p, pl, nb_level, nb_label, seg_off, seg_len, loff, vlabel, key,
                   elab, ct, dt):  # type: ignore[no-untyped-def]
    """``run_plan``'s count of a plan for which ``_is_triangle`` holds: the two roots'
    label ranges, narrowed by the last level's symmetry masks, intersected and counted as
    they are read. No candidate buffer, no stack: on the Enron triangle a unit cost
    ``run_plan`` and ``_prepare`` more than its intersection. Neither root can be a
    candidate (no vertex is its own neighbour), and at one tick a neighbour has at most
    one visible entry. No ``root_ok``: a unit's root passed ``live_pairs`` (end labels,
    root edge label, level-1 symmetry), and the label filters and the degree bound only
    prune what an empty label range below prunes from the same loads (Enron q0: the
    second test was 5% of a run)."""
    lab = pl[p, F_LABEL, 2]
    off = pl[p, F_NBOFF, 2]
    j0 = 0 if nb_level[off] == 0 else 1   # the list of root a
    lo0, hi0 = label_range(a, lab, seg_off, seg_len, loff, key)
    lo1, hi1 = label_range(b, lab, seg_off, seg_len, loff, key)
    el0, el1 = nb_label[off + j0], nb_label[off + 1 - j0]
    base = np.int64(lab) << np.int64(32)
    least, bound = base, base + _ONE32   # candidate keys in [least, bound)
    gm, lm = pl[p, F_GT, 2], pl[p, F_LT, 2]
    for j in range(2):
        kj = base | np.int64(a if j == 0 else b)
        if (gm >> j) & 1:
            least = max(least, kj + 1)
        if (lm >> j) & 1:
            bound = min(bound, kj)
    if least > base:
        lo0 = lower_bound(key, lo0, hi0, least)
        lo1 = lower_bound(key, lo1, hi1, least)
    if bound < base + _ONE32:
        hi0 = lower_bound(key, lo0, hi0, bound)
        hi1 = lower_bound(key, lo1, hi1, bound)
    if hi1 - lo1 < hi0 - lo0:   # read the shorter list, find its keys in the longer
        lo0, hi0, lo1, hi1, el0, el1 = lo1, hi1, lo0, hi0, el1, el0
    if hi0 <= lo0 or hi1 <= lo1:
        return 0
    gallop = (hi0 - lo0) * 16 < hi1 - lo1
    c = 0
    q = lo1
    for i in range(lo0, hi0):
        if not _visible(elab, ct, dt, i, k, el0):
            continue
        x = key[i]
        if gallop:
            q = lower_bound(key, q, hi1, x)
        else:
            while q < hi1 and key[q] < x:
                q += 1
        if q >= hi1:
            break
        c += _seen(key, elab, ct, dt, q, hi1, x, k, el1)
    return c


@leaf
def _fused_level(p, pl, nb_level, last, listing, memo_d, nmarks):  # type: ignore[no-untyped-def]
    """How ``_count_tail`` may count the last two levels in one loop, as (kind, j0, j1);
    kind 0: it may not. The last level is labelled and intersects f[last - 1]'s list with
    a set that stays put while f[last - 1] moves: kind 1, the list of f[j0] (j0 < last - 1);
    kind 2, the set level j0 made, which the last level reuses (a 4-clique's last level
    when its label is level 2's); kind 3, the lists of f[j0] and f[j1] (a 4-clique's last
    level otherwise). Matches are counted, not listed; no memo is kept on f[last - 1] (it
    pays from depth 3 on); at most three vertices are bound above the last two levels
    (``_count_tail``'s exclusions)."""
    if listing or last < 3 or last > 4 or nmarks == 0 or pl[p, F_LABEL, last] == _WILD:
        return 0, 0, 0
    if memo_d >= 3:
        return 0, 0, 0
    off, cnt, src = pl[p, F_NBOFF, last], pl[p, F_NBCNT, last], pl[p, F_REUSE, last]
    deep, j0, j1, others = 0, -1, -1, 0
    for i in range(cnt):
        lv = nb_level[off + i]
        if lv == last - 1:
            deep += 1
        elif j0 < 0:
            j0, others = lv, 1
        else:
            j1, others = lv, others + 1
    if deep != 1:
        return 0, 0, 0
    if src >= 0:
        return (2, src, 0) if others == 0 else (0, 0, 0)
    if others == 1:
        return 1, j0, 0
    return (3, j0, j1) if others == 2 else (0, 0, 0)


@leaf
def _tail_marks(L, kind, j0, j1, p, k, f, pl, nb_level, nb_label, seg_off, seg_len, loff, key,
                elab, ct, dt, raw, rrow, rlo, rhi, run, marks, mk):  # type: ignore[no-untyped-def]
    """The token with which marks[L + 1] flags the set ``_count_tail`` intersects each
    candidate's list with (``_fused_level``'s kinds): f[j0]'s list as ``_marked`` keeps it;
    of those, the ones also in f[j1]'s list (kind 3), or level j0's set (kind 2), under a
    new token (level L + 1's kept marks are then forgotten: they changed)."""
    last = L + 1
    lab = pl[p, F_LABEL, last]
    off = pl[p, F_NBOFF, last]
    _tokens_left(marks, mk, 2)   # tokens wrap now, not between the two below
    row = marks[last]
    if kind == 2:
        tok = _next_token(marks, mk)
        mk[0, last] = -1
        buf = raw[rrow[j0]]
        lo, hi = rlo[j0], rhi[j0]
        if pl[p, F_LABEL, j0] == _WILD:   # the set holds every label: the last level's range
            lo, hi = _narrow(buf, lo, hi, lab)
        t32 = np.int32(tok)
        for e in range(lo, hi):
            row[np.int32(buf[e] & _LOW32)] = t32
        return tok
    i0, i1 = 0, 0
    for i in range(pl[p, F_NBCNT, last]):
        if nb_level[off + i] == j0:
            i0 = i
        elif nb_level[off + i] == j1:
            i1 = i
    tok = _marked(last, f[j0], lab, nb_label[off + i0], k, run, seg_off, seg_len, loff, key,
                  elab, ct, dt, marks, mk)
    if kind == 3:
        t1 = np.int32(tok)
        tok = _next_token(marks, mk)
        mk[0, last] = -1
        t2 = np.int32(tok)
        a, b = label_range(f[j1], lab, seg_off, seg_len, loff, key)
        el = nb_label[off + i1]
        for e in range(a, b):
            y = np.int32(key[e] & _LOW32)
            if row[y] == t1 and _visible(elab, ct, dt, e, k, el):
                row[y] = t2
    return tok


@leaf
def _count_tail(L, kind, j0, j1, p, k, f, pl, nb_level, nb_label, seg_off, seg_len, loff, vlabel,
                key, elab, ct, dt, raw, rrow, rlo, rhi, buf, lo, hi, run, marks, mk):  # type: ignore[no-untyped-def]
    """Matches of level L's candidates buf[lo:hi] (L = last - 1) times their last-level
    candidates, counted in one loop: the set the last level intersects each candidate's
    list with is marked once (``_tail_marks``), and each candidate x of L that passes its
    own checks adds the visible entries of x's list, in the last level's label, that carry
    the mark, lie within the last level's masks and name no vertex already bound (a set
    of kind 2 much shorter than x's list is searched in it instead). No buffer, stack or
    memo between: the paw's tail plan (Enron q4) spent most of its time in that
    machinery, one candidate at a time."""
    last = L + 1
    lab = pl[p, F_LABEL, last]
    off = pl[p, F_NBOFF, last]
    tok = _tail_marks(L, kind, j0, j1, p, k, f, pl, nb_level, nb_label, seg_off, seg_len, loff,
                      key, elab, ct, dt, raw, rrow, rlo, rhi, run, marks, mk)
    row = marks[last]
    t32 = np.int32(tok)
    el = _WILD
    for i in range(pl[p, F_NBCNT, last]):
        if nb_level[off + i] == L:
            el = nb_label[off + i]
    sbuf = raw[rrow[j0]] if kind == 2 else buf   # a kind-2 set, searched in long lists
    s_lo, s_hi = (rlo[j0], rhi[j0]) if kind == 2 else (0, 0)
    base = np.int64(lab) << np.int64(32)
    least, bound = base, base + _ONE32   # masks on levels above L: one key interval
    gm, lm = pl[p, F_GT, last], pl[p, F_LT, last]
    for i in range(L):
        ki = base | np.int64(f[i])
        if (gm >> i) & 1:
            least = max(least, ki + 1)
        if (lm >> i) & 1:
            bound = min(bound, ki)
    gt_x, lt_x = (gm >> L) & 1, (lm >> L) & 1
    # bound vertices of the last level's label: no candidate may name them
    e0, e1, e2 = np.int32(-1), np.int32(-1), np.int32(-1)
    for i in range(L):
        if vlabel[f[i]] == lab:
            if e0 < 0:
                e0 = f[i]
            elif e1 < 0:
                e1 = f[i]
            else:
                e2 = f[i]
    total = 0
    for q in range(lo, hi):
        x = np.int32(buf[q] & _LOW32)
        if not (_valid(x, L, L, p, f, pl) and _label_filter(
                x, L, p, pl, nb_level, nb_label, seg_off, seg_len, loff, key)):
            continue
        kx = base | np.int64(x)
        a0, b0 = least, bound
        if gt_x:
            a0 = max(a0, kx + 1)
        if lt_x:
            b0 = min(b0, kx)
        a, b = label_range(x, lab, seg_off, seg_len, loff, key)
        c = 0
        if kind == 2 and (s_hi - s_lo) * 16 < b - a:   # a short set: its keys looked up
            g = a
            for e in range(s_lo, s_hi):
                kk = sbuf[e]
                y = np.int32(kk & _LOW32)
                if kk < a0 or kk >= b0 or y == e0 or y == e1 or y == e2:
                    continue
                g = lower_bound(key, g, b, kk)
                if g >= b:
                    break
                c += _seen(key, elab, ct, dt, g, b, kk, k, el)
            total += c
            continue
        for i in range(a, b):
            kk = key[i]
            y = np.int32(kk & _LOW32)
            ok = (row[y] == t32) & (ct[i] < k) & (k <= dt[i]) & (kk >= a0) & (kk < b0)
            ok &= (y != e0) & (y != e1) & (y != e2)
            if el != _WILD:
                ok &= elab[i] == el
            c += np.int64(ok)
        total += c
    return total


@leaf
def run_plan(a, b, el, k, p, pl, nb_level, nb_label, seg_off, seg_len, loff, vlabel, key, elab, ct,
             dt, raw, f, pos, rrow, rlo, rhi, ilo, ihi, ranges, stamp, memo, marks, mk, wcnt,
             wtok, wst, out, out_row, cap):  # type: ignore[no-untyped-def]
    """Matches of plan p with f(level 0)=a, f(level 1)=b at tick k.

    With ``cap`` < 0 only counts; otherwise writes up to ``cap`` tuples (query-vertex
    order) into ``out`` from row ``out_row`` and returns how many it wrote.
    ``stamp`` holds a clock (row 0), when each f[L] was set (row 1) and when each level's
    candidates were computed (row 2): a level is recomputed only if the level it depends
    on moved since; rows 3 and 4 keep ``_collides``' answers.
    """
    n = pl[p, F_MISC, 0]
    if not root_ok(a, b, el, p, pl, nb_level, nb_label, seg_off, seg_len, loff, vlabel, key):
        return 0
    f[0] = a
    f[1] = b
    listing = cap >= 0
    if n == 2:
        if listing and cap > 0:
            out[out_row, pl[p, F_VERTEX, 0]] = a
            out[out_row, pl[p, F_VERTEX, 1]] = b
            return 1
        return 0 if listing else 1
    clock = stamp[0, 0] + 1
    stamp[1, 0] = clock
    stamp[1, 1] = clock
    for L in range(2, n):
        stamp[2, L] = 0
    total = 0
    last = n - 1
    # two independent tail levels: count |valid(last-1)| x |valid(last)| minus overlaps
    pair_tail = (not listing) and last >= 3 and pl[p, F_DEP, last] < last - 1
    memo_d = -1 if listing or pair_tail else _memo_level(p, pl, nb_level, n)
    # weights pay off when f[d] ranges over a frontier two or more hops from the roots
    # (d >= 3: a 5-cycle); at d = 2 its values are one root's neighbours, and their scans
    # cost about what the weights would (a 4-cycle: measured 1.5x slower with them)
    jr = _weights_root(p, pl, nb_level, last, memo_d) if memo_d >= 3 and len(wcnt) else -1
    fk, fj0, fj1 = _fused_level(p, pl, nb_level, last, listing, memo_d, marks.shape[1])
    run = clock
    # two-hop weights of this run: [token (0: not built), spent scans, their bound (-1),
    # last token handed out (kept across runs)]
    wst[0], wst[1], wst[2] = 0, 0, -1
    mlab = pl[p, F_LABEL, last]
    L = 2
    while L >= 2:
        if L == last and memo_d >= 0:
            x = f[memo_d]
            h = x & (MEMO_SLOTS - 1)
            if memo[0, h] == run and memo[1, h] == x:
                c = memo[2, h]
            elif wst[0] > 0:
                c = wcnt[x] if wtok[x] == wst[0] else 0
                for j in range(2):   # the roots among the candidates
                    if vlabel[f[j]] == mlab and _member(f[j], L, p, k, f, pl, nb_level,
                                                        nb_label, seg_off, seg_len, loff, key,
                                                        elab, ct, dt, C_LISTS):
                        c -= 1
                memo[0, h], memo[1, h], memo[2, h] = run, x, c
            else:
                if jr >= 0:   # build the weights once this run's scans cost a quarter of that
                    if wst[2] < 0:
                        wst[2] = _weigh_cost(L, jr, p, f, pl, nb_level, seg_off, seg_len, loff, key)
                    wst[1] += seg_len[x]
                    if 4 * wst[1] > wst[2]:
                        wst[3] += 1
                        if wst[3] >= np.int64(np.iinfo(np.int32).max):
                            wtok[:] = 0
                            wst[3] = 1
                        wst[0] = wst[3]
                        _weigh(L, jr, p, k, f, pl, nb_level, nb_label, seg_off, seg_len, loff, key,
                               elab, ct, dt, wcnt, wtok, wst[0])
                        continue   # read the weights
                if stamp[2, L] <= stamp[1, pl[p, F_DEP, L]]:
                    clock += 1
                    stamp[2, L] = clock
                    _prepare(L, p, k, f, pl, nb_level, nb_label, seg_off, seg_len, loff, vlabel,
                             key, elab, ct, dt, raw, rrow, rlo, rhi, ilo, ihi, ranges, run,
                             marks, mk)
                c = _count_level(L, 2, p, f, pl, vlabel, raw, rrow, ilo, ihi)
                memo[0, h], memo[1, h], memo[2, h] = run, x, c
            for j in range(2, L):   # the other bound vertices that may be candidates
                if j != memo_d and vlabel[f[j]] == mlab:
                    c -= _collides(j, L, p, k, f, pl, nb_level, nb_label, seg_off, seg_len,
                                   loff, key, elab, ct, dt, stamp)
            total += c
            L -= 1
            continue
        if stamp[2, L] <= stamp[1, pl[p, F_DEP, L]]:
            clock += 1
            stamp[2, L] = clock
            _prepare(L, p, k, f, pl, nb_level, nb_label, seg_off, seg_len, loff, vlabel, key, elab,
                     ct, dt, raw, rrow, rlo, rhi, ilo, ihi, ranges, run, marks, mk)
            pos[L] = ilo[L]
        buf = raw[rrow[L]]
        if fk and L == last - 1:
            total += _count_tail(L, fk, fj0, fj1, p, k, f, pl, nb_level, nb_label, seg_off,
                                 seg_len, loff, vlabel, key, elab, ct, dt, raw, rrow, rlo, rhi,
                                 buf, pos[L], ihi[L], run, marks, mk)
            pos[L] = ihi[L]
            L -= 1
            continue
        if L == last:
            if listing:
                for i in range(ilo[L], ihi[L]):
                    x = np.int32(buf[i] & _LOW32)
                    if _valid(x, L, L, p, f, pl):
                        if total >= cap:
                            stamp[0, 0] = clock
                            return total
                        r = out_row + total
                        for j in range(L):
                            out[r, pl[p, F_VERTEX, j]] = f[j]
                        out[r, pl[p, F_VERTEX, L]] = x
                        total += 1
            else:
                total += _count_level(L, L, p, f, pl, vlabel, raw, rrow, ilo, ihi)
            L -= 1
            continue
        if pair_tail and L == last - 1:
            if stamp[2, last] <= stamp[1, pl[p, F_DEP, last]]:
                clock += 1
                stamp[2, last] = clock
                _prepare(last, p, k, f, pl, nb_level, nb_label, seg_off, seg_len, loff, vlabel, key,
                         elab, ct, dt, raw, rrow, rlo, rhi, ilo, ihi, ranges, run, marks, mk)
            base = _count_level(last, L, p, f, pl, vlabel, raw, rrow, ilo, ihi)
            lab_l, lab_t = pl[p, F_LABEL, L], pl[p, F_LABEL, last]
            if base > 0 and lab_l != _WILD and lab_t != _WILD and lab_l != lab_t:
                # different labels never collide: |valid(L)| x |valid(last)|, no scan. L's
                # query neighbours are all placed (last is not one), so the degree filter
                # of the scan below holds for every candidate already
                total += base * _count_level(L, L, p, f, pl, vlabel, raw, rrow, ilo, ihi)
            elif base > 0:
                tb = raw[rrow[last]]
                tlo, thi = ilo[last], ihi[last]
                tlab = pl[p, F_LABEL, last]
                q = tlo
                for i in range(ilo[L], ihi[L]):
                    kx = buf[i]
                    x = np.int32(kx & _LOW32)
                    if not _valid(x, L, L, p, f, pl) or seg_len[x] < pl[p, F_DEGREE, L]:
                        continue
                    # x also counted in base (labelled levels carry their masks as bounds)
                    q = lower_bound(tb, q, thi, kx)
                    if q < thi and tb[q] == kx and (tlab != _WILD
                                                    or _valid(x, last, L, p, f, pl)):
                        total += base - 1
                    else:
                        total += base
            L -= 1
            continue
        moved = False
        while pos[L] < ihi[L]:
            x = np.int32(buf[pos[L]] & _LOW32)
            pos[L] += 1
            if _valid(x, L, L, p, f, pl) and _label_filter(
                    x, L, p, pl, nb_level, nb_label, seg_off, seg_len, loff, key):
                f[L] = x
                clock += 1
                stamp[1, L] = clock
                moved = True
                break
        if not moved:
            L -= 1
            continue
        L += 1
        if stamp[2, L] > stamp[1, pl[p, F_DEP, L]]:
            pos[L] = ilo[L]
    stamp[0, 0] = clock
    return total


@nb.njit(cache=True, nogil=True)
def plans_use_sets(pl, nb_level):  # type: ignore[no-untyped-def]
    """Some row of ``pl`` may read the per-thread vertex marks (``_prepare``: two lists of
    which the deeper loops under the shallower; ``_count_tail``'s sets), or two-hop
    weights (``run_plan``: a memoised last level at depth 3 or more). Else the kernels
    need no buffers of a slot per vertex, which cost a call two zeroed arrays of the
    graph's size per thread."""
    for p in range(pl.shape[0]):
        n = pl[p, F_MISC, 0]
        if _fused_level(p, pl, nb_level, n - 1, False, _memo_level(p, pl, nb_level, n), 1)[0]:
            return True
        for L in range(2, n):
            off = pl[p, F_NBOFF, L]
            if (pl[p, F_REUSE, L] < 0 and pl[p, F_NBCNT, L] == 2
                    and max(nb_level[off], nb_level[off + 1]) >= 2):
                return True
        d = _memo_level(p, pl, nb_level, n)
        if d >= 3 and _weights_root(p, pl, nb_level, n - 1, d) >= 0:
            return True
    return False


@nb.njit(cache=True, nogil=True)
def live_pairs(t_a, t_b, t_el, t_plo, t_phi, only, pl, vlabel, seg_len):  # type: ignore[no-untyped-def]
    """(task, plan) pairs whose root passes the cheap root checks (``_root_fits``; the
    label filters, which read arrays, stay in the kernels), tasks in order; ``only``
    (empty: every task) selects tasks; ``seg_len`` empty: no degree bound (the kernels
    test it too). The plans' root fields are copied to one small table first, and the end
    labels, which reject most pairs of a labelled query, are tested before the rest
    (Enron q0, 55k pairs: 0.18 -> 0.09 ms)."""
    npl = pl.shape[0]
    rf = np.empty((npl, 7), np.int32)
    for p in range(npl):
        rf[p, 0], rf[p, 1], rf[p, 2] = pl[p, F_LABEL, 0], pl[p, F_LABEL, 1], pl[p, F_MISC, 1]
        rf[p, 3], rf[p, 4] = pl[p, F_DEGREE, 0], pl[p, F_DEGREE, 1]
        rf[p, 5], rf[p, 6] = pl[p, F_GT, 1] & 1, pl[p, F_LT, 1] & 1
    total = 0
    for i in range(len(t_a)):
        total += t_phi[i] - t_plo[i]
    owner = np.empty(total, np.int64)
    plan = np.empty(total, np.int64)
    m = 0
    degrees = len(seg_len) > 0
    for i in range(len(t_a)):
        if len(only) and not only[i]:
            continue
        a, b = t_a[i], t_b[i]
        la, lb = vlabel[a], vlabel[b]
        for p in range(t_plo[i], t_phi[i]):
            if not (((rf[p, 0] == _WILD) | (rf[p, 0] == la))
                    & ((rf[p, 1] == _WILD) | (rf[p, 1] == lb))):
                continue
            ok = (rf[p, 2] == _WILD) | (rf[p, 2] == t_el[i])
            if degrees:
                ok &= (seg_len[a] >= rf[p, 3]) & (seg_len[b] >= rf[p, 4])
            ok &= (rf[p, 5] == 0) | (b > a)
            ok &= (rf[p, 6] == 0) | (b < a)
            if ok:
                owner[m] = i
                plan[m] = p
                m += 1
    return owner[:m], plan[:m]


@nb.njit(cache=True, nogil=True, inline="always")
def _buffers(maxlen):  # type: ignore[no-untyped-def]
    return (np.empty((M, maxlen + 1), np.int64), np.zeros(M, np.int32), np.zeros(M, np.int64),
            np.zeros(M, np.int64), np.zeros(M, np.int64), np.zeros(M, np.int64),
            np.zeros(M, np.int64), np.zeros(M, np.int64), np.zeros((M, 2), np.int64),
            np.zeros((5, M), np.int64))


@nb.njit(cache=True, nogil=True, inline="always")
def _cheaper_side(a, b, p, pl, nb_level, seg_off, seg_len, loff, key):  # type: ignore[no-untyped-def]
    """p or its mirror (``Plan.mirror``), whichever grows level 2 from the shorter label
    range of its root (a 4-cycle from the root with fewer candidates)."""
    m = pl[p, F_MISC, 2]
    if m == 0:
        return p
    ra = a if nb_level[pl[p, F_NBOFF, 2]] == 0 else b
    rb = a if nb_level[pl[m, F_NBOFF, 2]] == 0 else b
    lo, hi = label_range(ra, pl[p, F_LABEL, 2], seg_off, seg_len, loff, key)
    lo2, hi2 = label_range(rb, pl[m, F_LABEL, 2], seg_off, seg_len, loff, key)
    return m if hi2 - lo2 < hi - lo else p


@leaf
def _count_share(nxt, counts, t_a, t_b, t_el, t_k, t_plo, t_phi, order, pl, nb_level, nb_label,
                 seg_off, seg_len, loff, vlabel, key, elab, ct, dt, raw, f, pos, rrow, rlo, rhi,
                 ilo, ihi, ranges, stamp, memo, marks, mk, wcnt, wtok, wst, dummy):  # type: ignore[no-untyped-def]
    """One thread's share of ``count_tasks``: the next task in ``order`` until none is
    left. A ``leaf`` of its own, so each call of ``run_plan`` passes its arrays without
    reference counting (in the parallel loop's body each cost 28 atomic pairs)."""
    ntask = len(t_a)
    while True:
        r = fetch_add(nxt, 0, 1)
        if r >= ntask:
            break
        i = order[r]
        c = 0
        for p in range(t_plo[i], t_phi[i]):
            if _is_triangle(p, pl, nb_level):
                c += count_triangle(t_a[i], t_b[i], t_k[i], p, pl, nb_level, nb_label,
                                    seg_off, seg_len, loff, vlabel, key, elab, ct, dt)
                continue
            q = _cheaper_side(t_a[i], t_b[i], p, pl, nb_level, seg_off, seg_len, loff, key)
            c += run_plan(t_a[i], t_b[i], t_el[i], t_k[i], q, pl, nb_level, nb_label, seg_off,
                          seg_len, loff, vlabel, key, elab, ct, dt, raw, f, pos, rrow, rlo, rhi,
                          ilo, ihi, ranges, stamp, memo, marks, mk, wcnt, wtok, wst, dummy, 0, -1)
        counts[i] = c


@nb.njit(cache=True, nogil=True)
def _count_thread(nxt, counts, t_a, t_b, t_el, t_k, t_plo, t_phi, order, maxlen, slot, marks,
                  mk, wcnt, wtok, wst, memo, clock, pl, nb_level, nb_label, seg_off, seg_len,
                  loff, vlabel, key, elab, ct, dt):  # type: ignore[no-untyped-def]
    """One thread of ``count_tasks``: its buffers (marks, weights, memo and the runs'
    clock: its ``slot`` of the kept ones, SetBuffers), then its share of the tasks."""
    dummy = np.empty((1, 1), np.int32)
    raw, f, pos, rrow, rlo, rhi, ilo, ihi, ranges, stamp = _buffers(maxlen)
    _slot_state(mk[slot], wst[slot])
    stamp[0, 0] = clock[slot]   # runs go on numbering from the last count's
    _count_share(nxt, counts, t_a, t_b, t_el, t_k, t_plo, t_phi, order, pl, nb_level,
                 nb_label, seg_off, seg_len, loff, vlabel, key, elab, ct, dt, raw, f, pos,
                 rrow, rlo, rhi, ilo, ihi, ranges, stamp, memo[slot], marks[slot], mk[slot],
                 wcnt[slot], wtok[slot], wst[slot], dummy)
    clock[slot] = stamp[0, 0]


@nb.njit(parallel=True, cache=True, nogil=True)
def count_tasks(nthreads, t_a, t_b, t_el, t_k, t_plo, t_phi, order, maxlen, marks, mk, wcnt, wtok,
                wst, memo, clock, pl, nb_level, nb_label, seg_off, seg_len, loff, vlabel, key,
                elab, ct, dt):  # type: ignore[no-untyped-def]
    """Exact match count of every task on ``nthreads`` threads; they take the next task in
    ``order`` as they finish one (a shared counter: no thread idles while another has a
    queue), thread s with slot s of the kept marks and weights. Its other arguments are
    :func:`count_tasks_here`'s."""
    counts = np.zeros(len(t_a), np.int64)
    nxt = np.zeros(1, np.int64)
    for s in nb.prange(nthreads):
        _count_thread(nxt, counts, t_a, t_b, t_el, t_k, t_plo, t_phi, order, maxlen, s, marks,
                      mk, wcnt, wtok, wst, memo, clock, pl, nb_level, nb_label, seg_off,
                      seg_len, loff, vlabel, key, elab, ct, dt)
    return counts


@nb.njit(cache=True, nogil=True)
def count_tasks_here(t_a, t_b, t_el, t_k, t_plo, t_phi, order, maxlen, marks, mk, wcnt, wtok, wst,
                     memo, clock, pl, nb_level, nb_label, seg_off, seg_len, loff, vlabel, key,
                     elab, ct, dt):  # type: ignore[no-untyped-def]
    """``count_tasks`` on the calling thread alone (slot 0 of the kept marks and weights:
    ``SetBuffers.fit``): for a count too small to be worth waking the pool's other threads
    (a passive worker takes tens of microseconds)."""
    counts = np.zeros(len(t_a), np.int64)
    _count_thread(np.zeros(1, np.int64), counts, t_a, t_b, t_el, t_k, t_plo, t_phi, order,
                  maxlen, 0, marks, mk, wcnt, wtok, wst, memo, clock, pl, nb_level,
                  nb_label, seg_off, seg_len, loff, vlabel, key, elab, ct, dt)
    return counts


@leaf
def _list_share(nxt, t_a, t_b, t_el, t_k, t_plo, t_phi, sel, rows_off, caps, pl, nb_level,
                nb_label, seg_off, seg_len, loff, vlabel, key, elab, ct, dt, raw, f, pos, rrow,
                rlo, rhi, ilo, ihi, ranges, stamp, memo, marks, mk, wcnt, wtok, wst, out):  # type: ignore[no-untyped-def]
    """One thread's share of ``list_tasks`` (a ``leaf``, as ``_count_share``)."""
    while True:
        s = fetch_add(nxt, 0, 1)
        if s >= len(sel):
            break
        i = sel[s]
        got = 0
        for p in range(t_plo[i], t_phi[i]):
            if got >= caps[s]:
                break
            got += run_plan(t_a[i], t_b[i], t_el[i], t_k[i], p, pl, nb_level, nb_label, seg_off,
                            seg_len, loff, vlabel, key, elab, ct, dt, raw, f, pos, rrow, rlo,
                            rhi, ilo, ihi, ranges, stamp, memo, marks, mk, wcnt, wtok, wst, out,
                            rows_off[s] + got, caps[s] - got)


@nb.njit(parallel=True, cache=True, nogil=True)
def list_tasks(t_a, t_b, t_el, t_k, t_plo, t_phi, sel, rows_off, caps, nthreads, maxlen, marks, mk,
               pl, nb_level, nb_label, seg_off, seg_len, loff, vlabel, key, elab, ct, dt, out):  # type: ignore[no-untyped-def]
    """Write up to caps[s] tuples of task sel[s] into out[rows_off[s]:] (internal ids);
    thread s marks with slot s of the kept marks (``SetBuffers.fit``)."""
    nxt = np.zeros(1, np.int64)
    for s in nb.prange(nthreads):
        raw, f, pos, rrow, rlo, rhi, ilo, ihi, ranges, stamp = _buffers(maxlen)
        memo = np.zeros((3, 1), np.int64)   # listing enumerates: no memo
        wcnt, wtok, wst = (np.zeros(0, np.int32), np.zeros(0, np.int32),
                           np.zeros(4, np.int64))   # nor weights
        _slot_state(mk[s], wst)
        _list_share(nxt, t_a, t_b, t_el, t_k, t_plo, t_phi, sel, rows_off, caps, pl, nb_level,
                    nb_label, seg_off, seg_len, loff, vlabel, key, elab, ct, dt, raw, f, pos,
                    rrow, rlo, rhi, ilo, ihi, ranges, stamp, memo, marks[s], mk[s], wcnt, wtok,
                    wst, out)
