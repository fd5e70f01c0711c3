"""Result regions: pinned, mapped host memory that the device writes a launch's result
columns into and the host hands out as the batch's numpy columns, without a copy.

The host read of a launch's rows was bound by the host's memory traffic: some 130 bytes a
row read and written (one-batch Enron query 0: 18,383 rows in 0.48 ms on the H100's host,
17-33 ns a row, most of it after the device had finished). Now build_units and
collect_step write each row's final columns (kernels/update.cu ``Region``) and the host
reads only op, status and counts for the applied indices and the tally.

A region lives as long as any column of it: each is a ctypes array over the arena's
memory, and every numpy view of it keeps it alive; when the last goes, a weak reference
tells the arena. Regions are carved from a chunk in order, as a ring: the space from the
oldest live region to the newest is taken, the rest is free. A chunk too full for a
new region gives way to a new one of twice the size; the old one goes once its last
region does (each region holds its chunk), so a caller that keeps every result only
costs memory, as numpy results would. A region larger than a chunk gets one of its own.
One arena serves the process (:func:`shared_arena`):
pinned memory is slow to allocate (a 16 MiB chunk took about 6 ms on the H100's host,
which every fresh engine's first batch paid while each pipeline had its own)."""

from __future__ import annotations

import ctypes
import functools
import threading
import weakref
from collections import deque
from collections.abc import Callable
from typing import Any, NamedTuple

import numpy as np
import numpy.typing as npt

from ._device_graph import device_pointer, mapped_zeros

__all__ = ["Claim", "Region", "ResultArena", "shared_arena"]

_ALIGN = 64


class Region:
    """``rows`` rows of tick, src, dst, counts (nq a row; int64), a, b, label (int32),
    op, status, reason (int8), one column after the other: the layout kernels/update.cu's
    ``region_at`` computes from the same address, rows and nq. ``device``: its address
    for kernels."""

    __slots__ = ("a", "b", "counts", "device", "dst", "label", "op", "reason", "rows",
                 "src", "status", "tick")

    def __init__(self, buf: Any, device: int, rows: int, nq: int) -> None:
        self.rows, self.device = rows, device
        wide = np.frombuffer(buf, np.int64, (3 + nq) * rows)
        self.tick, self.src, self.dst = wide[:rows], wide[rows:2 * rows], wide[2 * rows:3 * rows]
        self.counts = wide[3 * rows:].reshape(rows, nq)
        mid = np.frombuffer(buf, np.int32, 3 * rows, 8 * (3 + nq) * rows)
        self.a, self.b, self.label = mid[:rows], mid[rows:2 * rows], mid[2 * rows:]
        narrow = np.frombuffer(buf, np.int8, 3 * rows, (8 * (3 + nq) + 12) * rows)
        self.op, self.status, self.reason = narrow[:rows], narrow[rows:2 * rows], narrow[2 * rows:]

    @staticmethod
    def nbytes(rows: int, nq: int) -> int:
        return (8 * (3 + nq) + 12 + 3) * rows


class Claim(NamedTuple):
    """Room in a chunk (``ResultArena.claim``): the chunk (keeper, host, device), where,
    how many bytes, rows, queries, and the region's number in the ring (-1: a chunk of
    its own)."""

    chunk: tuple[Any, int, int]
    at: int
    need: int
    rows: int
    nq: int
    number: int


class ResultArena:
    """Regions for launches' results. ``alloc(nbytes)``: a new chunk as (keeper, host
    address, device address); the keeper holds the memory (default: CuPy's pinned memory,
    mapped; tests pass numpy's). Pipelines of several engines share it: ``take`` holds a
    lock (the weak references' callbacks only append to a deque, from any thread)."""

    def __init__(self, chunk_bytes: int = 16 << 20,
                 alloc: Callable[[int], tuple[Any, int, int]] | None = None) -> None:
        self._alloc = alloc or _pinned_mapped
        self._chunk_bytes = chunk_bytes
        self._chunk: tuple[Any, int, int] | None = None   # keeper, host, device
        self._size = 0
        self._head = 0   # where the next region may start
        #: live regions of the current chunk in allocation order: [number, start, end]
        self._live: deque[list[int]] = deque()
        self._refs: dict[int, weakref.ref[Any]] = {}
        self._freed: deque[int] = deque()   # numbers of regions whose last view went
        self._gone: set[int] = set()
        self._number = 0
        self._first = 0   # the first region number of the current chunk
        self.chunks = 0   # chunks allocated so far
        self._lock = threading.Lock()

    def reserve(self) -> None:
        """The first chunk now (set-up), not on a batch's path."""
        with self._lock:
            if self._chunk is None:
                self._new_chunk(self._chunk_bytes)

    def take(self, rows: int, nq: int) -> Region:
        """A region for ``rows`` rows of ``nq`` queries (at least one row)."""
        return self.region(self.claim(rows, nq))

    def claim(self, rows: int, nq: int) -> Claim:
        """Room for a region of ``rows`` rows of ``nq`` queries, which ``region`` makes.
        Whatever allocates or frees pinned memory happens here: both wait for the device
        (CUDA's implicit synchronisation), so a launch that waits for its region must be
        launched after its claim, and the region (the costly Python) may come after it."""
        rows = max(rows, 1)
        need = _size_class(Region.nbytes(rows, nq))
        if need > self._chunk_bytes:   # a chunk of its own, gone with it: one huge batch
            return Claim(self._alloc(need), 0, need, rows, nq, -1)   # (not the ring's size)
        with self._lock:
            self._reclaim()
            at = self._fit(need)
            if at is None:   # the ring is blocked by regions still held: one twice as large
                self._new_chunk(max(2 * self._size, self._chunk_bytes))
                at = 0
            number = self._number
            self._number += 1
            self._live.append([number, at, at + need])
            self._head = at + need
            return Claim(self._chunk, at, need, rows, nq, number)   # type: ignore[arg-type]

    def region(self, c: Claim) -> Region:
        """The region of claim ``c``; the ring's room comes back once its last view goes."""
        keeper, host, device = c.chunk
        buf = _buffer(keeper, host + c.at, c.need)
        if c.number >= 0:
            freed, number = self._freed, c.number
            with self._lock:
                self._refs[number] = weakref.ref(buf, lambda _, k=number: freed.append(k))
        return Region(buf, device + c.at, c.rows, c.nq)

    @property
    def live(self) -> int:
        """Regions of the current chunk not yet known to be gone."""
        with self._lock:
            self._reclaim()
            return len(self._live)

    def _fit(self, need: int) -> int | None:
        if self._chunk is None:
            return None
        if not self._live:
            self._head = 0
            return 0 if need <= self._size else None
        tail = self._live[0][1]
        if self._head > tail:   # live: [tail, head); free: [head, size) and [0, tail)
            if self._head + need <= self._size:
                return self._head
            return 0 if need <= tail else None
        # wrapped, live: [tail, size) and [0, head); free: [head, tail). head == tail is a
        # full ring, not an empty one (that has no live region): regions of one size end
        # exactly at the tail, and ">=" above handed the oldest live region out again
        return self._head if self._head + need <= tail else None

    def _reclaim(self) -> None:
        while self._freed:
            k = self._freed.popleft()
            self._refs.pop(k, None)
            if k >= self._first:
                self._gone.add(k)
        live, gone = self._live, self._gone
        if not gone:
            return
        while live and live[0][0] in gone:
            gone.discard(live.popleft()[0])
        while live and live[-1][0] in gone:   # the newest ones gone too: take from
            gone.discard(live.pop()[0])         # the end of the newest live one on
            self._head = live[-1][2] if live else 0

    def _new_chunk(self, size: int) -> None:
        size = -(-size // _ALIGN) * _ALIGN
        self._chunk = self._alloc(size)
        self._size, self._head = size, 0
        self._live.clear()
        self._gone.clear()
        self._first = self._number
        self.chunks += 1


@functools.cache
def shared_arena() -> ResultArena:
    """The process's arena of pinned, mapped result regions (two threads that race to
    make it may each get one: harmless, each is whole)."""
    return ResultArena()


def _size_class(nbytes: int) -> int:
    """What a region of ``nbytes`` takes: a multiple of _ALIGN, and above 512 bytes one of
    eight steps a doubling (at most an eighth more). Each size is a ctypes array type
    (``_buffer``): making one took 22 us here, and ctypes keeps every one for the process's
    life, so a launch of each new size paid it and the cache grew by a type a size. Some
    128 classes up to a 16 MiB chunk are made once, then found in that cache."""
    if nbytes <= 512:
        return max(-(-nbytes // _ALIGN), 1) * _ALIGN
    step = max(1 << (nbytes.bit_length() - 4), _ALIGN)
    return -(-nbytes // step) * step


def _buffer(keeper: Any, host: int, nbytes: int) -> Any:
    """A region's bytes at ``host``: it holds its chunk (``keeper``) while it lives."""
    buf = (ctypes.c_char * nbytes).from_address(host)
    buf._keep = keeper   # type: ignore[attr-defined]
    return buf


def _pinned_mapped(size: int) -> tuple[Any, int, int]:
    arr = mapped_zeros(size, np.dtype(np.uint8))
    return arr, arr.ctypes.data, int(device_pointer(arr))


def numpy_chunk(size: int) -> tuple[npt.NDArray[np.uint8], int, int]:
    """A chunk in ordinary host memory (tests: no device), the host address for both."""
    arr = np.zeros(size, np.uint8)
    return arr, arr.ctypes.data, arr.ctypes.data
