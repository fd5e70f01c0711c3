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

__all__ = ["finish_rows", "insert_multiplicity", "intern_ends", "row_numbers",
           "stage_rows", "zero_subs"]


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
               inp, at):  # type: ignore[no-untyped-def]
    """A batch's raw updates into a control block's input rows ``inp`` (op, slot x, slot y,
    label) from column ``at`` on, its ends interned as :func:`intern_ends` does. Returns how
    many ids are new. One pass over the rows through the direct array while every end is
    in it (a stream's known vertices: Enron's 18,383 updates 106 -> 55 us here, against a
    pass per side and one for op and label); the first end that is not takes the batch
    through :func:`intern_ends` from the start."""
    n, nd = len(op), np.uint64(len(direct))
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
def finish_rows(op, status, counts):  # type: ignore[no-untyped-def]
    """A pipelined batch's applied edge updates (indices of its rows) and its tally
    (applied, ignored, rejected, matches created, destroyed) from the columns the device
    wrote into its result region: op and status (one byte a row) and the signed counts
    (zero but for applied edge updates), what ``OpTable.applied_edges`` and
    ``result_columns`` give. The rest of the result is the region itself. Branch-free,
    with the tally in registers: a loop that added into the tally array took 4.4 ns a
    row here (each add waited for the last store to the same word), this one 0.8."""
    n = len(op)
    ei = np.empty(n, np.int64)
    k = applied = ignored = 0
    for i in range(n):
        s = status[i]
        ei[k] = i
        k += (s == 0) & (op[i] <= 1)
        applied += s == 0
        ignored += s == 1
    pos = neg = 0
    flat = counts.ravel()
    for j in range(len(flat)):
        c = flat[j]
        pos += max(c, 0)
        neg += max(-c, 0)
    tally = np.empty(5, np.int64)
    tally[0], tally[1], tally[2], tally[3], tally[4] = (applied, ignored, n - applied - ignored,
                                                         pos, neg)
    return ei[:k], tally


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
