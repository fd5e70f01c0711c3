"""The GPU executor: warp-per-unit backtracking over the device multi-version graph.

Work units are (task, plan, level-2 slice); a heavy update (large level-2 candidate
set) is cut into many slices so its search spreads over warps, and units are handed to
idle warps by one atomic counter, heaviest first. Counting and listing are two
launches, as on the CPU: counts are exact, then each listed task gets exactly
``min(count, cap)`` rows.

Inter-batch parallelism (DCSM): ``submit`` installs nothing and waits for nothing; each
batch runs on one of ``depth`` streams against its own ticks while the host resolves and
installs the next one, so a straggler in one batch no longer idles the GPU.

Out-of-core (GCSM): with ``graph_budget_bytes`` below the pool's size the pool stays in
mapped host memory; each batch then gets a device cache of the neighbour arrays it is
expected to read most (random-walk estimate, or the degree / no-cache baselines), filled
on the host and sent in one copy on the batch's own stream, and the kernel reads the rest
over PCIe. Results are identical in both modes.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from .._executor import (
    EXECUTORS,
    CachePolicy,
    Done,
    ExecutorOptions,
    IoStats,
    MatchOutput,
    MatchTasks,
    Ticket,
    live_units,
)
from .._types import MAX_QUERY_VERTICES, UpdateBatch
from ..exceptions import BackendError
from ..graph._host import HostGraph, OpTable
from ..ooc._cache import DeviceCache, Loaded, by_value, fit
from ..ooc._estimate import Estimate, WalkConfig, estimate_reads
from ..planning._planner import PlanSet, level2_sources
from ._device_graph import DeviceGraph
from ._partition import Partition, partition
from ._pipeline import BatchTicket, DevicePipeline, SplitTicket
from ._updater import DeviceGraphView, DeviceUpdater
from .kernels import QUEUE_COUNTERS, WARPS_PER_BLOCK, cupy_or_raise, kernel, sm_count

__all__ = ["GpuConfig", "GpuExecutor"]

M = MAX_QUERY_VERTICES


@dataclass(frozen=True, slots=True)
class GpuConfig:
    #: device memory for the warps' candidate rows (0: a quarter of the free memory, at
    #: most 8 GiB); fewer warps run where rows are long (hubs)
    stack_bytes: int = 0
    #: resident warps per SM to aim for
    warps_per_sm: int = 32
    #: level-2 candidates per work unit (estimated); smaller = finer load balance
    slice_size: int = 4
    max_slices: int = 4096
    #: batches matched at once (each on its own stream with its share of stack_bytes)
    depth: int = 4
    #: a work unit running longer than this (microseconds) gives the rest of its
    #: shallowest unfinished level away as sub-tasks (T-DFS timeout splitting; 0: never)
    split_us: float = 10.0
    #: sub-task records per batch in flight (64 bytes each); a full queue stops splitting
    queue_records: int = 1 << 15
    #: warps per SM a launch gets at least, however few its units, and that stay to take
    #: the sub-tasks heavy units split off once the units run out (the rest exit then, so
    #: that other batches' kernels get the SMs)
    min_warps_per_sm: int = 8
    #: device bytes for neighbour arrays (0: no limit). A pool larger than this stays in
    #: host memory and batches read it through caches of budget / cache_slots bytes
    graph_budget_bytes: int = 0
    #: caches the batches in flight take turns on (1..depth): a batch's copy into a cache
    #: waits for the count kernel of the cache's previous batch. Fewer, larger caches
    #: save more host reads (Enron, b=64, exact model: 6.5x fewer bytes with one cache,
    #: 2.6x with one per batch in flight) at the cost of serialising copy and kernel
    cache_slots: int = 1
    #: what that cache holds: estimated most-read arrays, highest degrees, or nothing
    cache: CachePolicy = CachePolicy.WALK
    walk: WalkConfig = WalkConfig()
    #: the device owns the graph: raw updates are resolved and versions built on the GPU
    #: (kernels/update.cu), so no host updater or install runs per batch. Off, or with a
    #: graph budget (out-of-core), the host updater resolves and the device mirrors it
    #: (off here for the library's users; ``csm serve`` turns it on: CSM_GPU_DEVICE_GRAPH)
    device_graph: bool = False
    #: with a device-owned graph, count-only batches go through the device pipeline
    #: (gpu/cuda/_pipeline.py: captured launches); this many launches are in flight at most
    pipeline_depth: int = 8
    #: while this many launches still run on the device, submitted batches gather into the
    #: next launch (group commit; each batch keeps its own results). 0: they gather until
    #: one of them is read or the launch is full
    pipeline_busy: int = 2
    #: seconds the device resolver's blocks wait at one of their barriers before the
    #: launch fails (they must all run at once; where they cannot, e.g. under an MPS share
    #: smaller than the GPU, a clear error instead of a hang; 0: no limit)
    resolver_timeout_s: float = 30.0
    #: SMs matching leaves free (its lanes in a green context, gpu/cuda/_partition.py;
    #: rounded up to the device's granule, 8 on sm_90): a small launch's resolver then
    #: never waits for matching to leave an SM, a large one still takes every SM. 0:
    #: matching on every SM (``csm serve``: CSM_GPU_FRONT_SMS)
    front_sms: int = 0


class _Slot:
    """One batch in flight: its stream, its share of the candidate rows, its counter."""

    def __init__(self, cp: Any, stack: Any, queue_records: int,
                 part: Partition | None) -> None:
        self.stream = (part.match_stream() if part is not None
                       else cp.cuda.Stream(non_blocking=True))
        self.stack = stack
        with self.stream:
            # next unit, queue head / tail, pushed, done, finished, consumers: a line each
            self.counter = cp.zeros(QUEUE_COUNTERS, cp.uint32)
            self.queue = cp.zeros(queue_records * 16, cp.int32)
        self.epoch = 0      # records of earlier launches never carry the current epoch
        self.ticket: _GpuTicket | None = None


@dataclass(slots=True)
class _OutOfCore:
    """One batch's cache and what it cost (host-resident pool only)."""

    cache: DeviceCache
    loaded: Loaded
    estimate: Estimate | None
    events: tuple[Any, Any, Any]    # before the copy, before the kernel, after it

    def kernel_args(self) -> tuple[Any, ...]:
        return (self.cache.device, np.int32(self.loaded.vertices), np.int64(self.loaded.entries))


class _GpuTicket:
    def __init__(self, ex: GpuExecutor, slot: _Slot, graph: HostGraph, plans: PlanSet,
                 tasks: MatchTasks, stride: int, keep: tuple[Any, ...], host_counts: Any,
                 event: Any, ooc: _OutOfCore | None) -> None:
        self.ex, self.slot, self.graph, self.plans, self.tasks = ex, slot, graph, plans, tasks
        self.stride = stride
        self.keep = keep              # device buffers the kernel reads: alive until done
        self.host_counts = host_counts   # counts of the n tasks, then 3 io words
        self.event = event
        self.ooc = ooc
        self.out: MatchOutput | None = None

    @property
    def finished(self) -> bool:
        return self.out is not None

    @property
    def ready(self) -> bool:
        return self.out is not None or bool(self.event.done)

    def sync(self) -> None:
        self.event.synchronize()

    def wait(self) -> MatchOutput:
        if self.out is None:
            self.out = self.ex._finish(self)
            if self.slot.ticket is self:   # the slots are the process's: a finished ticket
                self.slot.ticket = None    # left there kept its executor, graph and pools
        return self.out


class GpuExecutor:
    name = "gpu"
    reads_during_updates = True    # kernels of earlier batches run while the next applies

    def __init__(self, config: GpuConfig | None = None) -> None:
        self.cp = cp = cupy_or_raise()
        import cupyx

        self._pinned = cupyx.empty_pinned
        self.config = c = config or GpuConfig()
        #: the match lanes' SMs, the rest left free for the updater (None: all for both)
        self.partition = (partition(int(cp.cuda.Device().id), c.front_sms)
                          if c.front_sms else None)
        # the highest priority (CUDA clamps the number): resolving the next batch is on
        # the critical path, matching of earlier batches on the slot streams is not
        self.update_stream = cp.cuda.Stream(non_blocking=True, priority=-(1 << 10))
        if c.resolver_timeout_s < 0:
            raise BackendError(f"resolver_timeout_s must be >= 0 (0: no limit), not "
                               f"{c.resolver_timeout_s}")
        if not 1 <= c.cache_slots <= c.depth:
            raise BackendError(f"cache_slots must be 1..depth ({c.depth}), not {c.cache_slots}")
        #: the graph the kernels read: device-owned (updated on the GPU) or a host mirror
        self.graph: DeviceGraph | DeviceUpdater
        #: with a device-owned graph, the engine's handle on it (else the engine keeps a
        #: HostGraph and this executor mirrors it)
        self.owned_graph: DeviceGraphView | None = None
        self._pipeline: DevicePipeline | None = None
        if c.device_graph and not c.graph_budget_bytes:
            self.graph = DeviceUpdater(stream=self.update_stream,
                                       timeout_s=c.resolver_timeout_s)
            self.owned_graph = DeviceGraphView(self.graph)
        else:
            self.graph = DeviceGraph(self.update_stream, c.graph_budget_bytes)
        self._caches: list[DeviceCache] = []
        self._next_cache = 0
        self._by_degree: tuple[int, npt.NDArray[np.int64]] = (-1, np.zeros(0, np.int64))
        self._match = kernel("match", "match_units")
        #: the SMs match launches run on
        self.sm_count = self.partition.match_sms if self.partition is not None else sm_count()
        self._slots = _slot_pool(c.stack_bytes, c.depth, c.queue_records, self.partition)
        khz = int(cp.cuda.Device().attributes["ClockRate"])
        self._split_cycles = int(c.split_us * khz / 1000)
        self._next_slot = 0
        #: host-path tickets may be in flight (submit_batch checks the slots only then)
        self._host_tickets = False
        self._installed: Any = None
        self._plans_key: PlanSet | None = None
        self._plans_dev: tuple[Any, ...] = ()
        if self.owned_graph is not None:   # its match lanes are the slots above
            self._pipeline = DevicePipeline(self, c.pipeline_depth, c.pipeline_busy)

    # -- graph ------------------------------------------------------------------
    def _in_flight(self) -> list[_GpuTicket]:
        """This executor's tickets still running (the slots are shared by the process)."""
        return [s.ticket for s in self._slots
                if s.ticket is not None and s.ticket.ex is self and not s.ticket.finished]

    def drain(self) -> None:
        if self._pipeline is not None:
            self._pipeline.drain()
        for t in self._in_flight():
            t.wait()

    # -- the device pipeline (device-owned graph, count-only batches) -------------------------
    @property
    def pipelined(self) -> bool:
        """Raw batches can go to :meth:`submit_batch` (the device owns the graph)."""
        return self._pipeline is not None

    @property
    def batches_in_flight(self) -> int:
        return self._pipeline.in_flight if self._pipeline is not None else 0

    def prepare_batches(self, plans: PlanSet, scale: npt.NDArray[np.int64]) -> None:
        """Set the pipeline up for ``plans`` and the queries' ``scale`` (called when the
        standing queries change)."""
        if self._pipeline is not None:
            self._pipeline.prepare(plans, scale)

    def submit_batch(self, batch: UpdateBatch, plans: PlanSet,
                     scale: npt.NDArray[np.int64]) -> BatchTicket | SplitTicket | None:
        """Resolve and match a raw batch of edge updates on the device (count mode, one
        task per applied edge update and query of ``plans``, counts times num // den of
        ``scale``'s two rows); returns at once. None, having changed nothing, for a batch
        with vertex operations (the host path takes it)."""
        if self._pipeline is None:
            raise BackendError("submit_batch needs a device-owned graph (device_graph=True)")
        if self._host_tickets:   # matching of host-path batches may read what this reclaims
            if self._in_flight():
                self.drain()
            self._host_tickets = False
        return self._pipeline.submit(batch, plans, scale)

    @property
    def out_of_core(self) -> bool:
        """The pool lives in host memory (the graph outgrew ``graph_budget_bytes``)."""
        return self.graph.host

    def device_memory(self) -> tuple[int, int]:
        """CuPy's pool (graph mirror, stacks, outputs) against the device's memory."""
        return (int(self.cp.get_default_memory_pool().total_bytes()),
                int(self.cp.cuda.runtime.memGetInfo()[1]))

    def on_update(self, graph: HostGraph, ops: OpTable) -> None:
        busy = self._in_flight()
        if isinstance(self.graph, DeviceUpdater):   # the batch is on the device already
            # as below: versions a kernel in flight may meet must fit its rows
            if busy and graph.max_degree_bound() + 1 > min(t.stride for t in busy):
                self.drain()
            self._installed = self.update_stream.record()
            return
        # a kernel in flight may read the versions installed now: they must fit its rows,
        # and a whole re-copy (new arrays) must wait until nothing reads the old ones
        if busy and (self.graph.needs_full(graph)
                     or graph.max_degree_bound() + 1 > min(t.stride for t in busy)):
            self.drain()
        self.graph.sync(graph, ops)
        self._installed = self.update_stream.record()

    # -- plans and work units ---------------------------------------------------------
    def _upload_plans(self, plans: PlanSet) -> None:
        if self._plans_key is plans:
            return
        cp = self.cp
        with self.update_stream:
            self._plans_dev = (cp.asarray(plans.table), cp.asarray(plans.nb_level),
                               cp.asarray(plans.nb_label))
        self._installed = self.update_stream.record()
        self._plans_key = plans

    def _units(self, graph: HostGraph, plans: PlanSet, tasks: MatchTasks,
               only: npt.NDArray[np.bool_] | None = None) -> npt.NDArray[np.int32]:
        """[4, P + 1] int32 per live (task, plan) pair, heaviest slices first: task, plan,
        first slice, slices; column P holds the total slice count in row 2. The kernel
        expands pairs into level-2 slices itself (a binary search over row 2), so the host
        never materialises or sorts slices."""
        if isinstance(graph, DeviceGraphView):   # the endpoints' facts, read once
            graph, tasks = _endpoints(graph, tasks)
        owner, plan = live_units(graph, plans, tasks, only)
        la = graph.seg_len[tasks.a[owner]].astype(np.int64)
        lb = graph.seg_len[tasks.b[owner]].astype(np.int64)
        l2 = level2_sources(plans)[plan]
        big = np.int64(1) << 40
        est = np.minimum(np.where(l2 & 1, la, big), np.where(l2 & 2, lb, big))
        deep = plans.n[plan] >= 4
        c = self.config
        nsl = np.where(deep, np.clip((est + c.slice_size - 1) // c.slice_size, 1, c.max_slices),
                       1)
        heavy = np.argsort(-((la * lb) // nsl), kind="stable")
        k = nsl[heavy]
        out = np.empty((4, len(owner) + 1), np.int32)
        out[0, :-1] = owner[heavy]
        out[1, :-1] = plan[heavy]
        out[2, 0] = 0
        np.cumsum(k, out=out[2, 1:])
        out[3, :-1] = k
        out[[0, 1, 3], -1] = 0
        return out

    def warp_limits(self, split: int, stack: int, per_warp: int,
                    stride: int) -> tuple[int, int]:
        """Warps a match launch keeps (to take split-off sub-tasks) and may have at most:
        resident warps per SM, and rows of ``per_warp`` int64s each in ``stack``."""
        c = self.config
        least = self.sm_count * c.min_warps_per_sm if split else 1
        most = min(self.sm_count * c.warps_per_sm, stack // per_warp)
        if most < 1:
            raise BackendError(f"a neighbour array of {stride:,} entries needs more than the "
                               f"{stack * 8:,} stack bytes a match launch has")
        return least, most

    @staticmethod
    def _stride(graph: HostGraph) -> int:
        """Row length: the longest version now, with headroom for versions that later
        batches install while this kernel still runs (more forces a drain first)."""
        d = graph.max_degree_bound()
        return (d + max(64, d // 4) + 31) // 32 * 32

    def _launch(self, slot: _Slot, stride: int, levels: int, plans_dev: tuple[Any, ...],
                units: npt.NDArray[np.int32], tasks: MatchTasks, counts: Any,
                ooc: _OutOfCore | None, rows: Any = None, row_off: Any = None,
                want: Any = None, slots: Any = None, reads: Any = None) -> tuple[Any, ...]:
        """Enqueue one kernel on the slot's stream. ``counts`` holds the n task counts and
        then the three io words (host bytes, cache hits, misses)."""
        cp = self.cp
        npairs = units.shape[1] - 1
        nu = int(units[2, -1])   # slices
        per_warp = (levels + 1) * stride
        split = self._split_cycles if reads is None else 0   # exact debug access counts
        least, most = self.warp_limits(split, len(slot.stack), per_warp, stride)
        if any(s.ticket is not None and not s.ticket.ready for s in self._slots if s is not slot):
            # other batches in flight: leave them room to start
            most = min(most, self.sm_count * self.config.warps_per_sm // 2)
        warps = min(most, max(nu, least))
        ints = np.concatenate([units.ravel(), tasks.a, tasks.b, tasks.label]).astype(np.int32)
        n, w = len(tasks), npairs + 1
        du = cp.asarray(ints)
        dk = cp.asarray(tasks.tick)
        slot.counter.fill(0)
        slot.epoch += 1
        blocks = (warps + WARPS_PER_BLOCK - 1) // WARPS_PER_BLOCK
        table, nb_level, nb_label = plans_dev
        g = self.graph
        null = np.uint64(0)
        cache = ooc.kernel_args() if ooc is not None else (null, np.int32(0), np.int64(0))
        opt = lambda x: x if x is not None else null  # noqa: E731
        self._match(
            (blocks,), (32 * WARPS_PER_BLOCK,),
            (du[0:w], du[w:2 * w], du[2 * w:3 * w], du[3 * w:4 * w], np.int32(npairs),
             np.int32(nu), du[4 * w:4 * w + n], du[4 * w + n:4 * w + 2 * n],
             du[4 * w + 2 * n:4 * w + 3 * n], dk, table, nb_level, nb_label,
             *g.arrays(), np.int32(g.host), *cache,
             slot.stack, np.int64(stride), np.int64(levels), np.int64(warps),
             slot.queue, np.int32(len(slot.queue) // 16), np.int32(slot.epoch),
             np.int64(split), slot.counter, np.int32(least), counts[:n], opt(rows),
             opt(row_off), opt(want), opt(slots), counts[n:], opt(reads)))
        return du, dk

    # -- out-of-core ------------------------------------------------------------------
    def _cache_for(self, slot: _Slot) -> DeviceCache:
        """The slot's own cache (one per batch in flight: a listing launched later still
        finds its batch's snapshot) or the next shared one in turn."""
        c = self.config
        if not self._caches:
            self._caches = [DeviceCache(self.cp, c.graph_budget_bytes // c.cache_slots)
                            for _ in range(c.cache_slots)]
        if c.cache_slots == c.depth:
            return self._caches[self._slots.index(slot)]
        cache = self._caches[self._next_cache]
        self._next_cache = (self._next_cache + 1) % len(self._caches)
        return cache

    def _choose(self, graph: HostGraph, plans: PlanSet, tasks: MatchTasks,
                nbytes: int) -> tuple[npt.NDArray[np.int64], Estimate | None]:
        """The vertices whose arrays this batch's cache holds (they fit ``nbytes``)."""
        c = self.config
        seg_len = graph.seg_len
        if c.cache == CachePolicy.NONE:
            return np.zeros(0, np.int64), None
        if c.cache == CachePolicy.DEGREE:
            if self._by_degree[0] != graph.layout:   # ranked once per layout
                nv = graph.num_vertices
                self._by_degree = (graph.layout,
                                   np.argsort(-seg_len[:nv], kind="stable").astype(np.int64))
            order = self._by_degree[1]
            return order[:fit(order, seg_len, nbytes)], None
        keep = lambda v, r: by_value(v, r, seg_len, nbytes)  # noqa: E731
        est = estimate_reads(graph, plans, tasks, c.walk, keep)
        return est.vertices[keep(est.vertices, est.reads)], est

    def _out_of_core(self, slot: _Slot, graph: HostGraph, plans: PlanSet,
                     tasks: MatchTasks) -> _OutOfCore:
        """Choose and pack this batch's cache, enqueue its copy (call under slot.stream)."""
        cache = self._cache_for(slot)
        verts, est = self._choose(graph, plans, tasks, cache.nbytes)
        cache.claim(slot.stream)
        e0 = slot.stream.record()
        loaded = cache.load(graph, verts, slot.stream)
        e1 = slot.stream.record()
        return _OutOfCore(cache, loaded, est, (e0, e1, None))

    def read_counts(self, graph: HostGraph, plans: PlanSet,
                    tasks: MatchTasks) -> npt.NDArray[np.int64]:
        """Debug: how often the count kernel reads each vertex's neighbour array for
        ``tasks`` (once per level-2 slice set; the estimator's ground truth on the device)."""
        cp = self.cp
        self.drain()
        self._upload_plans(plans)
        slot = self._slots[self._next_slot]
        if slot.ticket is not None:
            slot.ticket.wait()
        n = len(tasks)
        reads = cp.zeros(max(1, graph.num_vertices), cp.uint32)
        units = self._units(graph, plans, tasks)
        with slot.stream:
            slot.stream.wait_event(self.update_stream.record())
            counts = cp.zeros(n + 3, cp.uint64)
            if units[2, -1]:
                self._launch(slot, self._stride(graph), int(plans.n.max()), self._plans_dev,
                             units, tasks, counts, None, reads=reads)
            out = reads.get(stream=slot.stream)
        slot.stream.synchronize()
        return out[:graph.num_vertices].astype(np.int64)

    # -- matching ------------------------------------------------------------------------
    def submit(self, graph: HostGraph, plans: PlanSet, tasks: MatchTasks) -> Ticket:
        cp = self.cp
        n = len(tasks)
        if n == 0:
            return Done(MatchOutput(np.zeros(0, np.int64), np.zeros(0, np.int64),
                                    np.zeros(1, np.int64), np.zeros((0, M), np.int32)))
        self._upload_plans(plans)
        slot = self._slots[self._next_slot]
        self._next_slot = (self._next_slot + 1) % len(self._slots)
        if slot.ticket is not None:
            slot.ticket.wait()
        self._host_tickets = True
        stride = self._stride(graph)
        units = self._units(graph, plans, tasks)
        ooc = None
        with slot.stream:
            if self._installed is not None:
                slot.stream.wait_event(self._installed)
            if self.graph.host and units[2, -1]:
                ooc = self._out_of_core(slot, graph, plans, tasks)
            dcounts = cp.zeros(n + 3, cp.uint64)
            keep: tuple[Any, ...] = (dcounts, *self._plans_dev, *self.graph.arrays())
            if units[2, -1]:
                keep += self._launch(slot, stride, int(plans.n.max()), self._plans_dev, units,
                                     tasks, dcounts, ooc)
            if ooc is not None:
                ooc.events = (ooc.events[0], ooc.events[1], slot.stream.record())
                ooc.cache.release(ooc.events[2])
            host = self._pinned(n + 3, np.uint64)
            dcounts.get(stream=slot.stream, out=host, blocking=False)
            event = slot.stream.record()
        slot.ticket = _GpuTicket(self, slot, graph, plans, tasks, stride, keep, host, event,
                                 ooc)
        return slot.ticket

    def _finish(self, t: _GpuTicket) -> MatchOutput:
        cp = self.cp
        tasks, n = t.tasks, len(t.tasks)
        t.event.synchronize()
        counts = np.asarray(t.host_counts[:n]).astype(np.int64)
        io = np.asarray(t.host_counts[n:]).astype(np.int64)
        listed = np.where(tasks.cap >= 0, np.minimum(counts, np.maximum(tasks.cap, 0)), 0)
        row_off = np.zeros(n + 1, np.int64)
        np.cumsum(listed, out=row_off[1:])
        total = int(row_off[-1])
        rows = np.zeros((total, M), np.int32)
        list_seconds = 0.0
        if total:
            lunits = self._units(t.graph, t.plans, tasks, only=listed > 0)
            # a shared cache may hold a later batch's snapshot by now: list from host memory
            ooc = t.ooc if self.config.cache_slots == self.config.depth else None
            with t.slot.stream:
                e0 = t.slot.stream.record()
                drows = cp.zeros((total, M), cp.int32)
                dcounts = t.keep[0]
                dcounts[n:].fill(0)
                self._launch(t.slot, self._stride(t.graph), int(t.plans.n.max()), t.keep[1:4],
                             lunits, tasks, dcounts, ooc, drows,
                             cp.asarray(row_off[:-1]), cp.asarray(listed),
                             cp.zeros(n, cp.uint64))
                e1 = t.slot.stream.record()
                rows = drows.get(stream=t.slot.stream)
                io += dcounts[n:].get(stream=t.slot.stream).astype(np.int64)
            t.slot.stream.synchronize()
            list_seconds = cp.cuda.get_elapsed_time(e0, e1) / 1e3
        t.keep = ()
        return MatchOutput(counts, listed, row_off, rows, _io_stats(t.ooc, io, list_seconds))


def _io_stats(ooc: _OutOfCore | None, io: npt.NDArray[np.int64],
              list_seconds: float) -> IoStats | None:
    if ooc is None:
        return None
    cp = cupy_or_raise()
    e0, e1, e2 = ooc.events
    est = ooc.estimate
    return IoStats(host_bytes=int(io[0]), cache_hits=int(io[1]), cache_misses=int(io[2]),
                   cached_vertices=ooc.loaded.vertices, cache_bytes=ooc.loaded.nbytes,
                   estimate_seconds=est.seconds if est is not None else 0.0,
                   pack_seconds=ooc.loaded.pack_seconds,
                   copy_seconds=cp.cuda.get_elapsed_time(e0, e1) / 1e3,
                   kernel_seconds=cp.cuda.get_elapsed_time(e1, e2) / 1e3 + list_seconds,
                   walks=est.walks if est is not None else 0)


@dataclass(frozen=True, slots=True)
class _Endpoints:
    """Labels and version lengths of a batch's task endpoints, indexed 0..2n-1."""

    vlabel: npt.NDArray[np.int32]
    seg_len: npt.NDArray[np.int32]


def _endpoints(view: DeviceGraphView, tasks: MatchTasks) -> tuple[_Endpoints, MatchTasks]:
    """The live-root filter and the slice sizes read labels and lengths of the task
    endpoints only: fetch those from the device and renumber the endpoints by rank, which
    keeps their order (the level-1 symmetry condition compares the two ids)."""
    n = len(tasks)
    uniq, rank = np.unique(np.concatenate([tasks.a, tasks.b]), return_inverse=True)
    lab, ln = view.endpoint_facts(uniq.astype(np.int32))
    rank = rank.astype(np.int32)
    local = MatchTasks(a=rank[:n], b=rank[n:], label=tasks.label, tick=tasks.tick,
                       plan_lo=tasks.plan_lo, plan_hi=tasks.plan_hi, cap=tasks.cap)
    return _Endpoints(lab, ln), local


@functools.cache
def _slot_pool(stack_bytes: int, depth: int, queue_records: int,
               part: Partition | None) -> list[_Slot]:
    """The streams and candidate rows of batches in flight, one pool per process: every
    executor takes turns on the same slots, and a slot's next user first waits for its
    ticket, so no two kernels ever share rows. ``stack_bytes`` 0: a quarter of the device
    memory free at the first call, at most 8 GiB (sized once, not per executor: keyed on
    the free memory, each executor made while others held memory added a pool)."""
    cp = cupy_or_raise()
    nbytes = stack_bytes or min(8 << 30, cp.cuda.runtime.memGetInfo()[0] // 4)
    stack = cp.empty(nbytes // 8, np.int64)
    share = len(stack) // depth
    return [_Slot(cp, stack[i * share:(i + 1) * share], queue_records, part)
            for i in range(depth)]


def _factory(options: ExecutorOptions) -> GpuExecutor:
    return GpuExecutor(GpuConfig(graph_budget_bytes=options.graph_budget_bytes,
                                 cache=CachePolicy(options.cache),
                                 device_graph=options.device_graph,
                                 front_sms=options.front_sms))


EXECUTORS["gpu"] = _factory
