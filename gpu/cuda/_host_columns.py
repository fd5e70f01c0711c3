"""The device pipeline's per-batch host work, compiled: staging a batch's raw updates in
its launch's control block (ids interned) and finishing its result (applied indices and
tally from the columns the device wrote). In numpy that was some thirty small calls a
batch, then seven compiled ones of 3-13 us each on the H100 host (numba's dispatch is most
of a small batch's cost)."""

from __future__ import annotations

from collections.abc import Callable

import numba as nb
import numpy as np
import numpy.typing as npt

from ..graph._idmap import set_direct, slot_of

__all__ = ["finish_launch", "insert_multiplicity", "intern_ends", "row_numbers", "stage_rows",
           "zero_subs"]


@nb.njit(cache=True, nogil=True)
def intern_ends(keys, vals, used, direct, op, src, dst, first_vertex_op, count, new_ext, sx,
                sy):  # type: ignore[no-untyped-def]
    """The slot of every update's ends into ``sx`` and ``sy`` (-1 for the second end of a
    vertex operation, op >= first_vertex_op); unseen ids take the next slots from
    ``count`` on, every source before every destination, and their external ids go to
    ``new_ext``. Returns how many are new. ``direct``: the map's direct array (IdMap),
    read first and kept equal to the table (Enron's 36k ends of a launch took 0.2 ms
    through the table alone)."""
    n_new = 0
    for side in range(2):
        xs, out = (src, sx) if side == 0 else (dst, sy)
        for i in range(len(xs)):
            if side == 1 and op[i] >= first_vertex_op:
                out[i] = -1
                continue
            x = xs[i]
            if np.uint64(x) < np.uint64(len(direct)) and direct[x] >= 0:
                out[i] = direct[x]
                continue
            s = slot_of(keys, used, x)
            if used[s] == 0:
                used[s] = 1
                keys[s] = x
                vals[s] = count + n_new
                set_direct(direct, x, count + n_new)
                new_ext[n_new] = x
                n_new += 1
            out[i] = vals[s]
    return n_new


@nb.njit(cache=True, nogil=True)
def stage_rows(keys, vals, used, direct, op, src, dst, label, first_vertex_op, count, new_ext,
               inp, at, edges_only):  # type: ignore[no-untyped-def]
    """A batch's raw updates into a control block's input rows ``inp`` (op, slot x, slot y,
    label) from column ``at`` on, its ends interned as :func:`intern_ends` does. Returns how
    many ids are new. One pass over the rows through the direct array while every end is
    in it (a stream's known vertices: Enron's 18,383 updates 106 -> 55 us here, against a
    pass per side and one for op and label); the first end that is not takes the batch
    through :func:`intern_ends` from the start. ``edges_only``: a batch with a vertex
    operation is refused (-1) before anything is written or interned (the device pipeline
    takes edge updates only; the check was a numpy reduction of a microsecond a batch)."""
    n, nd = len(op), np.uint64(len(direct))
    if edges_only:
        for i in range(n):
            if op[i] >= first_vertex_op:
                return -1
    r0, r1, r2, r3 = inp[0, at:at + n], inp[1, at:at + n], inp[2, at:at + n], inp[3, at:at + n]
    for i in range(n):
        o, x = op[i], np.uint64(src[i])
        if x >= nd:
            break
        sx, sy = direct[x], -1
        if o < first_vertex_op:
            y = np.uint64(dst[i])
            if y >= nd:
                break
            sy = direct[y]
            if sy < 0:
                break
        if sx < 0:
            break
        r0[i], r1[i], r2[i], r3[i] = o, sx, sy, label[i]
    else:
        return 0
    k = intern_ends(keys, vals, used, direct, op, src, dst, first_vertex_op, count, new_ext,
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
    sort of the ends it replaces took 0.3-0.6 ms for a launch of 4,096). Both ends of a
    row in one step, over its rows' slices: Enron's 18,383 updates 112 -> 75 us here
    (one word a slot holding a launch mark and the count, instead of the clearing, took
    100)."""
    most = 0
    ops, xs, ys = inp[0, :n], inp[1, :n], inp[2, :n]
    for i in range(n):
        if ops[i] == 0:   # UpdateOp.INSERT_EDGE
            a = tally[xs[i]] + 1
            tally[xs[i]] = a
            b = tally[ys[i]] + 1
            tally[ys[i]] = b
            most = max(most, max(a, b))
    for i in range(n):
        if ops[i] == 0:
            tally[xs[i]] = 0
            tally[ys[i]] = 0
    return most


@nb.njit(cache=True, nogil=True)
def finish_launch(op, status, counts, row0, bounds):  # type: ignore[no-untyped-def]
    """Each batch's result of a launch, picked out of the columns the device wrote into its
    region: batch t holds rows row0 + bounds[t] .. row0 + bounds[t + 1] - 1, and gets its
    applied edge updates (its own row numbers) and its tally (applied, ignored, rejected,
    matches created, destroyed), what ``OpTable.applied_edges`` and ``result_columns``
    give (counts are zero but for applied edge updates). Returns the applied indices one
    batch after the other, and a row per batch: its first row and last + 1, where its
    indices start and end, its tally. One call a launch, one ``tolist`` for its batches
    (a call a batch, numba's dispatch of three arrays, was 2-4 us of a batch of 8's host
    time). Branch-free, the tally in registers: adding into an array took 4.4 ns a row
    (each add waited for the last store to the same word), this 0.8."""
    k = len(bounds) - 1
    ei = np.empty(max(bounds[k] - bounds[0], 0), np.int64)
    out = np.empty((k, 9), np.int64)
    nq = counts.shape[1]
    m = 0
    for t in range(k):
        lo, hi = row0 + bounds[t], row0 + bounds[t + 1]
        out[t, 0], out[t, 1], out[t, 2] = lo, hi, m
        applied = ignored = pos = neg = 0
        for i in range(lo, hi):
            s = status[i]
            ei[m] = i - lo
            m += (s == 0) & (op[i] <= 1)
            applied += s == 0
            ignored += s == 1
            for j in range(nq):
                c = counts[i, j]
                pos += max(c, 0)
                neg += max(-c, 0)
        out[t, 3], out[t, 4], out[t, 5] = m, applied, ignored
        out[t, 6], out[t, 7], out[t, 8] = hi - lo - applied - ignored, pos, neg
    return ei, out


class _Shared:
    """Read-only int32 columns every pipelined batch has the same of (raw: 0..n-1; sub: 0),
    grown as needed and handed out as views."""

    def __init__(self, fill: Callable[[int], npt.NDArray[np.int32]]) -> None:
        self._fill, self._arr = fill, fill(0)

    def __call__(self, n: int) -> npt.NDArray[np.int32]:
        arr = self._arr
        if len(arr) < n:
            arr = self._fill(max(n, 2 * len(arr), 4096))
            arr.flags.writeable = False
            self._arr = arr
        return arr[:n]


#: raw indices 0..n-1 and sub 0 of a pipelined batch's rows
row_numbers = _Shared(lambda n: np.arange(n, dtype=np.int32))
zero_subs = _Shared(lambda n: np.zeros(n, np.int32))
