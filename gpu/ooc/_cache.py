"""The per-batch DCSR cache of out-of-core mode (GCSM section 2.5.2).

The chosen vertices' current neighbour arrays are packed into one pinned host buffer
(rowidx sorted for the kernel's binary search, rowptr, then the key / ct / dt / elab
columns) and sent in one copy into the device buffer of the batch's slot. A snapshot
taken after the batch is installed is exact for every tick of that batch: later batches
only add versions and end lifetimes at later ticks.

GCSM's rowptr carries a second offset for neighbours appended since the last sort; our
versions are always sorted (each batch lays out a new sorted version), so one offset per
row suffices.

Which vertices: by estimated bytes read (:mod:`._estimate`), by degree (GCSM's "naive"
baseline), or none (every read goes over PCIe, the zero-copy baseline). GCSM caches the
most-read vertices; we rank by estimated bytes saved per byte held (a greedy knapsack),
since one hub read a few times can cost more cache than dozens of small arrays read often.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

import numba as nb
import numpy as np
import numpy.typing as npt

from ..cuda._device_graph import ENTRY_BYTES
from ..exceptions import BackendError
from ..graph._host import HostGraph

__all__ = ["ROW_BYTES", "DeviceCache", "Loaded", "by_value", "fit"]

#: per cached vertex: rowidx (int32) + rowptr (int64)
ROW_BYTES = 12


def fit(order: npt.NDArray[np.int64], seg_len: npt.NDArray[np.int32], capacity: int) -> int:
    """How many of ``order`` (best first) fit in ``capacity`` bytes of cache."""
    if len(order) == 0:
        return 0
    cost = np.cumsum(seg_len[order].astype(np.int64) * ENTRY_BYTES + ROW_BYTES + 8)
    return int(np.searchsorted(cost, capacity - 8, side="right"))


def by_value(vertices: npt.NDArray[np.int64], saved: npt.NDArray[np.float64],
             seg_len: npt.NDArray[np.int32], capacity: int) -> npt.NDArray[np.int64]:
    """Indices into ``vertices`` worth caching: best bytes ``saved`` per byte held first,
    as many as fit in ``capacity``."""
    held = seg_len[vertices].astype(np.float64) * ENTRY_BYTES + ROW_BYTES
    order = np.argsort(-(saved / held), kind="stable")
    return order[:fit(vertices[order], seg_len, capacity)]


@nb.njit(parallel=True, cache=True, nogil=True)
def _pack(vs, seg_off, seg_len, key, elab, ct, dt, words, halves):  # type: ignore[no-untyped-def]
    """Layout read by match.cu: rowidx | rowptr | key | ct | dt | elab."""
    n = len(vs)
    ptr_at = (n + 1) // 2
    key_at = ptr_at + n + 1
    for i in range(n):
        halves[i] = vs[i]
    words[ptr_at] = 0
    for i in range(n):
        words[ptr_at + i + 1] = words[ptr_at + i] + seg_len[vs[i]]
    ne = words[ptr_at + n]
    for i in nb.prange(n):
        src = seg_off[vs[i]]
        dst = words[ptr_at + i]
        for j in range(seg_len[vs[i]]):
            words[key_at + dst + j] = key[src + j]
            words[key_at + ne + dst + j] = ct[src + j]
            words[key_at + 2 * ne + dst + j] = dt[src + j]
            halves[2 * (key_at + 3 * ne) + dst + j] = elab[src + j]
    return ne


@dataclass(frozen=True, slots=True)
class Loaded:
    """A cache load: what the kernel needs, and what it cost on the host."""

    vertices: int
    entries: int
    nbytes: int
    pack_seconds: float


class DeviceCache:
    """A device buffer of ``nbytes`` and two pinned staging twins, taken in turns by
    batches in flight: a copy into the buffer waits (on the device) until the previous
    batch's kernel stops reading it; packing into a staging buffer waits (on the host)
    for that buffer's copy two loads ago, so packing overlaps the kernels."""

    def __init__(self, cp: Any, nbytes: int) -> None:
        import cupyx

        self.cp = cp
        words = max(2, nbytes // 8)
        self.nbytes = words * 8
        self.device = cp.zeros(words, cp.int64)
        self._staging = [cupyx.empty_pinned(words, np.int64) for _ in range(2)]
        self._copied: list[Any] = [None, None]   # events: each staging's last copy is done
        self._turn = 0
        self._read: Any = None   # event: the last kernel reading the device buffer is done

    def release(self, read_done: Any) -> None:
        """The event after which the batch that loaded this cache no longer reads it."""
        self._read = read_done

    def claim(self, stream: Any) -> None:
        """Order ``stream`` after the cache's previous reader (before timing the copy)."""
        if self._read is not None:
            stream.wait_event(self._read)

    def load(self, graph: HostGraph, vertices: npt.NDArray[np.int64], stream: Any) -> Loaded:
        """Pack ``vertices`` (any order; they must fit) and enqueue the copy on ``stream``
        (claimed first)."""
        turn, self._turn = self._turn, 1 - self._turn
        if self._copied[turn] is not None:
            self._copied[turn].synchronize()
        t0 = time.perf_counter()
        vs = np.sort(vertices).astype(np.int32)
        words = self._staging[turn]
        halves = words.view(np.int32)
        ne = int(_pack(vs, graph.seg_off, graph.seg_len, graph.key, graph.elab, graph.ct,
                       graph.dt, words, halves)) if len(vs) else 0
        used = (len(vs) + 1) // 2 + len(vs) + 1 + 3 * ne + (ne + 1) // 2
        if used > len(words):   # fit() bounds the selection; this guards the layout
            raise BackendError(f"cache selection of {used * 8:,} bytes overflows the "
                               f"{self.nbytes:,}-byte cache")
        pack = time.perf_counter() - t0
        if used and len(vs):
            self.device[:used].set(words[:used], stream=stream)
            self._copied[turn] = stream.record()
        return Loaded(len(vs), ne, used * 8 if len(vs) else 0, pack)
