"""The GPU executor: warp-per-unit backtracking over the device multi-version graph.

Work units are (task, plan, level-2 slice); a heavy update (large level-2 candidate
set) is cut into many slices so its search spreads over warps, and units are handed to
idle warps by one atomic counter, heaviest first. Counting and listing are two
launches, as on the CPU: counts are exact, then each listed task gets exactly
``min(count, cap)`` rows.

Inter-batch parallelism (DCSM): ``submit`` installs nothing and waits for nothing; each
batch runs on one of ``depth`` streams against its own ticks while the host resolves and
installs the next one, so a straggler in one batch no longer idles the GPU.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from ._cuda import cupy_or_raise, kernel
from ._device_graph import DeviceGraph
from ._executor import EXECUTORS, Done, MatchOutput, MatchTasks, Ticket
from ._graph import HostGraph, OpTable
from ._planner import F_MISC, F_NBCNT, F_NBOFF, PlanSet
from ._types import MAX_QUERY_VERTICES
from .exceptions import BackendError

__all__ = ["GpuConfig", "GpuExecutor"]

M = MAX_QUERY_VERTICES
_WARPS_PER_BLOCK = 4  # must equal WARPS_PER_BLOCK in kernels/match.cu


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


class _Slot:
    """One batch in flight: its stream, its share of the candidate rows, its counter."""

    def __init__(self, cp: Any, stack: Any) -> None:
        self.stream = cp.cuda.Stream(non_blocking=True)
        self.stack = stack
        with self.stream:
            self.counter = cp.zeros(1, cp.uint32)
        self.ticket: _GpuTicket | None = None


class _GpuTicket:
    def __init__(self, ex: GpuExecutor, slot: _Slot, graph: HostGraph, plans: PlanSet,
                 tasks: MatchTasks, stride: int, keep: tuple[Any, ...], host_counts: Any,
                 event: Any) -> None:
        self.ex, self.slot, self.graph, self.plans, self.tasks = ex, slot, graph, plans, tasks
        self.stride = stride
        self.keep = keep              # device buffers the kernel reads: alive until done
        self.host_counts = host_counts
        self.event = event
        self.out: MatchOutput | None = None

    @property
    def finished(self) -> bool:
        return self.out is not None

    def wait(self) -> MatchOutput:
        if self.out is None:
            self.out = self.ex._finish(self)
        return self.out


class GpuExecutor:
    name = "gpu"

    def __init__(self, config: GpuConfig | None = None) -> None:
        self.cp = cp = cupy_or_raise()
        import cupyx

        self._pinned = cupyx.empty_pinned
        self.config = c = config or GpuConfig()
        self.update_stream = cp.cuda.Stream(non_blocking=True)
        self.graph = DeviceGraph(self.update_stream)
        self._match = kernel("match", "match_units")
        self.sm_count = int(cp.cuda.Device().attributes["MultiProcessorCount"])
        nbytes = c.stack_bytes or min(8 << 30, cp.cuda.runtime.memGetInfo()[0] // 4)
        self._slots = _slot_pool(nbytes, c.depth)
        self._next_slot = 0
        self._installed: Any = None
        self._plans_key: PlanSet | None = None
        self._plans_dev: tuple[Any, ...] = ()

    # -- graph ------------------------------------------------------------------
    def _in_flight(self) -> list[_GpuTicket]:
        """This executor's tickets still running (the slots are shared by the process)."""
        return [s.ticket for s in self._slots
                if s.ticket is not None and s.ticket.ex is self and not s.ticket.finished]

    def drain(self) -> None:
        for t in self._in_flight():
            t.wait()

    def device_memory(self) -> tuple[int, int]:
        """CuPy's pool (graph mirror, stacks, outputs) against the device's memory."""
        return (int(self.cp.get_default_memory_pool().total_bytes()),
                int(self.cp.cuda.runtime.memGetInfo()[1]))

    def on_update(self, graph: HostGraph, ops: OpTable) -> None:
        busy = self._in_flight()
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
        """[4, U] int32: task, plan, slice, slices; heaviest units first."""
        nplans = (tasks.plan_hi - tasks.plan_lo).astype(np.int64)
        if only is not None:
            nplans = np.where(only, nplans, 0)
        owner = np.repeat(np.arange(len(tasks), dtype=np.int64), nplans)
        first = np.repeat(np.cumsum(nplans) - nplans, nplans)
        plan = np.repeat(tasks.plan_lo.astype(np.int64), nplans) + np.arange(len(owner)) - first
        la = graph.seg_len[tasks.a[owner]].astype(np.int64)
        lb = graph.seg_len[tasks.b[owner]].astype(np.int64)
        l2 = _level2_sources(plans)[plan]
        big = np.int64(1) << 40
        est = np.minimum(np.where(l2 & 1, la, big), np.where(l2 & 2, lb, big))
        deep = plans.n[plan] >= 4
        c = self.config
        nsl = np.where(deep, np.clip((est + c.slice_size - 1) // c.slice_size, 1, c.max_slices),
                       1)
        rep = np.repeat(np.arange(len(owner)), nsl)
        sl = np.arange(len(rep)) - np.repeat(np.cumsum(nsl) - nsl, nsl)
        heavy = np.argsort(-((la * lb)[rep] // nsl[rep]), kind="stable")
        rep, sl = rep[heavy], sl[heavy]
        out = np.empty((4, len(rep)), np.int32)
        out[0] = owner[rep]
        out[1] = plan[rep]
        out[2] = sl
        out[3] = nsl[rep]
        return out

    @staticmethod
    def _stride(graph: HostGraph) -> int:
        """Row length: the longest version now, with headroom for versions that later
        batches install while this kernel still runs (more forces a drain first)."""
        d = graph.max_degree_bound()
        return (d + max(64, d // 4) + 31) // 32 * 32

    def _launch(self, slot: _Slot, stride: int, levels: int, plans_dev: tuple[Any, ...],
                units: npt.NDArray[np.int32],
                tasks: MatchTasks, counts: Any, rows: Any, row_off: Any, want: Any,
                slots: Any) -> tuple[Any, ...]:
        cp = self.cp
        nu = units.shape[1]
        per_warp = levels * stride
        warps = min(self.sm_count * self.config.warps_per_sm, len(slot.stack) // per_warp, nu)
        if warps < 1:
            raise BackendError(f"a neighbour array of {stride:,} entries needs more than the "
                               f"stack_bytes/depth of device memory per warp")
        ints = np.concatenate([units.ravel(), tasks.a, tasks.b, tasks.label]).astype(np.int32)
        n = len(tasks)
        du = cp.asarray(ints)
        dk = cp.asarray(tasks.tick)
        slot.counter.fill(0)
        blocks = (warps + _WARPS_PER_BLOCK - 1) // _WARPS_PER_BLOCK
        table, nb_level, nb_label = plans_dev
        g = self.graph
        null = np.uint64(0)
        self._match(
            (blocks,), (32 * _WARPS_PER_BLOCK,),
            (du[0:nu], du[nu:2 * nu], du[2 * nu:3 * nu], du[3 * nu:4 * nu], np.int32(nu),
             du[4 * nu:4 * nu + n], du[4 * nu + n:4 * nu + 2 * n],
             du[4 * nu + 2 * n:4 * nu + 3 * n], dk, table, nb_level, nb_label,
             *g.arrays(), slot.stack, np.int64(stride), np.int64(levels), np.int64(warps),
             slot.counter, counts,
             rows if rows is not None else null, row_off if row_off is not None else null,
             want if want is not None else null, slots if slots is not None else null))
        return du, dk

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
        stride = self._stride(graph)
        units = self._units(graph, plans, tasks)
        with slot.stream:
            if self._installed is not None:
                slot.stream.wait_event(self._installed)
            dcounts = cp.zeros(n, cp.uint64)
            keep: tuple[Any, ...] = (dcounts, *self._plans_dev, *self.graph.arrays())
            if units.shape[1]:
                keep += self._launch(slot, stride, int(plans.n.max()), self._plans_dev, units,
                                     tasks, dcounts, None, None, None, None)
            host = self._pinned(n, np.uint64)
            dcounts.get(stream=slot.stream, out=host, blocking=False)
            event = slot.stream.record()
        slot.ticket = _GpuTicket(self, slot, graph, plans, tasks, stride, keep, host, event)
        return slot.ticket

    def _finish(self, t: _GpuTicket) -> MatchOutput:
        cp = self.cp
        tasks, n = t.tasks, len(t.tasks)
        t.event.synchronize()
        counts = np.asarray(t.host_counts).astype(np.int64)
        listed = np.where(tasks.cap >= 0, np.minimum(counts, np.maximum(tasks.cap, 0)), 0)
        row_off = np.zeros(n + 1, np.int64)
        np.cumsum(listed, out=row_off[1:])
        total = int(row_off[-1])
        rows = np.zeros((total, M), np.int32)
        if total:
            lunits = self._units(t.graph, t.plans, tasks, only=listed > 0)
            with t.slot.stream:
                drows = cp.zeros((total, M), cp.int32)
                self._launch(t.slot, self._stride(t.graph), int(t.plans.n.max()), t.keep[1:4],
                             lunits, tasks, t.keep[0], drows,
                             cp.asarray(row_off[:-1]), cp.asarray(listed),
                             cp.zeros(n, cp.uint64))
                rows = drows.get(stream=t.slot.stream)
            t.slot.stream.synchronize()
        t.keep = ()
        return MatchOutput(counts, listed, row_off, rows)



def _level2_sources(plans: PlanSet) -> npt.NDArray[np.int64]:
    """Per plan, which of levels 0 / 1 level 2 intersects (bit 1 / bit 2): sizes slices.

    Level 2's backward neighbours are among levels 0 and 1, so at most two entries.
    """
    tbl = plans.table
    off, cnt = tbl[:, F_NBOFF, 2], tbl[:, F_NBCNT, 2]
    deep = tbl[:, F_MISC, 0] > 2
    first = np.where(deep & (cnt >= 1), 1 << plans.nb_level[off].astype(np.int64), 0)
    second = np.where(deep & (cnt >= 2),
                      1 << plans.nb_level[np.minimum(off + 1, len(plans.nb_level) - 1)]
                      .astype(np.int64), 0)
    return first | second


@functools.cache
def _slot_pool(nbytes: int, depth: int) -> list[_Slot]:
    """The streams and candidate rows of batches in flight, one pool per process: every
    executor takes turns on the same slots, and a slot's next user first waits for its
    ticket, so no two kernels ever share rows."""
    cp = cupy_or_raise()
    stack = cp.empty(nbytes // 8, np.int64)
    part = len(stack) // depth
    return [_Slot(cp, stack[i * part:(i + 1) * part]) for i in range(depth)]


def _factory() -> GpuExecutor:
    return GpuExecutor()


EXECUTORS["gpu"] = _factory
