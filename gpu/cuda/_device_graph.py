"""The multi-version graph on the device: a mirror of :class:`HostGraph`'s versions.

The host resolves every update (ids, duplicates, vertex deletions) and lays out each new
neighbour-array version; the device holds the same pool, offsets and lifetimes, so a
kernel reading tick ``k`` sees exactly what the CPU executor sees. After a batch only the
touched vertices' current versions travel: one packed host-to-device copy and two
launches (the graph updater: entries, then version words). Versions are never
overwritten while readable: new versions go to fresh pool space and deletions only end
lifetimes, so matching of earlier batches may still be running while the next one is
installed. When the host compacts or grows its arrays the mirror is re-copied whole,
after the caller has drained every batch in flight.

Out-of-core mode (GCSM): when the pool would exceed ``budget`` bytes of device memory, the
host graph's own pool moves into mapped pinned host memory that kernels read over PCIe,
and only the per-vertex words (12 bytes a vertex) live on the device. Installing a batch
then sends nothing but those words: the host wrote the entries already, into fresh pool
space or lifetime ends that no reader in flight can tell apart (its tick is earlier).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt

from ..exceptions import BackendError
from ..graph._host import HostGraph, OpTable, ranges
from .kernels import cupy_or_raise, kernel

__all__ = ["ENTRY_BYTES", "SEG_BITS", "DeviceGraph", "mapped_zeros"]

SEG_BITS = 24  # must equal SEG_BITS in kernels/match.cu
#: bytes of one pool entry: key, ct, dt (int64) and elab (int32)
ENTRY_BYTES = 28


def mapped_zeros(n: int, dtype: np.dtype) -> npt.NDArray:  # type: ignore[type-arg]
    """A zeroed numpy array in pinned host memory that kernels can read (mapped, UVA)."""
    cp = cupy_or_raise()
    rt = cp.cuda.runtime
    nbytes = max(1, n * dtype.itemsize)
    mem = cp.cuda.PinnedMemory(nbytes, rt.hostAllocMapped | rt.hostAllocPortable)
    arr = np.ndarray((n,), dtype, buffer=cp.cuda.PinnedMemoryPointer(mem, 0))
    arr.fill(0)
    return arr


def device_pointer(arr: npt.NDArray) -> np.uint64:  # type: ignore[type-arg]
    cp = cupy_or_raise()
    return np.uint64(cp.cuda.runtime.pointerGetAttributes(arr.ctypes.data).devicePointer)


def _seg_words(off: npt.NDArray[np.int64], ln: npt.NDArray[np.int32]) -> npt.NDArray[np.int64]:
    if len(ln) and int(ln.max()) >= 1 << SEG_BITS:
        raise BackendError(f"a neighbour array of {int(ln.max()):,} entries exceeds the GPU "
                           f"graph's limit of {(1 << SEG_BITS) - 1:,}")
    return (off.astype(np.int64) << SEG_BITS) | ln.astype(np.int64)


class DeviceGraph:
    def __init__(self, stream: Any, budget: int = 0) -> None:
        self.cp = cupy_or_raise()
        self.stream = stream
        #: device bytes the pool may take (0: no limit); over it the pool stays on the host
        self.budget = budget
        self.host = False
        self._layout = -1
        self._owner: HostGraph | None = None
        self._vcap = 0
        self._pcap = 0
        self.key: Any = None
        self._pool_refs: tuple[Any, ...] = ()
        self._entries = kernel("match", "install_entries")
        self._vertices = kernel("match", "install_vertices")
        #: bytes sent by the last sync (observability)
        self.last_bytes = 0

    def arrays(self) -> tuple[Any, ...]:
        """Kernel arguments: pool columns (device arrays, or host pointers), vertex words."""
        return (self.key, self.elab, self.ct, self.dt, self.seg, self.vlabel)

    def needs_full(self, graph: HostGraph) -> bool:
        return (graph is not self._owner or graph.layout != self._layout
                or len(graph.vlabel) > self._vcap or len(graph.key) > self._pcap
                or self._wants_host(graph) != self.host)

    def _wants_host(self, graph: HostGraph) -> bool:
        return self.budget > 0 and len(graph.key) * ENTRY_BYTES > self.budget

    def sync(self, graph: HostGraph, ops: OpTable) -> None:
        """Install the batch just applied on the host (enqueued on ``stream``)."""
        if self.needs_full(graph):
            self._full(graph)
        elif len(ops):
            self._touched(graph, ops)

    def _full(self, graph: HostGraph) -> None:
        cp = self.cp
        host = self._wants_host(graph)
        if host and graph.pool_alloc is not mapped_zeros:
            graph.use_pool_allocator(mapped_zeros)   # the caller has drained
        self.host = host
        used = graph.pool_used
        nv = graph.num_vertices
        with self.stream:
            if len(graph.vlabel) > self._vcap:
                self._vcap = len(graph.vlabel)
                self.seg = cp.zeros(self._vcap, cp.int64)
                self.vlabel = cp.zeros(self._vcap, cp.int32)
            pool: list[tuple[Any, npt.NDArray]] = []  # type: ignore[type-arg]
            if host:
                # kernels read the host graph's own pool: nothing to copy
                self.key, self.elab, self.ct, self.dt = (
                    device_pointer(a) for a in (graph.key, graph.elab, graph.ct, graph.dt))
                self._pool_refs = (graph.key, graph.elab, graph.ct, graph.dt)
                self._pcap = len(graph.key)
            else:
                if len(graph.key) > self._pcap or not isinstance(self.key, cp.ndarray):
                    self._pcap = len(graph.key)
                    self.key = cp.zeros(self._pcap, cp.int64)
                    self.elab = cp.zeros(self._pcap, cp.int32)
                    self.ct = cp.zeros(self._pcap, cp.int64)
                    self.dt = cp.zeros(self._pcap, cp.int64)
                pool = [(self.key, graph.key[:used]), (self.elab, graph.elab[:used]),
                        (self.ct, graph.ct[:used]), (self.dt, graph.dt[:used])]
            for dev, src in (*pool,
                             (self.seg, _seg_words(graph.seg_off[:nv], graph.seg_len[:nv])),
                             (self.vlabel, graph.vlabel[:nv])):
                dev[: len(src)].set(src, stream=self.stream)
            self.last_bytes = (0 if host else used * ENTRY_BYTES) + nv * 12
        self._layout = graph.layout
        self._owner = graph

    def _touched(self, graph: HostGraph, ops: OpTable) -> None:
        ends = np.concatenate([ops.a, ops.b])
        v = np.unique(ends[ends >= 0]).astype(np.int64)
        off = graph.seg_off[v]
        ln = graph.seg_len[v]
        idx = np.zeros(0, np.int64) if self.host else ranges(off, ln.astype(np.int64))
        ne, nv = len(idx), len(v)
        buf = np.empty(5 * ne + 3 * nv, np.int64)
        buf[:ne] = idx
        buf[ne:2 * ne] = graph.key[idx]
        buf[2 * ne:3 * ne] = graph.ct[idx]
        buf[3 * ne:4 * ne] = graph.dt[idx]
        buf[4 * ne:5 * ne] = graph.elab[idx]
        buf[5 * ne:5 * ne + nv] = v
        buf[5 * ne + nv:5 * ne + 2 * nv] = _seg_words(off, ln)
        buf[5 * ne + 2 * nv:] = graph.vlabel[v]
        cp = self.cp
        with self.stream:
            dbuf = cp.asarray(buf)
            threads = 256
            grid = lambda n: (max(1, min(1024, (n + threads - 1) // threads)),)  # noqa: E731
            if ne:
                self._entries(grid(ne), (threads,), (dbuf, np.int64(ne), self.key, self.elab,
                                                     self.ct, self.dt))
            self._vertices(grid(nv), (threads,), (dbuf, np.int64(ne), np.int64(nv), self.seg,
                                                  self.vlabel))
        self.last_bytes = buf.nbytes
