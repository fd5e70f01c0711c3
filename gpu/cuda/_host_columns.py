"""The device pipeline's per-batch host work on columns, compiled: mapping external ids to
slots, reading a control block's primitive updates and noting external ids were some
thirty small numpy calls and three compiled ones a batch (about 40 us at b = 1 on the H100
host)."""

from __future__ import annotations

import numba as nb
import numpy as np

from ..graph._idmap import slot_of

__all__ = ["intern_ends", "note_ext", "read_ops"]


@nb.njit(cache=True, nogil=True)
def intern_ends(keys, vals, used, op, src, dst, first_vertex_op, count, new_ext, sx,
                sy):  # type: ignore[no-untyped-def]
    """The slot of every update's ends into ``sx`` and ``sy`` (-1 for the second end of a
    vertex operation, op >= first_vertex_op); unseen ids take the next slots from
    ``count`` on, every source before every destination, and their external ids go to
    ``new_ext``. Returns how many are new."""
    n_new = 0
    for side in range(2):
        xs, out = (src, sx) if side == 0 else (dst, sy)
        for i in range(len(xs)):
            if side == 1 and op[i] >= first_vertex_op:
                out[i] = -1
                continue
            s = slot_of(keys, used, xs[i])
            if used[s] == 0:
                used[s] = 1
                keys[s] = xs[i]
                vals[s] = count + n_new
                new_ext[n_new] = xs[i]
                n_new += 1
            out[i] = vals[s]
    return n_new


@nb.njit(cache=True, nogil=True)
def read_ops(out, lo, n, op, src, dst):  # type: ignore[no-untyped-def]
    """The columns of an OpTable from a control block's output rows ``out`` (a, b, label,
    tick, status, reason as int64; one primitive update per raw update: edge updates),
    columns lo..lo+n-1: one batch of the launch. Also how many of them were applied."""
    raw = np.empty(n, np.int32)
    o_op = np.empty(n, np.int8)
    a = np.empty(n, np.int32)
    b = np.empty(n, np.int32)
    o_src = np.empty(n, np.int64)
    o_dst = np.empty(n, np.int64)
    label = np.empty(n, np.int32)
    tick = np.empty(n, np.int64)
    status = np.empty(n, np.int8)
    reason = np.empty(n, np.int8)
    applied = 0
    for i in range(n):
        j = lo + i
        raw[i] = i
        o_op[i] = op[i]
        a[i] = out[0, j]
        b[i] = out[1, j]
        o_src[i] = src[i]
        o_dst[i] = dst[i]
        label[i] = out[2, j]
        tick[i] = out[3, j]
        status[i] = out[4, j]
        reason[i] = out[5, j]
        applied += out[4, j] == 0
    return (raw, o_op, a, b, o_src, o_dst, label, tick, status, reason), applied


@nb.njit(cache=True, nogil=True)
def note_ext(vext, a, src, b, dst):  # type: ignore[no-untyped-def]
    """vext[v] = the external id of every internal id the primitive updates name."""
    for i in range(len(a)):
        if a[i] >= 0:
            vext[a[i]] = src[i]
        if b[i] >= 0:
            vext[b[i]] = dst[i]
