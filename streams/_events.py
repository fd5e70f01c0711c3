"""Matches-topic messages, formatted for a whole batch of deltas by one compiled pass.

Formatting each delta's JSON in Python cost about 2 us (two float reprs and a dozen
fields), more than the engine spends on the update when nearly every update has a delta.
Here the columns go in and one byte buffer comes out, with each message's span and its
``seq`` header. Times are written with microsecond precision (a fixed six decimals):
rounding is monotone, so ``arrived_at <= published_at`` still holds.
"""

from __future__ import annotations

from dataclasses import dataclass

import numba as nb
import numpy as np
import numpy.typing as npt

from ._scan import _OPS, _table  # request op names by code, and the byte tables

__all__ = ["EventColumns", "format_events", "warm_up_formatter"]

# the text between the fields, in the documented key order
_PIECES = [b'{"query":', b',"seq":', b',"sub":', b',"op":"', b'","src":', b',"dst":',
           b',"sign":', b',"count":', b',"matches":', b',"truncated":', b',"arrived_at":',
           b',"published_at":', b'}', b'null', b'true', b'false']
_P_NULL, _P_TRUE, _P_FALSE = 13, 14, 15
_INT64_MIN = np.iinfo(np.int64).min
_INT64_MIN_TEXT = np.frombuffer(str(_INT64_MIN).encode(), np.uint8).copy()


@dataclass(frozen=True, slots=True)
class EventColumns:
    """One row per delta. Its listed matches are ``rows`` tuples of ``width`` ids from
    ``tuples[row0]`` on (every query's listing, flattened); ``row0`` is -1 when it lists
    none (``"matches": null``)."""

    query: npt.NDArray[np.int64]
    seq: npt.NDArray[np.int64]
    sub: npt.NDArray[np.int64]
    op: npt.NDArray[np.int64]
    src: npt.NDArray[np.int64]
    dst: npt.NDArray[np.int64]
    count: npt.NDArray[np.int64]          # signed
    arrived_at: npt.NDArray[np.float64]
    truncated: npt.NDArray[np.bool_]
    row0: npt.NDArray[np.int64]
    rows: npt.NDArray[np.int64]
    width: npt.NDArray[np.int64]
    tuples: npt.NDArray[np.int64]         # flat external ids


@nb.njit(cache=True, nogil=True, inline="always")
def _put(buf, p, src, lo, hi):  # type: ignore[no-untyped-def]
    for i in range(lo, hi):
        buf[p] = src[i]
        p += 1
    return p


@nb.njit(cache=True, nogil=True)
def _put_int(buf, p, x):  # type: ignore[no-untyped-def]
    if x == _INT64_MIN:   # -x would overflow
        for i in range(len(_INT64_MIN_TEXT)):
            buf[p + i] = _INT64_MIN_TEXT[i]
        return p + len(_INT64_MIN_TEXT)
    if x < 0:
        buf[p] = 45   # '-'
        p += 1
        x = -x
    n = 1
    y = x
    while y >= 10:
        y //= 10
        n += 1
    for k in range(n - 1, -1, -1):
        buf[p + k] = 48 + x % 10
        x //= 10
    return p + n


@nb.njit(cache=True, nogil=True, inline="always")
def _put_time(buf, p, us):  # type: ignore[no-untyped-def]
    p = _put_int(buf, p, us // 1_000_000)
    buf[p] = 46   # '.'
    f = us % 1_000_000
    for k in range(6, 0, -1):
        buf[p + k] = 48 + f % 10
        f //= 10
    return p + 7


@nb.njit(cache=True, nogil=True)
def _format(q, seq, sub, op, src, dst, count, arrived_us, published_us, trunc, row0, rows,
            width, tuples, pieces, pend, names, nend):  # type: ignore[no-untyped-def]
    n = len(q)
    cap = 0
    for i in range(n):
        cap += 512 + rows[i] * (width[i] * 21 + 2)
    buf = np.empty(cap, np.uint8)
    off = np.empty(n + 1, np.int64)
    hdr = np.empty(21 * n, np.uint8)
    hoff = np.empty(n + 1, np.int64)
    p = 0
    h = 0
    off[0] = 0
    hoff[0] = 0
    for i in range(n):
        c = count[i]
        fields = (q[i], seq[i], sub[i])
        for k in range(3):
            p = _put(buf, p, pieces, pend[k], pend[k + 1])
            p = _put_int(buf, p, fields[k])
        p = _put(buf, p, pieces, pend[3], pend[4])
        p = _put(buf, p, names, nend[op[i]], nend[op[i] + 1])
        p = _put(buf, p, pieces, pend[4], pend[5])
        p = _put_int(buf, p, src[i])
        p = _put(buf, p, pieces, pend[5], pend[6])
        p = _put_int(buf, p, dst[i])
        p = _put(buf, p, pieces, pend[6], pend[7])
        p = _put_int(buf, p, 1 if c > 0 else -1)
        p = _put(buf, p, pieces, pend[7], pend[8])
        p = _put_int(buf, p, c if c > 0 else -c)
        p = _put(buf, p, pieces, pend[8], pend[9])
        if row0[i] < 0:
            p = _put(buf, p, pieces, pend[_P_NULL], pend[_P_NULL + 1])
        else:
            w = width[i]
            buf[p] = 91   # '['
            p += 1
            for r in range(rows[i]):
                if r:
                    buf[p] = 44   # ','
                    p += 1
                buf[p] = 91
                p += 1
                base = row0[i] + r * w
                for j in range(w):
                    if j:
                        buf[p] = 44
                        p += 1
                    p = _put_int(buf, p, tuples[base + j])
                buf[p] = 93   # ']'
                p += 1
            buf[p] = 93
            p += 1
        p = _put(buf, p, pieces, pend[9], pend[10])
        t = _P_TRUE if trunc[i] else _P_FALSE
        p = _put(buf, p, pieces, pend[t], pend[t + 1])
        p = _put(buf, p, pieces, pend[10], pend[11])
        p = _put_time(buf, p, arrived_us[i])
        p = _put(buf, p, pieces, pend[11], pend[12])
        p = _put_time(buf, p, published_us)
        p = _put(buf, p, pieces, pend[12], pend[13])
        off[i + 1] = p
        h = _put_int(hdr, h, seq[i])
        hoff[i + 1] = h
    return buf[:p], off, hdr[:h], hoff


_PIECE_TEXT, _PIECE_END = _table(_PIECES)
_NAME_TEXT, _NAME_END = _table(_OPS)


def format_events(ev: EventColumns, published_at: float
                  ) -> tuple[bytes, list[int], bytes, list[int]]:
    """Every delta's message value and ``seq`` header: ``values[off[i]:off[i + 1]]`` and
    ``headers[hoff[i]:hoff[i + 1]]``."""
    arrived = np.rint(np.asarray(ev.arrived_at, np.float64) * 1e6).astype(np.int64)
    buf, off, hdr, hoff = _format(
        ev.query, ev.seq, ev.sub, ev.op, ev.src, ev.dst, ev.count, arrived,
        np.int64(round(published_at * 1e6)), ev.truncated.view(np.uint8), ev.row0, ev.rows,
        ev.width, ev.tuples, _PIECE_TEXT, _PIECE_END, _NAME_TEXT, _NAME_END)
    return buf.tobytes(), off.tolist(), hdr.tobytes(), hoff.tolist()


def warm_up_formatter() -> None:
    """Compile (or load) the formatter now rather than on the first delta."""
    one = np.ones(1, np.int64)
    format_events(EventColumns(query=one, seq=one, sub=one, op=one, src=one, dst=one,
                               count=one, arrived_at=np.ones(1), truncated=one.astype(bool),
                               row0=one - 1, rows=one, width=one, tuples=one), 1.0)
