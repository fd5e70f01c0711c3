"""The device pipeline's per-batch host work, compiled: staging a batch's raw updates in
its launch's control block (ids interned) and reading its whole result back (columns,
signed counts, tally, external ids). In numpy that was some thirty small calls a batch,
then seven compiled ones of 3-13 us each on the H100 host (numba's dispatch is most of a
small batch's cost)."""

from __future__ import annotations

import numba as nb
import numpy as np

from ..graph._idmap import set_direct, slot_of

__all__ = ["ResultRows", "insert_multiplicity", "intern_ends", "note_ext", "read_batch",
           "stage_rows"]


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
    many ids are new."""
    n = len(op)
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
    wide, mid, narrow, signed, k = _read_new(out, counts, lo, at, op, src, dst, num, den,
                                             vext)
    return _columns(wide, mid, narrow, signed, len(op), k)


def _columns(wide, mid, narrow, signed, n, k):  # type: ignore[no-untyped-def]
    """(OpTable's columns in its field order: raw, op, a, b, src, dst, label, tick,
    status, reason; applied indices; signed counts; sub; tally) from the blocks."""
    return ((mid[0], narrow[0], mid[1], mid[2], wide[:n], wide[n:2 * n], mid[3],
             wide[2 * n:3 * n], narrow[1], narrow[2]), wide[3 * n + 5:3 * n + 5 + k], signed,
            mid[4], wide[3 * n:3 * n + 5])


class ResultRows:
    """A batch's result columns, filled in row order by the reads of its parts: a batch
    split into launches reads each part straight into its rows instead of concatenating
    the parts' columns afterwards (Enron's 18,383 updates in five parts: 181 -> 121 us on
    the 2-core VM). The columns are rows of three blocks, one per width, as
    :func:`read_batch` returns them: numba boxes each array it returns (about 0.3 us here,
    1 us on the H100's host), and fourteen of them were most of a small batch's read."""

    def __init__(self, n: int, nq: int) -> None:
        self.wide, self.mid, self.narrow, self.signed = _blocks(n, nq)
        self.n, self.filled, self.k = n, 0, 0

    def read(self, out, counts, lo, at, op, src, dst, num, den, vext, row0):  # type: ignore[no-untyped-def]
        """Rows ``row0..`` from a launch's control block (see :func:`read_batch`); parts
        come in row order. Returns how many of them were applied."""
        assert row0 == self.filled and row0 + len(op) <= self.n
        k = _read_rows(out, counts, lo, at, op, src, dst, num, den, vext, self.wide,
                       self.mid, self.narrow, self.signed, row0, self.k)
        self.filled += len(op)
        got, self.k = k - self.k, k
        return got

    def put(self, ops, applied, counts, sub, tally, row0):  # type: ignore[no-untyped-def]
        """Rows ``row0..`` from columns built elsewhere (a part the host path finished):
        ``ops`` OpTable's columns in its field order, raw counting from the part's first
        update."""
        n = len(ops[0])
        assert row0 == self.filled and row0 + n <= self.n
        for mine, theirs in zip(self.columns(check=False)[0], ops, strict=True):
            mine[row0:row0 + n] = theirs
        self.mid[0, row0:row0 + n] += row0
        self.mid[4, row0:row0 + n] = sub
        self.signed[row0:row0 + n] = counts
        at = 3 * self.n + 5 + self.k
        self.wide[at:at + len(applied)] = applied + row0
        self.wide[3 * self.n:3 * self.n + 5] += tally
        self.filled += n
        self.k += len(applied)

    def columns(self, check: bool = True):  # type: ignore[no-untyped-def]
        """As :func:`read_batch` returns them, once every row is in."""
        assert self.filled == self.n or not check
        return _columns(self.wide, self.mid, self.narrow, self.signed, self.n, self.k)


@nb.njit(cache=True, nogil=True)
def _blocks(n, nq):  # type: ignore[no-untyped-def]
    """int64 src, dst, tick, tally (5, zeroed), applied; int32 raw, a, b, label, sub; int8
    op, status, reason; the signed counts (zeroed)."""
    wide = np.empty(4 * n + 5, np.int64)
    wide[3 * n:3 * n + 5] = 0
    return wide, np.empty((5, n), np.int32), np.empty((3, n), np.int8), np.zeros((n, nq),
                                                                                  np.int64)


@nb.njit(cache=True, nogil=True)
def _read_new(out, counts, lo, at, op, src, dst, num, den, vext):  # type: ignore[no-untyped-def]
    """:func:`read_batch`'s blocks, allocated and filled in one compiled call."""
    wide, mid, narrow, signed = _blocks(len(op), len(num))
    k = _read_rows(out, counts, lo, at, op, src, dst, num, den, vext, wide, mid, narrow,
                   signed, 0, 0)
    return wide, mid, narrow, signed, k


@nb.njit(cache=True, nogil=True)
def _read_rows(out, counts, lo, at, op, src, dst, num, den, vext, wide, mid, narrow, signed,
               row0, k0):  # type: ignore[no-untyped-def]
    """:class:`ResultRows`' pass over ``len(op)`` rows into rows ``row0..`` of its blocks
    (applied indices from ``k0`` on, offset by ``row0``); returns the applied count."""
    n, nq, N = len(op), len(num), mid.shape[1]
    tally = wide[3 * N:3 * N + 5]
    ei = wide[3 * N + 5:]
    k = k0
    for i in range(n):
        j = lo + i
        r = row0 + i
        a, b, status = out[0, j], out[1, j], out[4, j]
        mid[0, r] = r
        mid[1, r] = a
        mid[2, r] = b
        mid[3, r] = out[2, j]
        mid[4, r] = 0
        narrow[0, r] = op[i]
        narrow[1, r] = status
        narrow[2, r] = out[5, j]
        wide[r] = src[i]
        wide[N + r] = dst[i]
        wide[2 * N + r] = out[3, j]
        tally[status] += 1
        if a >= 0:
            vext[a] = src[i]
        if b >= 0:
            vext[b] = dst[i]
        if status == 0 and op[i] <= 1:
            ei[k] = r
            sign = 1 - 2 * np.int64(op[i])
            for q in range(nq):
                c = counts[at + (k - k0) * nq + q] * num[q] // den[q] * sign
                signed[r, q] = c
                if c > 0:
                    tally[3] += c
                else:
                    tally[4] -= c
            k += 1
    return k


@nb.njit(cache=True, nogil=True)
def note_ext(vext, a, src, b, dst):  # type: ignore[no-untyped-def]
    """vext[v] = the external id of every internal id the primitive updates name."""
    for i in range(len(a)):
        if a[i] >= 0:
            vext[a[i]] = src[i]
        if b[i] >= 0:
            vext[b[i]] = dst[i]
