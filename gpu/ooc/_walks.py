"""numba kernels of the access-frequency estimator (GCSM section 2.4).

The execution tree of a batch: its roots are the (task, plan) pairs; a node at level j
has bound f[0..j] and its children are the valid candidates of level j + 1. A node
*reads* the neighbour arrays that the matching kernel intersects for every later level
whose candidate set depends on f[j] last (``F_DEP``): with loop-invariant code motion
that is where the kernel computes it. Walks stop before the last level, which reads
nothing.

Sampling: each of a node's B walks draws a slot in [0, D) and moves to child u when
u < |V|, else stops (probability |V|/D, then a uniform child: formula (3)'s walk), so
the children's walk counts are the binomial/multinomial split of section 2.4.2 without
materialising walks. A read at level j by a node that B walks reach adds
``B * R * D**(j-1)`` (R roots); divided by the number of walks that is formula (3)'s
unbiased estimate. With ``branching`` a walk never stops early: it moves to a uniform
child (probability 1/|V|) and weighs R * |V_2| * ... * |V_j| (Knuth's estimator, also
unbiased, and far less variable than dividing by a power of the maximum degree on skewed
graphs, where formula (3)'s walks mostly die after one step). In exhaustive mode every
node is visited once with weight 1: the exact read counts of the same model.
"""

from __future__ import annotations

import numba as nb
import numpy as np

from .._types import MAX_QUERY_VERTICES, WILDCARD
from ..cpu._kernels import _buffers, _label_filter, _prepare, _valid, root_ok
from ..cuda._device_graph import ENTRY_BYTES
from ..graph._labels import label_range
from ..planning._planner import F_DEP, F_LABEL, F_MISC, F_NBCNT, F_NBOFF

M = MAX_QUERY_VERTICES
_WILD = WILDCARD
_LOW32 = np.int64(0xFFFFFFFF)
_MIX = np.uint64(0x9E3779B97F4A7C15)


@nb.njit(cache=True, nogil=True, inline="always")
def _next(state):  # type: ignore[no-untyped-def]
    """splitmix64 on a one-element uint64 array: reproducible per root, thread-free."""
    state[0] += _MIX
    z = state[0]
    z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return z ^ (z >> np.uint64(31))


@nb.njit(cache=True, nogil=True)
def _record(j, B, w, p, f, pl, nb_level, seg_off, seg_len, loff, key, weigh_bytes, ev_v, ev_w,
            ev_n, base, dense, t):  # type: ignore[no-untyped-def]
    """The reads of a node at level j (root: j = 1 covers levels 0 and 1); with
    ``weigh_bytes`` each read counts the bytes of the label range it scans."""
    n = pl[p, F_MISC, 0]
    for L in range(j + 1, n):
        d = pl[p, F_DEP, L]
        if d == j or (j == 1 and d < 1):
            off = pl[p, F_NBOFF, L]
            for q in range(pl[p, F_NBCNT, L]):
                v = f[nb_level[off + q]]
                x = B * w
                if weigh_bytes:
                    lo, hi = label_range(v, pl[p, F_LABEL, L], seg_off, seg_len, loff, key)
                    x *= ENTRY_BYTES * (hi - lo)
                if dense.shape[1] > 1:
                    dense[t, v] += x
                else:
                    ev_v[base + ev_n[0]] = v
                    ev_w[base + ev_n[0]] = x
                    ev_n[0] += 1


@nb.njit(cache=True, nogil=True)
def _walk_root(r, a, b, el, k, p, B, R, D, exhaustive, branching, weigh_bytes, seed, pl,
               nb_level, nb_label, seg_off, seg_len, loff, vlabel, key, elab, ct, dt, bufs, cand,
               ncand, kids, nkids, kpos, kcnt, draws, walks, wts, ev_v, ev_w, base, dense, t):  # type: ignore[no-untyped-def]
    raw, f, pos, rrow, rlo, rhi, ilo, ihi, ranges, stamp = bufs
    no_marks, no_mk = np.zeros((M, 0), np.int32), np.zeros((4, M), np.int64)   # plain merges
    ev_n = np.zeros(1, np.int64)
    n = pl[p, F_MISC, 0]
    if n <= 2 or not root_ok(a, b, el, p, pl, nb_level, nb_label, seg_off, seg_len, loff, vlabel,
                              key):
        return 0
    state = np.empty(1, np.uint64)
    state[0] = np.uint64(seed) ^ (np.uint64(r) * _MIX)
    f[0] = a
    f[1] = b
    wts[1] = 1.0 if exhaustive else float(R)
    _record(1, B, wts[1], p, f, pl, nb_level, seg_off, seg_len, loff, key, weigh_bytes, ev_v, ev_w,
            ev_n, base, dense, t)
    # node at level j has its children (level j + 1) in kids[j + 1][0:nkids]
    j = 1
    walks[1] = B
    nkids[2] = -1
    while j >= 1:
        L = j + 1
        if L > n - 2:           # children would read nothing
            j -= 1
            continue
        if nkids[L] < 0:        # first visit: candidates and the walks' split
            _prepare(L, p, k, f, pl, nb_level, nb_label, seg_off, seg_len, loff, vlabel, key, elab,
                     ct, dt, raw, rrow, rlo, rhi, ilo, ihi, ranges, 0, no_marks, no_mk)
            buf = raw[rrow[L]]
            nv = 0
            for i in range(ilo[L], ihi[L]):
                x = np.int32(buf[i] & _LOW32)
                if _valid(x, L, L, p, f, pl) and _label_filter(
                        x, L, p, pl, nb_level, nb_label, seg_off, seg_len, loff, key):
                    cand[L, nv] = x
                    nv += 1
            ncand[L] = nv
            nk = 0
            if exhaustive:
                for i in range(nv):
                    kids[L, i] = i
                    kcnt[L, i] = 1
                nk = nv
            elif nv > 0:
                nd = 0
                span = np.uint64(nv) if branching else np.uint64(D)
                for _ in range(walks[j]):
                    u = _next(state) % span
                    if u < np.uint64(nv):
                        draws[nd] = np.int64(u)
                        nd += 1
                if nd:
                    s = np.sort(draws[:nd])
                    for i in range(nd):
                        if nk > 0 and kids[L, nk - 1] == s[i]:
                            kcnt[L, nk - 1] += 1
                        else:
                            kids[L, nk] = s[i]
                            kcnt[L, nk] = 1
                            nk += 1
            nkids[L] = nk
            kpos[L] = 0
        if kpos[L] >= nkids[L]:
            nkids[L] = -1
            j -= 1
            continue
        i = kpos[L]
        kpos[L] += 1
        f[L] = cand[L, kids[L, i]]
        walks[L] = kcnt[L, i]
        if exhaustive:
            wts[L] = 1.0
        elif branching:
            wts[L] = wts[j] * ncand[L]
        else:
            wts[L] = float(R) * float(D) ** (L - 1)
        _record(L, walks[L], wts[L], p, f, pl, nb_level, seg_off, seg_len, loff, key, weigh_bytes,
                ev_v, ev_w, ev_n, base, dense, t)
        j = L
        if L + 1 < M:
            nkids[L + 1] = -1
    return ev_n[0]


@nb.njit(parallel=True, cache=True, nogil=True)
def walk(r_a, r_b, r_el, r_k, r_plan, r_walks, r_base, R, D, exhaustive, branching,
         weigh_bytes, seed,
         nthreads,
         maxlen, maxwalks, pl, nb_level, nb_label, seg_off, seg_len, loff, vlabel, key, elab, ct,
         dt, ev_v, ev_w, dense):  # type: ignore[no-untyped-def]
    """Walk every root r (B = r_walks[r]); events of root r go to ev_*[r_base[r]:], and
    their number to the result (or, with a [threads, V] ``dense``, into its row)."""
    nroot = len(r_a)
    used = np.zeros(nroot, np.int64)
    for t in nb.prange(nthreads):
        bufs = _buffers(maxlen)
        cand = np.empty((M, maxlen + 1), np.int32)
        kids = np.empty((M, maxlen + 1), np.int64)
        kcnt = np.empty((M, maxlen + 1), np.int64)
        ncand = np.zeros(M, np.int64)
        nkids = np.full(M, -1, np.int64)
        kpos = np.zeros(M, np.int64)
        walks = np.zeros(M, np.int64)
        wts = np.zeros(M, np.float64)
        draws = np.empty(maxwalks + 1, np.int64)
        for r in range(t, nroot, nthreads):
            used[r] = _walk_root(r, r_a[r], r_b[r], r_el[r], r_k[r], r_plan[r], r_walks[r], R,
                                 D, exhaustive, branching, weigh_bytes, seed, pl, nb_level,
                                 nb_label, seg_off, seg_len, loff, vlabel, key, elab, ct, dt,
                                 bufs, cand, ncand, kids, nkids, kpos, kcnt, draws, walks, wts,
                                 ev_v, ev_w, r_base[r], dense, t)
    return used
