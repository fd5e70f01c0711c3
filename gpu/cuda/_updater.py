"""The device-owned graph and its updater (DCSM's graph updater, issue: device pipeline).

The host keeps only the id map (external id -> dense *slot*, compiled, O(b) per batch)
and hands the device raw updates; ``kernels/update.cu::apply_updates`` resolves them in
arrival order and builds the new versions on the device, with exactly the semantics of
the host updater (``HostGraph.apply`` in copy-on-write mode): the same statuses, internal
ids, ticks and visible version contents. The pool, the per-vertex words and labels are
laid out as :class:`DeviceGraph` lays them out, so the matching kernel reads either.

The device pipeline (``_pipeline.py``) runs the same resolver in its captured launches
(``apply_step``) and compacts the pool in stream order (:meth:`compact_in_stream`); this
class's own :meth:`apply` is one synchronous launch per batch (the host path).
"""

from __future__ import annotations

import gc
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import numpy as np
import numpy.typing as npt

from .._types import UpdateBatch, UpdateOp
from ..exceptions import BackendError
from ..graph import _kernels as K
from ..graph._host import HostGraph, LoadStats, OpTable, ranges, visible_edges
from ..graph._idmap import IdMap, intern_bulk
from ._device_graph import SEG_BITS, device_pointer, mapped_zeros
from ._host_columns import stage_rows
from .kernels import BUILD_TILES, COMPACT_RANGE, LF_GMAX, TILE, cupy_or_raise, kernel, sm_count

__all__ = ["DeviceGraphView", "DeviceUpdater", "UpdaterStats"]

# meta words: must equal the enum in kernels/update.cu
(M_NV, M_POOL_USED, M_TICK, M_BATCH, M_WATERMARK, M_NEDGES, M_GARBAGE, M_MAXLEN, M_RESUME,
 M_NOUT, M_CODE, M_LAUNCH, M_RECLAIMED, M_SIZE) = range(14)
DONE, NEED_POOL, NEED_OUT, NEED_VERTEX = range(4)
FAULT = 5   # the resolver's grid barrier timed out
_VERTEX_OPS = int(UpdateOp.INSERT_VERTEX)
#: the share of free device memory the two pools may take (growth and load)
POOL_SHARE = 0.25
#: a loaded graph's pool, in multiples of what it uses (:meth:`DeviceUpdater._load_room`)
LOAD_ROOM = 16
_W_WM, _W_MINCHUNK, _W_FAULT, _W_TIMEOUT = 5, 8, 9, 10   # kernels/update.cu W_*
W_PROBE, P_MAX = 16, 24   # kernels/update.cu
#: the grid's words with the diagnostic probes' (sums, counts, the last mark, a sink),
#: then the launch front's (kernels/update.cu W_LF, L_WORDS), then the build's item probes
#: (W_BST, B_WORDS)
W_BST = W_PROBE + 2 * P_MAX + 2 + 16
_GW_WORDS = W_BST + 8


def fault_error(blocks: int, timeout_s: float) -> BackendError:
    """What a FAULT means: some of the resolver's blocks never ran beside the others."""
    return BackendError(
        f"the device resolver's {blocks} blocks waited more than {timeout_s:g} s at a "
        "barrier: they cannot all run at once on this GPU (an MPS share or another "
        "context holding SMs?), or a pipelined launch waited that long for its result "
        "region (the host failed between launching it and placing the region); the device "
        "graph is in doubt and takes no more updates")


class UpdaterStats:
    """Counters of the device graph (read back after each batch)."""

    def __init__(self, meta: npt.NDArray[np.int64]) -> None:
        self.num_vertices = int(meta[M_NV])
        self.pool_used = int(meta[M_POOL_USED])
        self.tick = int(meta[M_TICK])
        self.num_edges = int(meta[M_NEDGES])
        self.garbage = int(meta[M_GARBAGE])
        self.max_len = int(meta[M_MAXLEN])


class DeviceUpdater:
    """Owns the multi-version graph on the device and applies raw update batches to it."""

    #: the pool is device memory (the matching kernel's out-of-core flag)
    host = False
    #: called before compaction moves entries (the executor drains matching in flight)
    before_relayout: Callable[[], None] | None = None

    _POOL = (("key", np.int64), ("elab", np.int32), ("ct", np.int64), ("dt", np.int64))
    _VERT = (("seg", np.int64), ("vlabel", np.int32), ("off", np.int64), ("len", np.int32),
             ("cap", np.int32), ("vbatch", np.int64), ("vdeg", np.int32),
             ("valive", np.uint8), ("vslot", np.int32), ("vext", np.int64), ("vpub", np.int64),
             ("nbr", np.int32), ("nbr_ext", np.int64), ("order", np.int32),
             ("vtile", np.int64), ("vcnt", np.int32))
    #: the parallel resolver's scratch, in tiles (kernels/update.cu): a build's entries and
    #: owners (two an update of its BUILD_TILES tiles), its items (ITEMS) and its pair table
    #: (PT_SIZE, four slots an update)
    _TILE_SCRATCH = (
        *((name, dt, 2 * BUILD_TILES) for name, dt in (
            ("owners", np.int32), ("bucket", np.int32), ("e_owner", np.int32),
            ("e_key", np.int64), ("e_lab", np.int32), ("e_ct", np.int64), ("e_dt", np.int64),
            ("b_key", np.int64), ("b_lab", np.int32), ("b_ct", np.int64), ("b_dt", np.int64),
            ("s_key", np.int64), ("s_lab", np.int32), ("s_ct", np.int64), ("s_dt", np.int64),
            ("own_src", np.int64), ("own_n0", np.int32), ("own_dst", np.int64),
            ("own_cap", np.int32), ("own_item", np.int32), ("own_done", np.int32))),
        ("item_owner", np.int32, 64 + 2 * BUILD_TILES), ("cnt", np.int32, 64 + 2 * BUILD_TILES),
        ("pt_key", np.uint64, 4 * BUILD_TILES), ("pt_stamp", np.int64, 4 * BUILD_TILES),
        ("pt_val", np.int64, 4 * BUILD_TILES),
        ("gw", np.uint64, 0),   # the grid's words (kernels/update.cu W_*)
        ("blk", np.int64, 3),   # three sums a resolver block (up to 1,024 blocks)
        # the launch front's pair table, groups, and each update's status, label, link
        ("lf_key", np.uint64, 4 * BUILD_TILES), ("lf_cnt", np.int32, 4 * BUILD_TILES),
        ("lf_list", np.int32, 4 * BUILD_TILES * LF_GMAX), ("lf_st", np.int32, BUILD_TILES),
        ("lf_el", np.int32, BUILD_TILES), ("lf_link", np.int32, BUILD_TILES))
    _OUT = (("raw", np.int32), ("op", np.int8), ("a", np.int32), ("b", np.int32),
            ("src", np.int64), ("dst", np.int64), ("label", np.int32), ("tick", np.int64),
            ("status", np.int8), ("reason", np.int8))

    # device arrays, (re)allocated by the _alloc/_grow helpers from the tables above
    key: Any
    elab: Any
    ct: Any
    dt: Any
    seg: Any
    vlabel: Any
    off: Any
    len: Any
    cap: Any
    vbatch: Any
    vdeg: Any
    valive: Any
    vslot: Any
    vext: Any
    vpub: Any
    nbr: Any
    nbr_ext: Any
    order: Any
    slot_vid: Any
    slot_ext: Any
    slot_first: Any
    slot_tally: Any
    vtile: Any
    vcnt: Any
    touched: Any
    # the primitive updates' columns (``_OUT``, prefixed o_)
    o_raw: Any
    o_op: Any
    o_a: Any
    o_b: Any
    o_src: Any
    o_dst: Any
    o_label: Any
    o_tick: Any
    o_status: Any
    o_reason: Any

    def __init__(self, vertex_capacity: int = 1024, pool_capacity: int = 4096,
                 stream: Any = None, parallel: bool = True, chunk: int = 128,
                 timeout_s: float = 30.0, build_tiles: int = BUILD_TILES) -> None:
        self.cp = cp = cupy_or_raise()
        self.stream = stream or cp.cuda.Stream(non_blocking=True)
        #: resolve edge-only tiles in parallel (``apply_batch``) or every update on one warp
        self.parallel = parallel
        self._apply = kernel("update", "apply_batch" if parallel else "apply_updates")
        #: edge-only tiles whose touched vertices get one new version together (a build;
        #: the pipeline's apply_step always gathers kernels/update.cu's BUILD_TILES)
        self.build_tiles = build_tiles
        self._compact = kernel("update", "compact_pool")
        self._compacted = kernel("update", "compact_done")
        #: blocks of the parallel resolver: one per SM (its grid barriers need every block
        #: resident, and one block of TILE threads fills an SM's share it may take)
        self.grid = min(sm_count(), TILE)   # TILE at most: the blk scratch's sums (3 a block)
        self.ids = IdMap(vertex_capacity)
        self.n_slots = 0
        self.meta = mapped_zeros(M_SIZE, np.dtype(np.int64))   # the kernel writes it
        self._meta_ptr = device_pointer(self.meta)
        self.compactions = 0
        #: the pool a stream-ordered compaction packs into (the one before the last such
        #: compaction, same capacity): two pools alternate, so captured launches for
        #: either stay valid (:attr:`pool_flip` says which one is current)
        self._spare: tuple[Any, ...] | None = None
        self._pools = 1
        self.pool_flip = 0
        #: device time of the resolver launches so far (benchmarks)
        self.kernel_seconds = 0.0
        #: bumped whenever a device array is reallocated (captured launches go stale)
        self.generation = 0
        with self.stream:
            #: compact_pool's fill counter (compact_done reads it and sets it back to zero;
            #: zeroed on the updater's stream, which is not ordered after the default one)
            self._cwords = cp.zeros(1, cp.uint64)
            self._tile_scratch()
            #: entries of an old version one warp copies at least (a multiple of 128; the
            #: kernel raises it on tiles whose versions would make too many chunks)
            self._tiles["gw"][_W_MINCHUNK] = chunk
            self.barrier_timeout = timeout_s
            self._alloc_pool(max(16, pool_capacity))
            self._vcap = 0
            self._grow_vertices(max(16, vertex_capacity))
            self._scap = 0
            self._grow_slots(max(16, vertex_capacity))
            self._ocap = 0
            self._grow_out(1024)

    # -- storage --------------------------------------------------------------------
    @property
    def pool(self) -> tuple[Any, ...]:
        """The current pool's columns (key, elab, ct, dt: ``_POOL``'s order)."""
        return (self.key, self.elab, self.ct, self.dt)

    @pool.setter
    def pool(self, cols: tuple[Any, ...]) -> None:
        self.key, self.elab, self.ct, self.dt = cols

    def _new_pool(self, cap: int) -> tuple[Any, ...]:
        """Uninitialised columns of a pool of ``cap`` entries (a compaction's target)."""
        return tuple(self.cp.empty(cap, dt) for _, dt in self._POOL)

    def _alloc_pool(self, cap: int) -> None:
        """A fresh pool of ``cap`` entries; the spare goes first (so the old pool, which a
        compaction still reads, and the new one are the most alive at once), and all
        columns are allocated before any replaces the old (out of memory changes nothing)."""
        cp = self.cp
        self._spare = None
        self._pools = 1   # pools of this generation (the spare is the second)
        cols = {name: cp.zeros(cap, dt) for name, dt in self._POOL}
        self.generation += 1
        for name, col in cols.items():
            setattr(self, name, col)
        self._pcap = cap

    def _load_room(self, used: int) -> int:
        """Pool entries for a graph that uses ``used``: LOAD_ROOM times as many (the room a
        one-batch run of a tenth of the graph asks before its first launch, so that no
        compaction grows the pool inside it: growth re-captures every launch the pipeline
        holds), within POOL_SHARE of the free device memory for both pools, and at least
        three times as many (what a compaction leaves)."""
        gc.collect()   # engines dropped but not yet collected (cycles) still hold pools
        return max(4096, 3 * used, min(LOAD_ROOM * used, self.pool_share()))

    def pool_share(self) -> int:
        """Entries each of the two pools may hold within POOL_SHARE of the free device
        memory (CuPy's cached free blocks count as free): the cap at load and on growth."""
        cp = self.cp
        free = cp.cuda.runtime.memGetInfo()[0] + cp.get_default_memory_pool().free_bytes()
        width = sum(np.dtype(dt).itemsize for _, dt in self._POOL)
        return int(POOL_SHARE * free) // (2 * width)

    @contextmanager
    def flipped(self) -> Iterator[None]:
        """The spare pool as the current one, for capturing launches against it (nothing
        runs meanwhile): once both pools' launches are captured, a compaction in stream
        order, which flips them, captures nothing."""
        if self._spare is None:
            yield
            return
        cur = self.pool
        self.pool, self._spare = self._spare, cur
        self.pool_flip ^= 1
        try:
            yield
        finally:
            self._spare, self.pool = self.pool, cur
            self.pool_flip ^= 1

    @property
    def barrier_timeout(self) -> float:
        """Seconds the resolver's blocks wait at a barrier before the launch faults."""
        return int(self._tiles["gw"][_W_TIMEOUT].get()) / 1e9

    @barrier_timeout.setter
    def barrier_timeout(self, seconds: float) -> None:
        with self.stream:
            self._tiles["gw"][_W_TIMEOUT] = int(seconds * 1e9)

    @property
    def pool_capacity(self) -> int:
        return self._pcap

    @property
    def reclaimed(self) -> int:
        """Entries compaction has dropped so far."""
        return int(self.meta[M_RECLAIMED])

    @staticmethod
    def _regrow(cp: Any, old: Any, cap: int, dt: Any, fill: int = 0) -> Any:
        new = cp.full(cap, fill, dt) if fill else cp.zeros(cap, dt)
        if old is not None:
            new[: len(old)] = old
        return new

    def _grow_vertices(self, cap: int) -> None:
        self.generation += 1
        for name, dt in self._VERT:
            fill = -1 if name == "vbatch" else 0   # vtile: build stamps only grow
            setattr(self, name, self._regrow(self.cp, getattr(self, name, None), cap, dt, fill))
        self.touched = self.cp.zeros(cap + 64, self.cp.int32)   # once per vertex a launch
        self._vcap = cap

    def _grow_slots(self, cap: int) -> None:
        cp = self.cp
        self.generation += 1
        self.slot_vid = self._regrow(cp, getattr(self, "slot_vid", None), cap, cp.int32, -1)
        self.slot_ext = self._regrow(cp, getattr(self, "slot_ext", None), cap, cp.int64)
        self.slot_first = cp.full(cap, 0x7FFFFFFF, cp.int32)   # empty between tiles
        self.slot_tally = cp.zeros(cap, cp.int32)   # zero between launch fronts
        self._scap = cap

    def _tile_scratch(self) -> None:
        self.generation += 1
        self._tiles = {name: self.cp.zeros(k * TILE + (_GW_WORDS if k == 0 else 16), dt)
                       for name, dt, k in self._TILE_SCRATCH}   # k tiles and a few words

    def _scratch(self) -> tuple[Any, ...]:
        """The parallel resolver's scratch arrays, in kernels/update.cu's Scratch order (its
        SCRATCH_ARGS: one kernel parameter each, so the kernel reads them from the parameter
        bank instead of holding them in registers)."""
        return (self.slot_first, self.vtile, self.vcnt,
                *(self._tiles[name] for name, _, _ in self._TILE_SCRATCH), self.slot_tally)

    def _grow_out(self, cap: int) -> None:
        self.generation += 1
        for name, dt in self._OUT:
            setattr(self, "o_" + name, self._regrow(self.cp, getattr(self, "o_" + name, None),
                                                     cap, dt))
        self._ocap = cap

    def arrays(self) -> tuple[Any, ...]:
        """What the matching kernel reads: pool columns, version words, labels."""
        return (*self.pool, self.seg, self.vlabel)

    @property
    def stats(self) -> UpdaterStats:
        return UpdaterStats(self.meta)

    def set_watermark(self, tick: int) -> None:
        """Every update with tick <= ``tick`` has finished matching (its entries may go)."""
        self.meta[M_WATERMARK] = tick

    # -- loading --------------------------------------------------------------------------
    def load(self, vertex_ids: npt.ArrayLike, vertex_labels: npt.ArrayLike, src: npt.ArrayLike,
             dst: npt.ArrayLike, label: npt.ArrayLike) -> LoadStats:
        """Bulk-load the initial graph (empty graph only): built as the host graph builds
        it (same internal ids), then copied once; loaded vertices take slots 0..n-1."""
        self._empty("bulk load")
        g = HostGraph()
        stats = g.load(np.asarray(vertex_ids, np.int64), np.asarray(vertex_labels, np.int32),
                       np.asarray(src, np.int64), np.asarray(dst, np.int64),
                       np.asarray(label, np.int32))
        nv = g.num_vertices
        self._install(g, g.vext[:nv], np.arange(nv, dtype=np.int32))
        return stats

    def restore(self, arrays: dict[str, npt.NDArray[np.generic]]) -> None:
        """Put back a graph from :meth:`HostGraph.dump` or :meth:`dump` (empty graph only):
        a snapshot restores on either backend, ticks and ids included. Each external id
        the snapshot knows takes a slot, in its id table's order."""
        self._empty("restoring a snapshot")
        g = HostGraph()
        g.restore(arrays)
        known = g.ids.used != 0
        self._install(g, g.ids.keys[known], g.ids.vals[known])

    def _empty(self, what: str) -> None:
        if self.meta[M_NV] or self.meta[M_TICK] or self.n_slots:
            raise BackendError(f"{what} needs an empty graph")

    def _install(self, g: HostGraph, ext: npt.NDArray[np.int64],
                 vid: npt.NDArray[np.int32]) -> None:
        """Copy host graph ``g`` to the device; slot i names external id ``ext[i]``, whose
        internal id is ``vid[i]`` (-1: none now, the vertex was deleted)."""
        nv, used, ns = g.num_vertices, g.pool_used, len(ext)
        by_ext = np.argsort(ext, kind="stable")   # every internal id's slot: its ext's
        vslot = by_ext[np.searchsorted(ext, g.vext[:nv], sorter=by_ext)].astype(np.int32)
        with self.stream:
            room = self._load_room(used)
            if room > self._pcap:
                self._alloc_pool(room)
            if self._spare is None:   # the second pool now, not in a run's first compaction
                try:   # (short of memory: later, or never, as before pools came at load)
                    self._spare = self._new_pool(self._pcap)
                    self._pools = 2
                except self.cp.cuda.memory.OutOfMemoryError:
                    self._spare = None
            if nv + max(1024, nv // 4) > self._vcap:
                self._grow_vertices(nv + max(1024, nv // 4))
            if ns > self._scap:
                self._grow_slots(2 * ns)
            for name in ("key", "elab", "ct", "dt"):
                getattr(self, name)[:used].set(getattr(g, name)[:used], stream=self.stream)
            words = (g.seg_off[:nv].astype(np.int64) << SEG_BITS) | g.seg_len[:nv]
            for dev, host in ((self.seg, words), (self.vlabel, g.vlabel[:nv]),
                              (self.off, g.seg_off[:nv]), (self.len, g.seg_len[:nv]),
                              (self.cap, g.seg_cap[:nv]), (self.vbatch, np.full(nv, -1)),
                              (self.vdeg, g.vdeg[:nv]), (self.valive, g.valive[:nv]),
                              (self.vext, g.vext[:nv]), (self.vslot, vslot),
                              (self.slot_vid, vid), (self.slot_ext, ext)):
                dev[:len(host)].set(np.ascontiguousarray(host, dev.dtype), stream=self.stream)
        self.ids.reserve(ns)
        intern_bulk(self.ids.keys, self.ids.vals, self.ids.used, ext)   # ext[i]: slot i
        self.n_slots = self.ids.count = ns
        self.ids.index_direct()
        for word, value in ((M_NV, nv), (M_POOL_USED, used), (M_NEDGES, g.num_edges),
                            (M_MAXLEN, g.max_degree_bound()), (M_TICK, g.tick),
                            (M_WATERMARK, g.watermark), (M_GARBAGE, g.garbage)):
            self.meta[word] = value
        self.stream.synchronize()

    def dump(self) -> dict[str, npt.NDArray[np.generic]]:
        """The graph as :meth:`HostGraph.dump` lays it out (current versions packed in
        vertex order, the id table mapping external to internal ids), so a snapshot taken
        on the GPU restores on either backend. Nothing may be in flight."""
        cp, nv, ns = self.cp, int(self.meta[M_NV]), self.n_slots
        off, ln = self.off[:nv].get(), self.len[:nv].get()
        new_off = np.cumsum(ln, dtype=np.int64) - ln
        m = int(ln.sum())
        with self.stream:
            at = cp.asarray(ranges(off, ln.astype(np.int64)))
            pool = {f"p_{n}": getattr(self, n)[at].get(stream=self.stream) for n, _ in self._POOL}
            vert = {f"v_{n}": getattr(self, n)[:nv].get(stream=self.stream)
                    for n in ("vlabel", "vext", "valive", "vdeg")}
            slot_vid = self.slot_vid[:ns].get(stream=self.stream)
        self.stream.synchronize()
        meta = np.zeros(K.META_SIZE, np.int64)
        for word, value in ((K.NV, nv), (K.POOL_USED, m), (K.TICK, self.meta[M_TICK]),
                            (K.WATERMARK, self.meta[M_WATERMARK]), (K.IDCOUNT, ns),
                            (K.NEDGES, self.meta[M_NEDGES])):
            meta[word] = value
        known = self.ids.used != 0
        vals = np.zeros_like(self.ids.vals)
        vals[known] = slot_vid[self.ids.vals[known]]
        return {"meta": meta, "order": np.arange(nv, dtype=np.int32),
                "packed_end": np.int64(m), **vert, "v_seg_off": new_off, "v_seg_len": ln,
                "v_seg_cap": ln.copy(), "v_seg_batch": np.full(nv, -1, np.int64), **pool,
                "id_keys": self.ids.keys.copy(), "id_vals": vals,
                "id_used": self.ids.used.copy(), "id_count": np.int64(ns)}

    # -- updates --------------------------------------------------------------------------
    def stage(self, batch: UpdateBatch, inp: npt.NDArray[np.int32], at: int,
              new_ext: npt.NDArray[np.int64] | None = None, edges_only: bool = False) -> bool:
        """The batch's raw updates into input rows ``inp`` (op, slot x, slot y, label) from
        column ``at`` on, in one compiled pass; unseen ids get new slots. ``new_ext``: room
        for two ids an update, in pinned memory that nothing rewrites before the stream has
        copied it: a copy from pageable memory waits for the stream (the updater's, busy
        with the launches before: 0.6 ms of a 16,384 launch's staging). ``edges_only``: a
        batch with a vertex operation is refused (False), nothing staged."""
        n = len(batch)
        ids = self.ids
        ids.reserve(2 * n)
        new_ext = np.empty(2 * n, np.int64) if new_ext is None else new_ext
        k = stage_rows(ids.keys, ids.vals, ids.used, ids.direct, batch.op, batch.src,
                       batch.dst, batch.label, _VERTEX_OPS, self.n_slots, new_ext, inp, at,
                       edges_only)
        if k < 0:
            return False
        if k:
            if self.n_slots + k > self._scap:
                with self.stream:
                    self._grow_slots(2 * (self.n_slots + k))
            self.slot_ext[self.n_slots:self.n_slots + k].set(new_ext[:k], stream=self.stream)
            self.n_slots += k
            self.ids.count = self.n_slots
        return True

    def apply(self, batch: UpdateBatch) -> OpTable:
        """Resolve and install ``batch`` on the device; returns its primitive updates."""
        n = len(batch)
        buf = np.empty((4, n), np.int32)
        self.stage(batch, buf, 0)
        return self.resume(buf.ravel(), n)

    def resume(self, buf: npt.NDArray[np.int32], n: int, i: int = 0, n_out: int = 0,
               relayout: bool = True) -> OpTable:
        """Resolve raw updates ``i..n`` of ``buf`` (op, slot x, slot y, label; n each), the
        first ``n_out`` primitive updates being written already (the pipeline resumes a
        batch that stopped on a full pool or output); ``relayout``: call
        ``before_relayout`` before a compaction (off when the caller has synchronised)."""
        cp = self.cp
        self.meta[M_BATCH] += 1
        if self._ocap < n + 16:
            with self.stream:
                self._grow_out(2 * n + 16)
        stuck = -1
        with self.stream:
            dbuf = cp.asarray(buf)
            while True:
                e0 = self.stream.record()
                self._launch(dbuf, n, i, n_out)
                e1 = self.stream.record()
                e1.synchronize()
                self.kernel_seconds += cp.cuda.get_elapsed_time(e0, e1) / 1e3
                code = int(self.meta[M_CODE])
                i, n_out = int(self.meta[M_RESUME]), int(self.meta[M_NOUT])
                if code == DONE:
                    break
                if code == NEED_POOL:   # collected already and still short: one huge version
                    if relayout and self.before_relayout is not None:
                        self.before_relayout()
                    self.compact(grow=True, at_least=2 * self._pcap if i == stuck else 0)
                    stuck = i
                elif code == NEED_OUT:
                    self._grow_out(2 * self._ocap + int(cp.max(self.vdeg).get()) + 16)
                elif code == NEED_VERTEX:
                    self._grow_vertices(2 * self._vcap)
                elif code == FAULT:
                    raise fault_error(self.grid, self.barrier_timeout)
                else:  # pragma: no cover - the kernel writes only the codes above
                    raise BackendError(f"device updater returned code {code}")
        return self._ops(n_out)

    def _launch(self, dbuf: Any, n: int, i: int, n_out: int) -> None:
        args = self.resolver_args()
        own = ((np.int32(self.build_tiles), *args) if self.parallel
               else args[:-len(self._scratch())])
        self._apply((self.grid if self.parallel else 1,), (TILE if self.parallel else 32,), (
            np.int64(i), np.int64(n_out), np.int64(n), dbuf[:n], dbuf[n:2 * n],
            dbuf[2 * n:3 * n], dbuf[3 * n:], *own))

    def resolver_args(self) -> tuple[Any, ...]:
        """The resolver kernels' arguments after the batch's own (kernels/update.cu
        APPLY_ARGS): graph, updater state, output columns, meta, scratch. Valid until
        :attr:`generation` or :attr:`pool_flip` changes."""
        return (*self.pool, self.seg, self.vlabel, self.off, self.len, self.cap, self.vbatch,
                self.vdeg, self.valive, self.vslot, self.vext, self.vpub, self.slot_vid,
                self.slot_ext, np.int64(self._pcap), np.int64(self._vcap),
                *(getattr(self, "o_" + name) for name, _ in self._OUT), np.int64(self._ocap),
                self.touched, self.nbr, self.nbr_ext, self.order, self._meta_ptr,
                *self._scratch())

    def _ops(self, n: int) -> OpTable:
        cols = {name: getattr(self, "o_" + name)[:n].get(stream=self.stream)
                for name, _ in self._OUT}
        return OpTable(**cols)

    # -- collection -----------------------------------------------------------------------
    def compact(self, grow: bool = False, at_least: int = 0) -> None:
        """Drop entries no reader can see and pack the versions into a fresh pool (nothing
        may be in flight); with ``grow`` the pool grows to three times what stays if that
        leaves it over half full, as the host graph does, and to ``at_least``."""
        cp = self.cp
        nv = int(self.meta[M_NV])
        with self.stream:
            # what stays, at most
            total = int(self.len[:nv].sum(dtype=cp.int64).get()) if nv else 0
            cap = self._pcap
            if grow and 2 * total > cap:
                cap = 3 * total
            cap = max(cap, at_least)
            old = self.pool
            self._alloc_pool(max(cap, 16))
            self._pack(nv, old, np.int64(self.meta[M_WATERMARK]), None)
            self._compacted((1,), (1,), (self._meta_ptr, self._cwords))
        self.stream.synchronize()
        self.compactions += 1

    def compact_in_stream(self, capacity: int = 0) -> Any:
        """Compaction in stream order on the updater's stream, without the host waiting:
        every reader enqueued before (the caller makes the stream wait for them) has read
        the old pool. Packs into the spare pool (or a new one of ``capacity`` entries, if
        larger); the resolver after it reads the new fill from meta. Returns an event
        after it."""
        cap = max(self._pcap, capacity)
        old = self.pool
        fresh = self._spare is None or len(self._spare[0]) != cap
        with self.stream:
            if fresh:   # a smaller spare's last reader ran on this stream: freed first
                self._spare = None
                new = self._new_pool(cap)
                # allocated without a failure: launches captured for the other pool
                if cap > self._pcap or self._pools > 1:   # flip would read a freed pool
                    self.generation += 1
                self._pools = 1 if cap > self._pcap else 2
            else:
                new = self._spare
            # vertices past meta's count have no entries
            self._pack(self._vcap, old, np.int64(0), self._tiles["gw"][_W_WM:], new)
            self._compacted((1,), (1,), (self._meta_ptr, self._cwords))
            done = self.stream.record()
        self.pool = new
        self._spare = old if len(old[0]) == cap else None
        self._pcap = cap
        self.pool_flip ^= 1
        self.compactions += 1
        return done

    def _pack(self, nv: int, old: tuple[Any, ...], watermark: np.int64, wm_word: Any,
              new: tuple[Any, ...] | None = None) -> None:
        """compact_pool: vertices 0..nv-1 from ``old`` into ``new`` (default: the current
        pool), its fill counted in ``_cwords`` (compact_done publishes it); the watermark
        is ``wm_word``'s (a device word) if given."""
        new = new or self.pool
        blocks = max(1, min(4096, (nv + COMPACT_RANGE - 1) // COMPACT_RANGE))
        self._compact((blocks,), (COMPACT_RANGE,), (
            np.int64(nv), *old, *new, self.off, self.len, self.cap, self.seg,
            watermark, self._cwords, np.uint64(0) if wm_word is None else wm_word))

    # -- reads for checks -----------------------------------------------------------------
    def versions(self) -> list[npt.NDArray[np.int64]]:
        """Per internal vertex, its current version's entries that a reader after the
        watermark can see, as rows (key, elab, ct, dt): what matching can observe."""
        nv = int(self.meta[M_NV])
        off, ln = self.off[:nv].get(), self.len[:nv].get()
        cols = [getattr(self, n).get() for n, _ in self._POOL]
        return _visible(off, ln, cols, int(self.meta[M_WATERMARK]))

    def vertex_state(self) -> dict[str, npt.NDArray[np.generic]]:
        nv = int(self.meta[M_NV])
        return {n: getattr(self, n)[:nv].get() for n in ("vlabel", "vdeg", "valive", "vext")}


def _meta_word(i: int) -> property:
    """A read-only int attribute of the view: meta word ``i`` as the device last wrote it."""
    return property(lambda self: int(self.store.meta[i]))


class DeviceGraphView:
    """The engine's handle on a device-owned graph: what :class:`HostGraph` offers the
    engine and the service (apply, load, sizes, watermark, alive edges, labels, external
    ids), answered from the device. Per batch it costs one id-map pass and the updater's
    launch; everything else is read from the device only when asked (registration,
    static matching, listings, gauges)."""

    def __init__(self, store: DeviceUpdater) -> None:
        self.store = store
        #: a copy of the device's internal id -> external id (listings map rows back), for
        #: this many vertices (-1: read it again): internal ids are never reused, so the
        #: copy is current while the device has made no vertex since
        self._vext = np.zeros(1, np.int64)
        self._vext_nv = -1
        self.layout = 0

    # HostGraph's engine-facing surface -------------------------------------------------
    @property
    def before_relayout(self) -> Callable[[], None] | None:
        return self.store.before_relayout

    @before_relayout.setter
    def before_relayout(self, fn: Callable[[], None] | None) -> None:
        self.store.before_relayout = fn

    copy_on_write = True   # the device never writes a published version in place

    num_vertices = _meta_word(M_NV)
    num_edges = _meta_word(M_NEDGES)
    tick = _meta_word(M_TICK)
    pool_used = _meta_word(M_POOL_USED)
    garbage = _meta_word(M_GARBAGE)

    @property
    def reclaimed(self) -> int:
        return self.store.reclaimed

    def max_degree_bound(self) -> int:
        """Longest version ever built (an upper bound; sizes the kernel's rows)."""
        return int(self.store.meta[M_MAXLEN])

    def set_watermark(self, tick: int) -> None:
        self.store.set_watermark(tick)

    def compact(self) -> None:
        """Reclaim what no reader can see (after a drain: entries move)."""
        if self.store.before_relayout is not None:
            self.store.before_relayout()
        self.store.compact()

    @property
    def vlabel(self) -> npt.NDArray[np.int32]:
        return self.store.vlabel[: self.num_vertices].get()  # type: ignore[no-any-return]

    @property
    def valive(self) -> npt.NDArray[np.uint8]:
        return self.store.valive[: self.num_vertices].get()  # type: ignore[no-any-return]

    def load(self, vertex_ids: npt.NDArray[np.int64], vertex_labels: npt.NDArray[np.int32],
             src: npt.NDArray[np.int64], dst: npt.NDArray[np.int64],
             label: npt.NDArray[np.int32]) -> Any:
        stats = self.store.load(vertex_ids, vertex_labels, src, dst, label)
        self._vext_nv = -1
        return stats

    def dump(self) -> dict[str, npt.NDArray[np.generic]]:
        """:meth:`DeviceUpdater.dump` (nothing in flight: the engine reads every batch it
        submitted before a snapshot)."""
        return self.store.dump()

    def restore(self, arrays: dict[str, npt.NDArray[np.generic]]) -> None:
        self.store.restore(arrays)
        self._vext_nv = -1

    def apply(self, batch: UpdateBatch) -> OpTable:
        return self.store.apply(batch)  # type: ignore[no-any-return]

    @property
    def vext(self) -> npt.NDArray[np.int64]:
        """Internal id -> external id, read from the device when it has made vertices
        since the last read (listings only, which come after a drain; the pipeline's
        results carry their external ids already)."""
        nv = self.num_vertices
        if nv != self._vext_nv:
            have = self._vext_nv
            if 0 < have < nv:   # only the new ids: the others never change
                if nv > len(self._vext):
                    grown = np.zeros(max(nv, 2 * len(self._vext)), np.int64)
                    grown[:have] = self._vext[:have]
                    self._vext = grown
                self._vext[have:nv] = self.store.vext[have:nv].get()
            else:
                self._vext = self.store.vext[: max(1, nv)].get()
            self._vext_nv = nv
        return self._vext

    def alive_edges(self) -> tuple[npt.NDArray[np.int32], npt.NDArray[np.int32],
                                   npt.NDArray[np.int32]]:
        """Directed (a, b, label) for every alive edge, both orientations (one read-back
        per column; registration and checks only)."""
        nv, used, st = self.num_vertices, self.pool_used, self.store
        cols = [getattr(st, c)[:used].get() for c in ("key", "elab", "ct", "dt")]
        return visible_edges(st.off[:nv].get(), st.len[:nv].get(), *cols)

    def endpoint_facts(self, ids: npt.NDArray[np.int32]) -> tuple[npt.NDArray[np.int32],
                                                                 npt.NDArray[np.int32]]:
        """Labels and current version lengths of ``ids`` (one gather, one read-back)."""
        cp = self.store.cp
        d = cp.asarray(ids)
        both = cp.concatenate([self.store.vlabel[d], self.store.len[d]]).get()
        return both[: len(ids)], both[len(ids):]


def host_versions(g: HostGraph) -> list[npt.NDArray[np.int64]]:
    """:meth:`DeviceUpdater.versions` of a host graph (the parity test's reference), its
    deferred edges merged first."""
    g.merge_deferred()
    nv = g.num_vertices
    return _visible(g.seg_off[:nv], g.seg_len[:nv], [g.key, g.elab, g.ct, g.dt],
                    int(g.meta[K.WATERMARK]))


def _visible(off: npt.NDArray[np.int64], ln: npt.NDArray[np.int32],
             cols: list[npt.NDArray[np.generic]], watermark: int) -> list[npt.NDArray[np.int64]]:
    key, elab, ct, dt = cols
    out = []
    for v in range(len(off)):
        s = slice(int(off[v]), int(off[v]) + int(ln[v]))
        rows = np.stack([key[s], elab[s].astype(np.int64), ct[s], dt[s]], axis=1)
        out.append(rows[rows[:, 3] > watermark])
    return out


