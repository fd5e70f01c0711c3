"""A batch's result columns in one compiled pass (the engine's per-batch host cost: at
b = 1 some twenty small numpy calls were most of it)."""

from __future__ import annotations

import numba as nb
import numpy as np
import numpy.typing as npt

__all__ = ["result_columns"]


def result_columns(raw: npt.NDArray[np.integer], status: npt.NDArray[np.integer],
                   op: npt.NDArray[np.integer], ei: npt.NDArray[np.integer],
                   flat: npt.NDArray[np.integer], num: npt.NDArray[np.integer],
                   den: npt.NDArray[np.integer]) -> tuple[npt.NDArray[np.int64],
                                                          npt.NDArray[np.int32],
                                                          npt.NDArray[np.int64]]:
    """:func:`_columns` on contiguous arrays of one set of types: a view of the scales
    of two or more queries (strided) or another dtype would compile it again, on the
    first such batch of a live stream."""
    c = np.ascontiguousarray
    return _columns(c(raw, np.int32), c(status, np.int8), c(op, np.int8), c(ei, np.int64),  # type: ignore[no-any-return]
                    c(flat, np.int64), c(num, np.int64), c(den, np.int64))


@nb.njit(cache=True, nogil=True)
def _columns(raw, status, op, ei, flat, num, den):  # type: ignore[no-untyped-def]
    """The signed counts per (primitive update, query): task counts ``flat`` (edge update
    k of ``ei``, query j at k * nq + j) times num / den (exact: see plan_query), + for an
    insertion and - for a deletion; each primitive update's index within its raw update;
    and applied / ignored / rejected (by the last primitive update of each raw update),
    matches created, matches destroyed."""
    n, nq = len(raw), len(num)
    counts = np.zeros((n, nq), np.int64)
    sub = np.zeros(n, np.int32)
    # the tally in registers: adding into an array made each row wait for the last
    # row's store to the same word (6 ns a row over Enron's 18k, now about 1)
    pos = neg = 0
    for k in range(len(ei)):
        i = ei[k]
        sign = 1 - 2 * np.int64(op[i])
        for j in range(nq):
            c = flat[k * nq + j] * num[j]
            if den[j] != 1:   # a 64-bit division costs more than the rest of a row
                c //= den[j]
            c *= sign
            counts[i, j] = c
            pos += max(c, 0)
            neg += max(-c, 0)
    applied = ignored = rejected = 0
    for i in range(n):
        if i > 0 and raw[i] == raw[i - 1]:
            sub[i] = sub[i - 1] + 1
        if i == n - 1 or raw[i + 1] != raw[i]:
            s = status[i]
            applied += s == 0
            ignored += s == 1
            rejected += s == 2
    tally = np.array([applied, ignored, rejected, pos, neg], np.int64)
    return counts, sub, tally
