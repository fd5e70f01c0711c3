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
"""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt

from ._cuda import cupy_or_raise, kernel
from ._graph import HostGraph, OpTable, ranges
from .exceptions import BackendError

__all__ = ["SEG_BITS", "DeviceGraph"]

SEG_BITS = 24  # must equal SEG_BITS in kernels/match.cu


def _seg_words(off: npt.NDArray[np.int64], ln: npt.NDArray[np.int32]) -> npt.NDArray[np.int64]:
    if len(ln) and int(ln.max()) >= 1 << SEG_BITS:
        raise BackendError(f"a neighbour array of {int(ln.max()):,} entries exceeds the GPU "
                           f"graph's limit of {(1 << SEG_BITS) - 1:,}")
    return (off.astype(np.int64) << SEG_BITS) | ln.astype(np.int64)


class DeviceGraph:
    def __init__(self, stream: Any) -> None:
        self.cp = cupy_or_raise()
        self.stream = stream
        self._layout = -1
        self._owner: HostGraph | None = None
        self._vcap = 0
        self._pcap = 0
        self._entries = kernel("match", "install_entries")
        self._vertices = kernel("match", "install_vertices")
        #: bytes sent by the last sync (observability)
        self.last_bytes = 0

    def arrays(self) -> tuple[Any, ...]:
        return (self.key, self.elab, self.ct, self.dt, self.seg, self.vlabel)

    def needs_full(self, graph: HostGraph) -> bool:
        return (graph is not self._owner or graph.layout != self._layout
                or len(graph.vlabel) > self._vcap or len(graph.key) > self._pcap)

    def sync(self, graph: HostGraph, ops: OpTable) -> None:
        """Install the batch just applied on the host (enqueued on ``stream``)."""
        if self.needs_full(graph):
            self._full(graph)
        elif len(ops):
            self._touched(graph, ops)

    def _full(self, graph: HostGraph) -> None:
        cp = self.cp
        with self.stream:
            if len(graph.vlabel) > self._vcap or len(graph.key) > self._pcap:
                self._vcap, self._pcap = len(graph.vlabel), len(graph.key)
                self.key = cp.zeros(self._pcap, cp.int64)
                self.elab = cp.zeros(self._pcap, cp.int32)
                self.ct = cp.zeros(self._pcap, cp.int64)
                self.dt = cp.zeros(self._pcap, cp.int64)
                self.seg = cp.zeros(self._vcap, cp.int64)
                self.vlabel = cp.zeros(self._vcap, cp.int32)
            used = graph.pool_used
            nv = graph.num_vertices
            for dev, host in ((self.key, graph.key[:used]), (self.elab, graph.elab[:used]),
                              (self.ct, graph.ct[:used]), (self.dt, graph.dt[:used]),
                              (self.seg, _seg_words(graph.seg_off[:nv], graph.seg_len[:nv])),
                              (self.vlabel, graph.vlabel[:nv])):
                dev[: len(host)].set(host, stream=self.stream)
            self.last_bytes = used * 28 + nv * 12
        self._layout = graph.layout
        self._owner = graph

    def _touched(self, graph: HostGraph, ops: OpTable) -> None:
        ends = np.concatenate([ops.a, ops.b])
        v = np.unique(ends[ends >= 0]).astype(np.int64)
        off = graph.seg_off[v]
        ln = graph.seg_len[v]
        idx = ranges(off, ln.astype(np.int64))
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
