"""The device pipeline: one batch = two CUDA-graph launches, no host work in between.

The host interns the batch's ids (compiled, O(b)), writes the raw updates into the
batch's control block (mapped pinned memory) and launches the graphs captured for that
block (kernels/update.cu, kernels/match.cu); the launch's result region goes into the
control block after its front is launched (apply_step waits for it at its end):

    on the updater's stream (high priority; batches resolve in order)
    apply_step    resolve the updates, build and publish new versions (watermark: the
                  tick before the oldest batch any match lane may still be matching)
    build_units   tasks and live (task, plan) pairs with their level-2 slices, into the
                  batch's match lane; the primitive updates' columns into the launch's
                  result region (pinned host memory that becomes the result: _arena.py)
    on the batch's match lane (one of the executor's slot streams, with its rows)
    match_step    warps take units and T-DFS sub-tasks (counts per task); the warp that
                  finishes a query's last item writes that query's signed, scaled counts
                  into the result region and the launch's sequence number into the query's
                  ready word (a block's ``ready``, mapped): per-query delivery (a query
                  without units is made ready before it, by ready_idle)
    collect_step  the block's sequence number into the control block

So batch k's matching runs beside the resolving of k+1 and the matching of the batches
on the other lanes: at small b one batch's matching leaves most of the GPU idle. A lane's
next batch resolves only after the lane's previous one has matched (its unit buffers are
reused). Up to ``depth`` batches are in flight; reading a result needs no copy: its
columns are the region's, and the host only picks out the applied updates and the tally. Once the
pool is half full, it is compacted on the updater's stream between two launches, after
every lane's work so far (the host does not wait; two pools alternate, each with its
captured graphs). Growth of other device arrays re-captures the graphs before the next
launch, growth of the longest version (the row stride) the match lanes' part of them. A
batch that stops on a full pool (or output, or vertex array) makes every later batch in
flight skip; reading it finishes it on the host path (compaction or growth, resumed
resolve, host-built units) and launches the skipped ones again, so results stay exact
and in order.
"""

from __future__ import annotations

import dataclasses
import threading
from collections import deque
from typing import TYPE_CHECKING, Any, NamedTuple

import numpy as np
import numpy.typing as npt

from .._executor import edge_tasks
from .._records import positional
from .._result_columns import result_columns
from .._types import UpdateBatch, UpdateOp
from ..exceptions import BackendError
from ..graph._host import OpTable
from ..planning._planner import PlanSet, level2_sources
from ._arena import Claim, Region, shared_arena
from ._device_graph import device_pointer, mapped_zeros
from ._host_columns import finish_launch, insert_multiplicity, row_numbers, zero_subs
from ._updater import (
    DONE,
    FAULT,
    M_GARBAGE,
    M_MAXLEN,
    M_POOL_USED,
    DeviceGraphView,
    DeviceUpdater,
    fault_error,
)
from .kernels import (
    BUILD_TILES,
    QUERY_WORDS,
    QUEUE_COUNTERS,
    TILE,
    UPDATES_PER_BLOCK,
    WARPS_PER_BLOCK,
    kernel,
)

if TYPE_CHECKING:
    from ._executor import GpuExecutor

__all__ = ["BatchColumns", "BatchTicket", "DevicePipeline", "SplitTicket"]

# control block words and device words: must equal kernels/update.cu
(C_N, C_HOLD, C_SEQ, C_CODE, C_RESUME, C_NOUT, C_NTASK, C_NPAIRS, C_NUNITS, C_TICK0,
 C_TICK1, C_MAXLEN, C_DONE, C_POOL0, C_POOL1, C_RBASE, C_RROWS, C_RROW0, C_RSEQ) = range(19)
C_HDR = 24
(D_PAIRS, D_UNITS, D_EPOCH, D_STALL, D_NOUT, D_SEQ_LO, D_SEQ_HI, D_NTASK, D_RB_LO, D_RB_HI,
 D_RROWS, D_RROW0, D_SIZE) = range(13)
SKIPPED = 4
_NO_HOLD = np.iinfo(np.int64).max
_FREE_LANE = 1 << 62   # a lane's tick word while nothing of it is in flight
#: updates a launch holds (set up at registration): a larger batch is split into
#: consecutive launches, read back as one (so no batch size makes the pipeline drain and
#: allocate again). Since results need no host read (result regions), one big launch beats
#: parts whose reads overlapped the next part's resolve: one-batch Enron (18,383 updates,
#: same H100, two rounds) q0 1.42-1.45 ms at 8,192, 1.25-1.31 at 16,384, 1.24-1.30 at 32,768;
#: q7 15.9 / 15.0 / 14.1 ms
LAUNCH_CAP = 32768


class BatchColumns(NamedTuple):
    """A pipelined batch's result columns, as the engine's BatchResult takes them."""

    ops: OpTable
    applied: npt.NDArray[np.int64]   # indices of the applied edge updates
    counts: npt.NDArray[np.int64]    # (updates, queries): signed, scaled
    sub: npt.NDArray[np.int32]
    tally: list[int]                 # applied, ignored, rejected, created, destroyed


#: a split batch's part once its rows are in the batch's columns (SplitTicket reads them)
_PLACED = BatchColumns(OpTable(*(np.zeros(0, np.int64) for _ in dataclasses.fields(OpTable))),
                       np.zeros(0, np.int64), np.zeros((0, 0), np.int64), np.zeros(0, np.int32),
                       [0] * 5)


class BatchTicket:
    """One submitted batch: rows lo..lo+len(batch)-1 of its launch (a launch carries
    every batch submitted while the device was busy); ``wait`` returns its columns (the
    counts scaled on the device by the pipeline's scale). ``part``: it is a part of a split
    batch, whose region holds the rows."""

    def __init__(self, pipe: DevicePipeline, launch: _Launch, batch: UpdateBatch,
                 lo: int, part: bool = False) -> None:
        self.pipe, self.launch, self.batch, self.lo = pipe, launch, batch, lo
        self.part = part
        self.result: BatchColumns | None = None

    def kernel_seconds(self) -> list[float]:
        """Device seconds of apply_step, build_units, match_step, collect_step of its
        launch (a timed pipeline's tickets only: the four run one after the other, the
        first two on the updater's stream, the others on the lane's)."""
        self.sync()
        cp, m = self.pipe.cp, self.launch.marks
        return [cp.cuda.get_elapsed_time(m[i], m[i + 1]) / 1e3 for i in range(len(m) - 1)]

    @property
    def finished(self) -> bool:
        return self.result is not None

    @property
    def ready(self) -> bool:
        return self.result is not None or self.pipe.poll(self.launch)

    def ready_set(self) -> npt.NDArray[np.bool_]:
        """For each query (its place in the plan set): whether its counts of this batch and
        of every batch before it are in their regions, although other queries may still be
        matching (per-query delivery; a launch the host path finishes is ready only once
        it has been read)."""
        if self.result is not None:
            return np.ones(self.pipe._nq, np.bool_)
        return self.pipe.poll_queries(self.launch)

    def columns_for(self, j: int) -> BatchColumns:
        """Its columns with query ``j``'s counts alone (a copy), once :meth:`ready_set`;
        the region's rows serve the rest as for :meth:`wait` (read or not: the launch
        keeps its region)."""
        g = self.launch
        assert g.region is not None and not self.part
        return _query_columns(g.region, g.row0 + self.lo, len(self.batch), j)

    def sync(self) -> None:
        """Until the device work of its launch and of every launch before it is done
        (starting its launch first if it still gathers batches)."""
        for event in self.pipe.launch_now(self.launch):
            event.synchronize()

    def wait(self) -> BatchColumns:
        """Its columns (a split batch's part: ``_PLACED``, its rows being in the batch's)."""
        if self.result is None:
            self.pipe.take(self)
        assert self.result is not None
        return self.result


class SplitTicket:
    """A batch larger than a launch: consecutive parts, each a ticket of its own launch,
    read back as one batch (results never depend on how a stream is cut into batches)."""

    def __init__(self, batch: UpdateBatch, parts: list[BatchTicket], region: Region) -> None:
        self.batch, self.parts, self.region = batch, parts, region
        self.result: BatchColumns | None = None

    @property
    def launch(self) -> _Launch:
        return self.parts[-1].launch

    def kernel_seconds(self) -> list[float]:
        """Summed over its launches (a timed pipeline's tickets only)."""
        return [float(x) for x in np.sum([p.kernel_seconds() for p in self.parts], axis=0)]

    @property
    def finished(self) -> bool:
        return self.result is not None

    @property
    def ready(self) -> bool:
        return self.result is not None or self.parts[-1].ready

    def ready_set(self) -> npt.NDArray[np.bool_]:
        if self.result is not None:
            return np.ones(self.parts[-1].pipe._nq, np.bool_)
        return self.parts[-1].ready_set()   # (and the parts before)

    def columns_for(self, j: int) -> BatchColumns:
        return _query_columns(self.region, 0, len(self.batch), j)

    def sync(self) -> None:
        self.parts[-1].sync()   # covers every launch before its own

    def wait(self) -> BatchColumns:
        if self.result is None:
            for p in self.parts:   # each in its rows of the batch's region
                got = p.wait()
                assert got is _PLACED
            self.result = _columns(self.region, 0, len(self.batch))
        return self.result


class _Launch:
    """Batches bound for one launch of a block's graphs, in submission order."""

    def __init__(self, block: _Block) -> None:
        self.block = block
        self.tickets: list[BatchTicket] = []
        self.n = 0            # raw updates so far
        self.grow = 0         # the most it can add to one version (once launched)
        self.seq = 0          # its number, once launched (collect_step writes it last)
        self.event: Any = None    # after its collect_step, once launched
        self.front: Any = None    # the captured front it was launched with
        self.marks: list[Any] = []
        self.done = False     # every ticket has its result
        #: it holds a part of a batch split into launches, and this many of that batch's
        #: updates come after it (the pool must hold the rest of the batch too)
        self.split = False
        self.after = 0
        #: where the device writes its rows' results: rows row0.. of ``region`` (its own,
        #: taken when it starts, or a split batch's)
        self.region: Region | None = None
        self.row0 = 0
        #: room for its region, claimed before its front is launched (``_stamp``)
        self.claim: Claim | None = None

    @property
    def on_device(self) -> bool:
        """Launched and not yet finished on the device (a word of its control block:
        collect_step writes the sequence number last; cheaper than an event query)."""
        return not self.done and self.block.ctrl[C_DONE] != self.seq


class _Lane:
    """Where a batch's matching runs: an executor slot's stream and candidate rows (every
    user of a slot's rows launches on its stream, so they never overlap), this pipeline's
    unit buffers and queue, and the event after the lane's last batch."""

    def __init__(self, index: int, slot: Any) -> None:
        self.index, self.stream, self.stack = index, slot.stream, slot.stack
        self.dev: dict[str, Any] = {}
        self.last: Any = None


class _Block:
    """A launch's control block: header and raw updates (its results go to a region)."""

    def __init__(self, cp: Any, cap: int, lane: _Lane) -> None:
        self.lane = lane
        self.ctrl = mapped_zeros(self.words(cap), np.dtype(np.int64))
        #: each query's ready word: the number of the last launch whose counts of that
        #: query are in its region (sized for the standing queries: :meth:`fit`)
        self.ready = mapped_zeros(1, np.dtype(np.int64))
        self.ready_ptr = device_pointer(self.ready)
        self.inp = self.ctrl[C_HDR:C_HDR + 2 * cap].view(np.int32).reshape(4, cap)
        self.ptr = device_pointer(self.ctrl)
        #: the new vertices' external ids of its batches (two an update, the rows' own
        #: places), copied to the device from here; reused once its launch has been read
        self.ext = mapped_zeros(2 * cap, np.dtype(np.int64))
        #: where its launch's batches start, then its size (_launch_columns)
        self.bounds = np.zeros(cap + 1, np.int64)
        # recorded again at each launch of the block (its previous one has been read)
        self.fronted = cp.cuda.Event(disable_timing=True)   # after its front
        self.backed = cp.cuda.Event()                        # after its back
        #: its captured launches per layout (the pipeline's key): fronts by apply_step's grid
        #: (apply_step, build_units; the updater's stream), keyed without the row stride,
        #: which they do not read, and backs (match_step, collect_step; the lane's)
        self.fronts: dict[tuple[int, ...], dict[int, Any]] = {}
        self.backs: dict[tuple[int, ...], Any] = {}
        self.launch: _Launch | None = None   # the last launch that used it

    @staticmethod
    def words(cap: int) -> int:
        return C_HDR + 2 * cap

    def fit(self, nq: int) -> None:
        """Ready words for ``nq`` queries (at set-up: nothing of this block is in flight)."""
        if len(self.ready) < nq:
            self.ready = mapped_zeros(nq, np.dtype(np.int64))
            self.ready_ptr = device_pointer(self.ready)


class DevicePipeline:
    """Raw batches in, primitive updates and per-task counts out (count mode only)."""

    def __init__(self, ex: GpuExecutor, depth: int = 8, busy_launches: int = 2) -> None:
        self.ex, self.cp = ex, ex.cp
        self.updater: DeviceUpdater = ex.graph  # type: ignore[assignment]
        self.view: DeviceGraphView = ex.owned_graph  # type: ignore[assignment]
        self.stream = self.updater.stream
        self.depth = depth
        self._apply = kernel("update", "apply_step")
        self._apply_small = kernel("update", "apply_step_small")   # no launch front
        self._build = kernel("update", "build_units")
        self._match = kernel("match", "match_step")
        self._idle = kernel("match", "ready_idle")
        self._collect = kernel("update", "collect_step")
        #: launches started and not yet read, in order; the launch still gathering batches
        self._flight: deque[_Launch] = deque()
        self._open: _Launch | None = None
        #: batches gather into the next launch while this many launches run on the device
        self.busy_launches = busy_launches
        # submit and read run on the engine's thread; a ticket's sync may start its launch
        # from another thread (the service waits for device work off its event loop)
        self._lock = threading.RLock()
        self._broken: BaseException | None = None
        self._blocks: list[_Block] = []
        self._next = 0
        self._seq = 0
        self._plans: PlanSet | None = None
        self._nq = 0
        self._stride = 0
        self._grid_sizes: tuple[int, ...] = ()   # apply_step's grids (_grids)
        #: insertions per slot while a launch's multiplicity is counted (zero between)
        self._tally = np.zeros(0, np.int32)
        self._dev: dict[str, Any] = {}
        self._lanes = [_Lane(i, slot) for i, slot in enumerate(ex._slots)]
        self._lane_tick: Any = None
        #: launch the step's kernels one by one with events between them (benchmarks:
        #: each ticket's ``kernel_seconds``), not the captured graph
        self.timed = False
        #: compact the pool in stream order once it is half full (off: only a batch that
        #: meets a full pool collects, on the host path)
        self.collect_garbage = True
        self._gc: Any = None   # the event after the last stream-ordered compaction
        self._gc_fill = 0      # the pool's fill expected after it and the launches since
        #: pool entries per update that the last launches of several tiles took
        self._took: deque[float] = deque(maxlen=8)
        #: while a batch is split into launches: its updates after the part being staged
        self._after: int | None = None
        #: launches of the captured graph and batches finished on the host path
        self.launches = 0
        self.recoveries = 0
        self.captures = 0   # times a block's fronts, back or both were captured
        #: result regions (the batches' columns, written by the device): the process's
        self.arena = shared_arena()
        self._scale: npt.NDArray[np.int64] | None = None   # the scale on the device

    @property
    def in_flight(self) -> int:
        """Launches started and not read, and the one gathering batches."""
        return len(self._flight) + (self._open is not None)

    # -- configuration ------------------------------------------------------------------
    def prepare(self, plans: PlanSet, scale: npt.NDArray[np.int64]) -> None:
        """Allocate for ``plans`` and upload ``scale`` now (query registration), not in
        the first batch (the scale's upload drains and synchronises)."""
        with self._lock:
            self._configure(plans)
            if scale is not self._scale:
                self._set_scale(scale)

    def _configure(self, plans: PlanSet) -> None:
        """Buffers for ``plans`` and launches of LAUNCH_CAP; drains first if they change."""
        nq = len(plans.query_lo)
        if plans is self._plans:
            return
        self.drain()
        self._plans, self._nq = plans, nq
        try:
            self._setup(plans, nq)
        except BaseException:   # half set up: the next batch or registration tries again
            self._plans = None     # (with the same plans, so the same capture keys: the
            for block in self._blocks:   # graphs captured so far point at buffers _setup
                block.fronts.clear()     # will allocate again)
                block.backs.clear()
            raise

    def _setup(self, plans: PlanSet, nq: int) -> None:
        cp = self.cp
        cap = LAUNCH_CAP
        tasks = cap * max(nq, 1)
        pairs = cap * max(int((plans.query_hi - plans.query_lo).sum()), 1)   # all plans
        with self.stream:
            self.ex._upload_plans(plans)
            self._dev = {
                "inp": cp.zeros(4 * cap, cp.int32),
                "q_lo": cp.asarray(plans.query_lo.astype(np.int32)),
                "q_hi": cp.asarray(plans.query_hi.astype(np.int32)),
                "l2src": cp.asarray(level2_sources(plans).astype(np.int32)),
                "front": cp.zeros(D_SIZE, cp.int32),   # the front's words (D_STALL, D_NOUT)
                "scale": cp.zeros(2 * max(nq, 1), cp.int64),   # each query's num, den
                # build_units' blocks: the counter that orders them, then four words
                # each (sequence number, three sums)
                "unit_scan": cp.zeros(4 * self.updater.grid + 1, cp.int64),
            }
            self._scale = None
            for lane in self._lanes:
                lane.dev = {
                    "t_a": cp.zeros(tasks, cp.int32), "t_b": cp.zeros(tasks, cp.int32),
                    "t_el": cp.zeros(tasks, cp.int32), "t_k": cp.zeros(tasks, cp.int64),
                    "t_count": cp.zeros(tasks, cp.uint64),
                    "t_row": cp.zeros(cap, cp.int32),
                    "u_task": cp.zeros(pairs, cp.int32), "u_plan": cp.zeros(pairs, cp.int32),
                    "u_first": cp.zeros(pairs + 1, cp.int32),
                    "u_nchunk": cp.zeros(pairs, cp.int32),
                    "dims": cp.zeros(D_SIZE, cp.int32),
                    "q_ctr": cp.zeros(QUEUE_COUNTERS, cp.uint32),
                    # each query's items, done and collected (match.cu Q_EACH); zero
                    # between launches (collect_step zeroes them)
                    "q_each": cp.zeros(QUERY_WORDS * max(nq, 1), cp.uint32),
                    "queue": cp.zeros(self.ex.config.queue_records * 16, cp.int32),
                }
                lane.last = None
            # nothing in flight: no lane holds back the watermark
            self._lane_tick = cp.full(len(self._lanes), _FREE_LANE, cp.int64)
            if self.updater._ocap < cap + 16:
                self.updater._grow_out(cap + 16)
        self.stream.synchronize()
        # the blocks (pinned, mapped memory is slow to allocate: 0.3-0.5 ms each) and
        # their graphs for the layout now, at registration rather than in the first
        # batches: a fresh engine's first launches paid both (a one-batch Enron run 3.5
        # of its 11 ms, and the first responses of a replay 5-7 ms)
        if any(b.ctrl.size < _Block.words(LAUNCH_CAP) for b in self._blocks):
            self._blocks = []
        self._blocks += [_Block(self.cp, LAUNCH_CAP, self._lanes[i % len(self._lanes)])
                         for i in range(len(self._blocks), self.depth)]
        for block in self._blocks:
            block.fit(nq)
        self._next = 0
        # the id map's room for a launch's new ends (stage reserves two an update), so a
        # fresh engine's first launches do not rehash it (0.6 ms of a first 16,384 launch);
        # later growth doubles the map, once in a while
        self.updater.ids.reserve(2 * cap)
        self.arena.reserve()
        maxlen = int(self.updater.meta[M_MAXLEN])
        self._stride = max(self._stride, _stride_for(maxlen, 0))
        full = self.updater.grid
        self._grid_sizes = tuple(sorted({1, min(16, full), full}))
        for block in self._blocks:
            block.launch = None
            self._graphs(block)
        with self.updater.flipped():   # and against the spare pool: compactions in stream
            for block in self._blocks:  # order flip them, and capture nothing then
                self._graphs(block)

    def _key(self) -> tuple[int, ...]:
        """The layout a block's back is captured for: the front's, and the row stride."""
        u = self.updater
        return (u.generation, u.pool_flip, id(self._plans), self._stride)

    def _graphs(self, block: _Block) -> tuple[dict[int, Any], Any]:
        """The block's graphs for the current layout, captured if new (pointers and sizes
        baked in): its fronts on the updater's stream, one per grid of :meth:`_grids`, and
        its back on its lane's (a captured kernel runs on the SMs of the stream it was
        captured on, whichever stream launches it). Both pools that garbage collection
        alternates between keep theirs; any other change drops them, but a new row stride
        only the backs (a launch whose hub outgrew the stride captured three fronts and a
        back again between its front and its back; the fronts never read the stride)."""
        key = self._key()
        fronts, back = block.fronts.get(key[:3]), block.backs.get(key)
        if fronts is not None and back is not None:
            return fronts, back
        args = self._step_args()
        s = self.stream
        if fronts is None:
            fronts = {}
            with s:
                for grid in self._grids():
                    s.begin_capture()
                    try:
                        self._front(block, *args, grid=grid)
                    finally:
                        fronts[grid] = s.end_capture()
                # a graph's first launch uploads it to the device: done here, at set-up,
                # not on a batch's path (each on the stream that launches it)
                for front in fronts.values():
                    front.upload(s)
            _keep_flips(block.fronts, key[:3])
            block.fronts[key[:3]] = fronts
        if back is None:
            ls = block.lane.stream
            with ls:
                ls.begin_capture()
                try:
                    self._back(block, *args)
                finally:
                    back = ls.end_capture()
            back.upload(ls)
            _keep_flips(block.backs, key)
            block.backs[key] = back
        self.captures += 1
        return fronts, back

    def _grids(self) -> tuple[int, ...]:
        """apply_step's grid for launches of up to 8, 128 and LAUNCH_CAP updates (fixed at
        set-up, from the updater's grid then; not worked out again each launch). The
        resolver uses one block per 8 updates and the rest return at once, but every block
        of it needs a whole SM (1,024 threads, 64 registers each), so a grid of one per SM
        made a launch of 1 wait until each SM in turn was free of matching: measured on one
        H100 at 10,000 triangle updates/s, p50 0.21 -> 0.15 ms with one block."""
        return self._grid_sizes

    def _grid_for(self, n: int) -> int:
        """The least of :meth:`_grids` that still gives ``n`` updates all their blocks."""
        need = -(-n // UPDATES_PER_BLOCK)
        return next((g for g in self._grids() if g >= need), self.updater.grid)

    def _step_args(self) -> tuple[Any, ...]:
        u, ex = self.updater, self.ex
        plans = self._plans
        assert plans is not None
        levels = int(plans.n.max())
        split = ex._split_cycles
        least, warps = ex.warp_limits(split, len(self._lanes[0].stack),
                                      (levels + 1) * self._stride, self._stride)
        table, nb_level, nb_label = ex._plans_dev
        resolver = u.resolver_args()   # may allocate: not while capturing
        return resolver, table, nb_level, nb_label, levels, warps, split, least

    def _front(self, block: _Block, resolver: tuple[Any, ...], table: Any, *_: Any,
               mark: Any = None, grid: int = 0) -> None:
        """apply_step (on ``grid`` blocks; 0: one per SM) and build_units (into the block's
        lane) on the current stream."""
        d, u, c, cap = self._dev, self.updater, self.ex.config, LAUNCH_CAP
        lane, ld = block.lane, block.lane.dev
        mark = mark or _nothing
        mark()
        # the small grids serve launches of at most 128 updates: tiles only
        small = 0 < grid < self._grid_sizes[-1]
        (self._apply_small if small else self._apply)((grid or u.grid,), (TILE,), (
            block.ptr, d["front"], d["inp"], np.int64(cap), self._lane_tick,
            np.int32(lane.index), np.int32(len(self._lanes)), *resolver))
        mark()
        # a block a tile at most: idle blocks would still wait for SMs that matching holds
        self._build((min(grid or u.grid, -(-cap // TILE)),), (TILE,), (
            ld["dims"], d["front"], u.o_op, u.o_a, u.o_b, u.o_src, u.o_dst, u.o_label,
            u.o_tick, u.o_status, u.o_reason, u.seg, u.vlabel, table,
            d["q_lo"], d["q_hi"], d["l2src"], np.int32(self._nq), np.int32(c.slice_size),
            np.int32(c.max_slices), ld["t_a"], ld["t_b"], ld["t_el"], ld["t_k"],
            ld["t_count"], ld["t_row"], ld["u_task"], ld["u_plan"], ld["u_first"],
            ld["u_nchunk"], ld["q_ctr"], d["unit_scan"], ld["q_each"]))
        mark()

    def _back(self, block: _Block, resolver: tuple[Any, ...], table: Any, nb_level: Any,
              nb_label: Any, levels: int, warps: int, split: int, least: int,
              mark: Any = None) -> None:
        """ready_idle, match_step and collect_step on the current stream, with the
        block's lane."""
        u, null, lane, ld = self.updater, np.uint64(0), block.lane, block.lane.dev
        self._idle((1,), (32,), (ld["dims"], ld["q_each"], np.int32(self._nq), block.ready_ptr))
        self._match(((warps + WARPS_PER_BLOCK - 1) // WARPS_PER_BLOCK,), (32 * WARPS_PER_BLOCK,), (
            ld["dims"], ld["u_task"], ld["u_plan"], ld["u_first"], ld["u_nchunk"], np.int32(0),
            np.int32(0), ld["t_a"], ld["t_b"], ld["t_el"], ld["t_k"], table, nb_level,
            nb_label, *u.arrays(), np.int32(0), null, np.int32(0), np.int64(0),
            lane.stack, np.int64(self._stride), np.int64(levels), np.int64(warps),
            ld["queue"], np.int32(len(ld["queue"]) // 16), np.int32(0), np.int64(split),
            ld["q_ctr"], np.int32(least), ld["t_count"], null, null, null, null, null, null,
            ld["q_each"], np.int32(self._nq), ld["t_row"], self._dev["scale"], block.ready_ptr))
        mark = mark or _nothing
        mark()
        self._collect((1,), (256,), (block.ptr, ld["dims"], np.int32(self._nq), ld["q_each"],
                                     block.ready_ptr))
        mark()

    # -- batches ------------------------------------------------------------------------
    def submit(self, batch: UpdateBatch, plans: PlanSet,
               scale: npt.NDArray[np.int64]) -> BatchTicket | SplitTicket | None:
        """Enqueue ``batch`` (edge updates only: None, nothing done, for one with a vertex
        operation); returns at once. While ``busy_launches``
        launches are still running on the device, batches gather into the next launch
        (group commit): the updater's stream and the host pay per launch, not per batch.
        A batch larger than a launch goes in consecutive launches (:class:`SplitTicket`),
        the last of which starts at once.
        ``scale``: each query's num and den (two contiguous int64 rows)."""
        with self._lock:
            self._check()
            if plans is not self._plans:
                self._configure(plans)
            if scale is not self._scale:
                self._set_scale(scale)
            cap = LAUNCH_CAP
            if len(batch) <= cap:
                return self._submit(batch)
            if int(batch.op.max()) >= UpdateOp.INSERT_VERTEX:   # the host path's
                return None
            parts = []
            region = self.arena.take(len(batch), self._nq)
            try:
                for lo in range(0, len(batch), cap):
                    self._after = max(0, len(batch) - lo - cap)
                    part = self._submit(batch.slice(lo, lo + cap), region, lo)
                    assert part is not None   # (edge updates only)
                    parts.append(part)
            finally:
                self._after = None
            return SplitTicket(batch, parts, region)

    def _set_scale(self, scale: npt.NDArray[np.int64]) -> None:
        """Each query's num and den onto the device for collect_step (after the launches
        in flight, which read the scale before it; it changes with the standing queries)."""
        if self._scale is None or not np.array_equal(scale, self._scale):
            self.drain()
            with self.stream:
                self._dev["scale"].set(np.ascontiguousarray(scale, np.int64).ravel())
            self.stream.synchronize()
        self._scale = scale

    def _submit(self, batch: UpdateBatch, into: Region | None = None,
                row0: int = 0) -> BatchTicket | None:
        """One batch of at most a launch's capacity into the open launch (under the lock);
        ``into``, ``row0``: a split batch's region and this part's first row there (a part
        has its launch to itself: every part but the last fills one, and the last starts
        at once)."""
        n = len(batch)
        g = self._open
        if g is not None and (g.n + n > LAUNCH_CAP or into is not None):
            self._start(g)
            g = None
        if g is None:
            g = self._open = self._new_launch()
        if into is not None:
            g.region, g.row0 = into, row0
        o = g.n
        if not self.updater.stage(batch, g.block.inp, o, g.block.ext[2 * o:2 * (o + n)], True):
            return None   # a vertex operation (the launch gathers on, maybe still empty)
        g.n += n
        g.block.bounds[len(g.tickets) + 1] = g.n   # (bounds[0] is 0)
        if self._after is not None:
            g.split, g.after = True, self._after
        ticket = BatchTicket(self, g, batch, o, into is not None)
        g.tickets.append(ticket)
        if not self._busy() or into is not None:   # (nothing may join a part's launch)
            self._start(g)
        return ticket

    def _new_launch(self) -> _Launch:
        block = self._blocks[self._next]
        self._next = (self._next + 1) % len(self._blocks)
        if block.launch is not None and not block.launch.done:
            self._finish(block.launch)
        g = block.launch = _Launch(block)
        return g

    def _busy(self) -> bool:
        """``busy_launches`` launches, the newest, are still running on the device (0:
        always, so batches gather until one of them is read or the launch is full; a
        split batch's last part starts at once all the same)."""
        if self.busy_launches == 0:
            return True
        k = 0
        for g in reversed(self._flight):
            if not g.on_device:
                return False
            k += 1
            if k >= self.busy_launches:
                return True
        return False

    def poll(self, g: _Launch) -> bool:
        """Whether the device work of ``g`` and of every launch before it is done (so
        reading ``g`` would not wait); starts ``g`` if it gathers batches and the device
        has room now (with ``busy_launches`` 0: at once)."""
        with self._lock:
            self._check()
            if g is self._open and (self.busy_launches == 0 or not self._busy()):
                self._start(g)
            return g.event is not None and not any(x.on_device for x in self._upto(g))

    def poll_queries(self, g: _Launch) -> npt.NDArray[np.bool_]:
        """For each query: whether its counts of ``g`` and of every launch before it are in
        their regions (starts ``g`` as :meth:`poll` does). A launch's query is there once
        its ready word holds the launch's number (written after the counts) and the
        launch's resolve finished (C_CODE, written before them; read after them here): a
        launch that stopped on a full pool or output, or was skipped behind one, wrote its
        ready words with nothing counted. Such a launch is finished on the host path here
        once the launches before it are off the device: nothing else would, while its
        reader waits per query (and waiting here for their other queries would hold it)."""
        nq = self._nq
        with self._lock:
            self._check()
            if g is self._open and (self.busy_launches == 0 or not self._busy()):
                self._start(g)
            ok = np.zeros(nq, np.bool_)
            if g.event is None:
                return ok
            ok[:] = True
            busy = False   # a launch before is still matching (other queries)
            for x in self._upto(g):
                if x.done:
                    continue
                there = x.block.ready[:nq] == x.seq   # first: then the code
                if int(x.block.ctrl[C_CODE]) == DONE:
                    ok &= there
                    busy = busy or x.on_device
                    continue
                if busy or x.on_device:
                    ok[:] = False   # (not DONE yet, or stopped behind launches still running)
                    return ok
                self._finish(x)   # stopped: recovered, the launches skipped behind it again
                if not x.done:
                    ok[:] = False
                    return ok
            return ok

    def launch_now(self, g: _Launch) -> list[Any]:
        """Start ``g`` if it gathers batches; the events of every launch up to it."""
        with self._lock:
            self._check()
            if g is self._open:
                self._start(g)
            return [x.event for x in self._upto(g)]

    def _upto(self, g: _Launch) -> list[_Launch]:
        """The launches in flight up to ``g`` (none once ``g`` has been read)."""
        if g.done:
            return []
        out = []
        for x in self._flight:
            out.append(x)
            if x is g:
                break
        return out

    def _check(self) -> None:
        if self._broken is not None:
            raise BackendError(f"the device pipeline stopped ({self._broken}); batches "
                               "not yet read have no results") from self._broken

    def _start(self, g: _Launch) -> None:
        """Launch the gathered batches (the open launch). A failure on the way leaves the
        pipeline broken: its batches (and maybe the device) are in doubt, and every later
        call says so instead of waiting (or finding a launch neither gathering nor in
        flight)."""
        assert g is self._open
        self._open = None
        if g.n == 0:   # only refused batches came (vertex operations): nothing to launch
            g.done = True
            return
        try:
            self._stamp(g)
            self._collect_garbage(g)
            self._launch(g, size=True)
        except BaseException as exc:
            self._broken = exc
            raise
        self._flight.append(g)

    def _stamp(self, g: _Launch) -> None:
        """Launch ``g``'s sequence number and control words, and room for its region
        (the region comes once its front is launched: :meth:`_place`). The room is
        claimed first because a new chunk of pinned memory, or the freeing of an old
        one, waits for the device, whose front would wait for the region meanwhile (the
        suspected cause of a fault after 30 s with engines piling up in a process, and
        of a 2.5-3.8 ms stall where an engine still held regions in the ring:
        docs/benchmarks.md, stop 47)."""
        self._seq += 1
        g.seq = self._seq
        c = g.block.ctrl
        c[C_N], c[C_HOLD], c[C_SEQ], c[C_DONE] = g.n, _NO_HOLD, self._seq, 0
        if g.region is None:
            g.claim = self.arena.claim(g.n, self._nq)

    def _place(self, g: _Launch) -> None:
        """``g``'s result region (made now from its claim if it has none) into its control
        block, then its sequence number after the region's words: apply_step waits for
        that word at the end of its resolve (update.cu ``take_region``). Made before the
        launch, the region was 10-15 us of a lone update's path to the device and 55-150
        us of a one-batch Enron run's, in the host's Python."""
        if g.region is None:
            assert g.claim is not None
            g.region, g.claim = self.arena.region(g.claim), None
        c = g.block.ctrl
        c[C_RBASE], c[C_RROWS], c[C_RROW0] = g.region.device, g.region.rows, g.row0
        c[C_RSEQ] = g.seq

    def _size_rows(self, g: _Launch) -> None:
        """Launch ``g``'s growth bound and the row stride that covers it (between its front
        and its back: only match_step's rows depend on it, so the host's pass over the
        launch runs while the device resolves it; Enron's one launch of 18,383 waited
        on it before)."""
        # rows of match_step hold what a version it may meet shows at its ticks: at most
        # the longest version now, plus what the launches in flight and this one add to
        # one vertex (its edge insertions naming that vertex; a launch's size before,
        # which made the stride grow, and every block capture again, as launches gathered)
        if len(self._tally) < self.updater.n_slots:
            self._tally = np.zeros(2 * self.updater.n_slots, np.int32)
        g.grow = int(insert_multiplicity(g.block.inp, g.n, self._tally))
        bound = int(self.updater.meta[M_MAXLEN]) + g.grow + sum(x.grow for x in self._flight)
        if bound + 1 > self._stride:   # launches resolved in full and off the device
            # are in meta's longest version already: checked first, then meta read again
            # (a launch that ends in between is counted twice, never missed). A launch that
            # stopped on a full pool or output, and those skipped behind it, are not: their
            # growth comes with the recovery. Unread launches of a gathering run (up to a
            # block each) would otherwise grow the stride, and a new stride re-captures
            # every block's back for both pools
            rest = sum(x.grow for x in self._flight
                       if x.on_device or int(x.block.ctrl[C_CODE]) != DONE)
            bound = int(self.updater.meta[M_MAXLEN]) + g.grow + rest
            if bound + 1 > self._stride:
                self._stride = _stride_for(bound, g.grow)

    def _need(self, n: int) -> int:
        """Pool room a launch of ``n`` updates needs so that its resolver never stops on a
        full pool. Before each tile the resolver asks for S + S/8 + 11 per update + 64
        (update.cu, step 1), S being the length of the versions the tile touches that
        earlier tiles of its build did not (a new version of each per build, with an
        eighth of slack); a build's S is at most what is live (and what the launch adds:
        two entries an update) and at most the longest version per end. A build holds
        BUILD_TILES tiles, or at least two when one vertex crowds it (update.cu
        BUILD_KCAP; a pipelined launch has no vertex operation to end one sooner). Once
        launches of several tiles have been read, at most 1.25 times the most a recent one
        took per update, plus the same slack (the bound is far above it on hub graphs)."""
        u = self.updater
        tiles = -(-n // TILE)
        builds = -(-tiles // 2)
        live = int(u.meta[M_POOL_USED]) - int(u.meta[M_GARBAGE]) + 2 * n
        s = min(live, 2 * min(n, BUILD_TILES * TILE) * (int(u.meta[M_MAXLEN]) + n))
        slack = 11 * n + 64 * tiles
        bound = builds * (s + s // 8) + slack
        if not self._took:   # no launch read yet: the bound
            return bound
        return min(bound, int(1.25 * max(self._took) * n) + slack)   # the recent rate

    def _running(self) -> list[int]:
        """Sizes of the launches still on the device (what they take is not in meta yet)."""
        return [x.n for x in self._flight if x.on_device]

    def _collect_garbage(self, g: _Launch) -> None:
        """Before launch ``g``: compact the pool in stream order once it is half full (as
        the last finished resolve left it) or, for a part of a batch split into launches,
        too full for what ``g`` may take. Launches of small batches, gathered or not, fit
        a half-full pool (measured: checking them too compacted more often, and each
        compaction stops the overlap of resolving and matching). The updater's stream
        waits for the work on every lane so far (it reads the old pool and the version
        words), then packs into the spare pool, doubled until it holds three times what
        stays, and what stays plus what the running launches and ``g`` may take
        (:meth:`_need`; for a part of a split batch, the rest of the batch too). While a
        compaction is still queued, meta predates it: the fill expected after it (what
        stays, what the launches before it and since may take) stands in for meta's, so
        a split batch's later parts queue another only if they do not fit that. The host
        does not wait, and the launches keep their captured graphs (the pools alternate).
        Two pools take twice the memory: the pool grows only within a share of the free
        device memory, and without room for the second pool collection is left to the
        host path (a batch that meets a full pool)."""
        u = self.updater
        if not self.collect_garbage:
            return
        used, cap = int(u.meta[M_POOL_USED]), u.pool_capacity
        if self._gc is not None and self._gc.done:   # an event query: once, not every launch
            self._gc = None
        queued = self._gc is not None   # meta is older than that compaction
        fits = True   # a small launch fits a half-full pool
        if g.split:   # a part of a split batch: it and the rest of the batch must fit
            fill = self._gc_fill if queued else used + sum(map(self._need, self._running()))
            fits = fill + self._need(g.n + g.after) <= cap
        if fits and (queued or 2 * used < cap):
            if queued:
                self._gc_fill += self._need(g.n)
            return
        running = self._running()
        kept = used - int(u.meta[M_GARBAGE])
        before = sum(map(self._need, running))   # resolved before it compacts
        need = self._need(g.n + g.after) + before
        live = kept + 2 * sum(running)
        grow = cap
        while grow < 3 * live or grow < kept + need:
            grow *= 2
        if grow > cap:
            share = u.pool_share()
            while grow > cap and grow > share:
                grow //= 2
        for lane in self._lanes:
            self.stream.wait_event(lane.stream.record())
        try:
            self._gc = u.compact_in_stream(grow if grow > cap else 0)
            self._gc_fill = kept + before + self._need(g.n)
        except self.cp.cuda.memory.OutOfMemoryError:   # no room for the second pool: the
            self.collect_garbage = False                 # host path collects (full pool)

    def _launch(self, g: _Launch, size: bool = False) -> None:
        """``g``'s front, then (``size``: once its rows are sized) its back."""
        s, lane, b = self.stream, g.block.lane, g.block
        if lane.last is not None:   # the lane's unit buffers: its previous batch has matched
            s.wait_event(lane.last)
        if self.timed:   # the same kernels, uncaptured, one after the other, events between
            g.marks = []
            with s:
                self._front(b, *self._step_args(), mark=lambda: g.marks.append(s.record()),
                            grid=self._grid_for(g.n))
            self._place(g)
            if size:
                self._size_rows(g)
            lane.stream.wait_event(s.record())
            with lane.stream:
                self._back(b, *self._step_args(),
                           mark=lambda: g.marks.append(lane.stream.record()))
            g.event = lane.stream.record()
        else:
            # held until the launch is read: a new stride drops the block's backs
            g.front = self._graphs(b)[0][self._grid_for(g.n)]
            g.front.launch(s)
            self._place(g)
            b.fronted.record(s)
            if size:
                self._size_rows(g)
            back = self._graphs(b)[1]   # captured again if the stride grew
            lane.stream.wait_event(b.fronted)
            back.launch(lane.stream)
            b.backed.record(lane.stream)
            g.event = b.backed
        lane.last = g.event
        self.launches += 1

    def drain(self) -> None:
        with self._lock:
            self._check()
            if self._open is not None:
                self._start(self._open)
            if self._flight:
                self._finish(self._flight[-1])

    def take(self, t: BatchTicket) -> None:
        """Finish every launch up to ``t``'s in order and keep their batches' results."""
        with self._lock:
            self._check()
            if t.launch is self._open:
                self._start(t.launch)
            self._finish(t.launch)

    def _finish(self, g: _Launch) -> None:
        while not g.done:
            head = self._flight[0]
            head.event.synchronize()
            code = int(head.block.ctrl[C_CODE])
            if code == FAULT:   # the graph is in doubt: this and every later call fail
                self._broken = fault_error(self.updater.grid, self.updater.barrier_timeout)
                raise self._broken
            if code == DONE:
                if head.n > TILE:   # what split batches' parts are estimated from
                    c = head.block.ctrl
                    self._took.append(max(0, int(c[C_POOL1]) - int(c[C_POOL0])) / head.n)
                self._read(head)
            elif code == SKIPPED:   # pragma: no cover - a failed batch is always taken first
                raise BackendError("a pipelined batch was skipped without a failed one before it")
            else:
                self._recover(head)
            self._flight.popleft()
            head.done = True
            # a read launch lets go of its tickets: each ticket refers to its launch, and the
            # cycle left every batch's results to the garbage collector, whose young-
            # generation passes then freed some 700 objects at once (0.3-0.4 ms pauses, about
            # 100 in 2 s at 10,000 updates/s; with the collector off p99 was 0.65 -> 0.44 ms)
            head.tickets = []
            # batches gathered while the device was busy start once it is not, also while
            # the host waits here rather than submitting or polling. If that start fails,
            # the pipeline is broken and every later call says so; a read that already has
            # its results keeps them (the failure belongs to later batches)
            if self._open is not None and not self._busy():
                try:
                    self._start(self._open)
                except Exception:
                    if not g.done:
                        raise

    def _read(self, g: _Launch) -> None:
        """Each batch's result: its rows of the launch's region, with the applied updates
        and tally of every batch picked out in one compiled pass (a split batch's part:
        nothing yet, its batch is read as one; a part has its launch to itself)."""
        region = g.region
        assert region is not None
        if g.tickets and g.tickets[0].part:
            g.tickets[0].result = _PLACED
            return
        k = len(g.tickets)
        for t, cols in zip(g.tickets, _launch_columns(region, g.row0, g.block.bounds[:k + 1]),
                           strict=True):
            t.result = cols

    def _recover(self, g: _Launch) -> None:
        """The launch stopped on a full pool, output or vertex array: finish it on the host
        path (everything after it in flight skipped), then launch the skipped ones again."""
        for lane in self._lanes:   # later batches' skipped steps; the host path's kernels
            if lane.last is not None:   # run on the lanes' streams too
                lane.last.synchronize()
        self.stream.synchronize()
        with self.stream:
            self._dev["front"][D_STALL:D_STALL + 1].fill(0)
        c, n = g.block.ctrl, g.n
        buf = np.ascontiguousarray(g.block.inp[:, :n]).ravel()
        try:
            ops = self.updater.resume(buf, n, int(c[C_RESUME]), int(c[C_NOUT]), relayout=False)
        except BackendError as exc:   # a fault: the graph is in doubt, nothing more runs
            self._broken = exc
            raise
        self.recoveries += 1
        plans = self._plans
        assert plans is not None
        ei = ops.applied_edges()
        tasks = edge_tasks(ops.a, ops.b, ops.label, ops.tick, ei, plans.query_lo,
                           plans.query_hi, np.full(self._nq, -1, np.int64))
        self.ex._installed = self.stream.record()
        out = self.ex.submit(self.view, plans, tasks).wait()  # type: ignore[arg-type]
        # the rows into the launch's region, as the device would have written them (one
        # primitive update a row, in raw order), then read as a finished launch is
        counts, _, _ = result_columns(ops.raw, ops.status, ops.op, ei, out.counts,
                                      self._scale[0], self._scale[1])  # type: ignore[index]
        r, at = g.region, g.row0
        assert r is not None
        for name in ("tick", "src", "dst", "a", "b", "label", "op", "status", "reason"):
            getattr(r, name)[at:at + n] = getattr(ops, name)
        r.counts[at:at + n] = counts
        self._read(g)
        for later in list(self._flight)[1:]:   # skipped: their inputs are still in place
            self._seq += 1   # a number of its own for each run (build_units' records)
            later.seq = self._seq
            later.block.ctrl[C_SEQ], later.block.ctrl[C_DONE] = self._seq, 0
            self._launch(later)


_op_table = positional(OpTable)


def _launch_columns(r: Region, row0: int, bounds: npt.NDArray[np.int64]) -> list[BatchColumns]:
    """The results of batches in rows ``row0 + bounds[t] ..< row0 + bounds[t + 1]`` of
    region ``r``: the region's columns themselves (views; raw and sub shared read-only),
    each batch's applied indices and tally (one compiled call for them all)."""
    ei, rows = finish_launch(r.op, r.status, r.counts, row0, bounds)
    op, a, b, src, dst, label, tick = r.op, r.a, r.b, r.src, r.dst, r.label, r.tick
    status, reason, counts = r.status, r.reason, r.counts
    table = _op_table
    out = []
    for lo, hi, e0, e1, *tally in rows.tolist():
        n = hi - lo
        if n == r.rows:   # the whole region: its columns as they are
            out.append(BatchColumns(table(row_numbers(n), op, a, b, src, dst, label, tick,
                                          status, reason), ei[:e1], counts, zero_subs(n),
                                    tally))
            continue
        out.append(BatchColumns(
            table(row_numbers(n), op[lo:hi], a[lo:hi], b[lo:hi], src[lo:hi], dst[lo:hi],
                  label[lo:hi], tick[lo:hi], status[lo:hi], reason[lo:hi]),
            ei[e0:e1], counts[lo:hi], zero_subs(n), tally))
    return out


def _columns(r: Region, at: int, n: int) -> BatchColumns:
    """One batch's result from rows ``at..at+n-1`` of its region."""
    return _launch_columns(r, at, np.array([0, n], np.int64))[0]


def _query_columns(r: Region, at: int, n: int, j: int) -> BatchColumns:
    """Rows ``at..at+n-1`` of region ``r`` with query ``j``'s counts alone, copied (the
    other queries' may still be written): its applied updates, and its tally with the
    matches of that query only."""
    counts = np.ascontiguousarray(r.counts[at:at + n, j:j + 1])
    s = slice(at, at + n)
    ei, rows = finish_launch(r.op[s], r.status[s], counts, 0, np.array([0, n], np.int64))
    _, _, e0, e1, *tally = rows[0].tolist()
    return BatchColumns(_op_table(row_numbers(n), r.op[s], r.a[s], r.b[s], r.src[s], r.dst[s],
                                  r.label[s], r.tick[s], r.status[s], r.reason[s]),
                        ei[e0:e1], counts, zero_subs(n), tally)


def _keep_flips(graphs: dict[tuple[int, ...], Any], key: tuple[int, ...]) -> None:
    """Drop the graphs of layouts that differ from ``key`` in more than the pool
    (``key[1]``: the two pools garbage collection alternates between keep theirs)."""
    for k in [k for k in graphs if k[0] != key[0] or k[2:] != key[2:]]:
        del graphs[k]


def _stride_for(bound: int, grow: int) -> int:
    """Row length of match_step for versions of up to ``bound`` entries, with headroom
    (a new stride re-captures every block's back)."""
    return (bound + max(64, bound // 4, 2 * grow) + 31) // 32 * 32


def _nothing() -> None:
    pass
