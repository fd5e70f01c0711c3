"""The device pipeline's per-batch host work, compiled: staging a batch's raw updates in
its launch's control block (ids interned) and reading its whole result back (columns,
signed counts, tally, external ids). In numpy that was some thirty small calls a batch,
then seven compiled ones of 3-13 us each on the H100 host (numba's dispatch is most of a
small batch's cost)."""

from __future__ import annotations

import numba as nb
import numpy as np

from ..graph._idmap import slot_of

__all__ = ["insert_multiplicity", "intern_ends", "note_ext", "read_batch", "stage_rows"]


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
def stage_rows(keys, vals, used, op, src, dst, label, first_vertex_op, count, new_ext,
               inp, at):  # type: ignore[no-untyped-def]
    """A batch's raw updates into a control block's input rows ``inp`` (op, slot x, slot y,
    label) from column ``at`` on, its ends interned as :func:`intern_ends` does. Returns how
    many ids are new."""
    n = len(op)
    k = intern_ends(keys, vals, used, op, src, dst, first_vertex_op, count, new_ext,
                    inp[1, at:at + n], inp[2, at:at + n])
    for i in range(n):
        inp[0, at + i] = op[i]
        inp[3, at + i] = label[i]
    return k


@nb.njit(cache=True, nogil=True)
def insert_multiplicity(inp, n, tally):  # type: ignore[no-untyped-def]
    """The most edge insertions among input rows ``inp[:, :n]`` (op, slot x, slot y) that
    name one vertex: what a launch can add to one version, at most (the device pipeline
    sizes match_step's rows by it; n, the launch's size, was the bound before). ``tally``:
    zeros, one per slot, left zeroed (a count per slot and a second pass to clear it: the
    sort of the ends it replaces took 0.3-0.6 ms for a launch of 4,096)."""
    most = 0
    for i in range(n):
        if inp[0, i] == 0:   # UpdateOp.INSERT_EDGE
            for s in (inp[1, i], inp[2, i]):
                tally[s] += 1
                most = max(most, tally[s])
    for i in range(n):
        if inp[0, i] == 0:
            tally[inp[1, i]] = 0
            tally[inp[2, i]] = 0
    return most


@nb.njit(cache=True, nogil=True)
def read_batch(out, counts, lo, at, op, src, dst, num, den, vext):  # type: ignore[no-untyped-def]
    """One pipelined batch's whole result from its launch's control block in one pass:
    its OpTable columns (rows lo..lo+len(op)-1 of ``out``: one primitive update per raw
    edge update), the applied ones' indices, the signed counts per (update, query) (task
    counts from ``counts[at]`` on, one per applied update and query, times num // den, +
    for an insertion, - for a deletion), each update's index within its raw update (0),
    the tally (applied, ignored, rejected, matches created, destroyed), and the external
    ids of the vertices it names into ``vext``: what ``OpTable.applied_edges``,
    ``result_columns`` and :func:`note_ext` give, in one call instead of four (a
    control-block read among them) of about 3-13 us each."""
    n, nq = len(op), len(num)
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
    ei = np.empty(n, np.int64)
    signed = np.zeros((n, nq), np.int64)
    tally = np.zeros(5, np.int64)
    k = 0
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
        tally[status[i]] += 1
        if a[i] >= 0:
            vext[a[i]] = src[i]
        if b[i] >= 0:
            vext[b[i]] = dst[i]
        if status[i] == 0 and op[i] <= 1:
            ei[k] = i
            sign = 1 - 2 * np.int64(op[i])
            for q in range(nq):
                c = counts[at + k * nq + q] * num[q] // den[q] * sign
                signed[i, q] = c
                if c > 0:
                    tally[3] += c
                else:
                    tally[4] -= c
            k += 1
    cols = (raw, o_op, a, b, o_src, o_dst, label, tick, status, reason)
    return cols, ei[:k], signed, np.zeros(n, np.int32), tally


@nb.njit(cache=True, nogil=True)
def note_ext(vext, a, src, b, dst):  # type: ignore[no-untyped-def]
    """vext[v] = the external id of every internal id the primitive updates name."""
    for i in range(len(a)):
        if a[i] >= 0:
            vext[a[i]] = src[i]
        if b[i] >= 0:
            vext[b[i]] = dst[i]
