"""The GPU executor: warp-per-unit backtracking over the device multi-version graph.

Work units are (task, plan, level-2 slice); a heavy update (large level-2 candidate
set) is cut into many slices so its search spreads over warps, and units are handed to
idle warps by one atomic counter, heaviest first. Counting and listing are two
launches, as on the CPU: counts are exact, then each listed task gets exactly
``min(count, cap)`` rows.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from ._cuda import cupy_or_raise, kernel
from ._device_graph import DeviceGraph
from ._executor import EXECUTORS, MatchOutput, MatchTasks
from ._graph import HostGraph, OpTable
from ._planner import F_MISC, F_NBCNT, F_NBOFF, PlanSet
from ._types import MAX_QUERY_VERTICES

__all__ = ["GpuConfig", "GpuExecutor"]

M = MAX_QUERY_VERTICES
_WARPS_PER_BLOCK = 4  # must equal WARPS_PER_BLOCK in kernels/match.cu


@dataclass(frozen=True, slots=True)
class GpuConfig:
    #: device memory for the warps' candidate rows; fewer warps run if rows are long
    stack_bytes: int = 1 << 30
    #: resident warps per SM to aim for
    warps_per_sm: int = 32
    #: level-2 candidates per work unit (estimated); smaller = finer load balance
    slice_size: int = 4
    max_slices: int = 4096


class GpuExecutor:
    name = "gpu"

    def __init__(self, config: GpuConfig | None = None) -> None:
        self.cp = cp = cupy_or_raise()
        self.config = config or GpuConfig()
        self.stream = cp.cuda.Stream(non_blocking=True)
        self.graph = DeviceGraph(self.stream)
        self._match = kernel("match", "match_units")
        dev = cp.cuda.Device()
        self.sm_count = int(dev.attributes["MultiProcessorCount"])
        self._stack = _stack(self.config.stack_bytes)
        with self.stream:
            self._counter = cp.zeros(1, cp.uint32)
        self._plans_key: PlanSet | None = None
        self._plans_dev: tuple[Any, ...] = ()
        self._l2: npt.NDArray[np.int8] = np.zeros(0, np.int8)

    def on_update(self, graph: HostGraph, ops: OpTable) -> None:
        self.graph.sync(graph, ops)

    def _upload_plans(self, plans: PlanSet) -> None:
        if self._plans_key is plans:
            return
        cp = self.cp
        with self.stream:
            self._plans_dev = (cp.asarray(plans.table), cp.asarray(plans.nb_level),
                               cp.asarray(plans.nb_label))
        # which of levels 0 / 1 level 2 intersects (bit 1 / bit 2): sizes the slices
        tbl = plans.table
        l2 = np.zeros(len(tbl), np.int8)
        for p in range(len(tbl)):
            if tbl[p, F_MISC, 0] > 2:
                off, cnt = tbl[p, F_NBOFF, 2], tbl[p, F_NBCNT, 2]
                for lvl in plans.nb_level[off:off + cnt]:
                    l2[p] |= 1 << int(lvl)
        self._l2 = l2
        self._plans_key = plans

    def _units(self, graph: HostGraph, plans: PlanSet, tasks: MatchTasks,
               keep: npt.NDArray[np.bool_] | None = None) -> npt.NDArray[np.int32]:
        """[4, U] int32: task, plan, slice, slices; heaviest units first."""
        nplans = (tasks.plan_hi - tasks.plan_lo).astype(np.int64)
        if keep is not None:
            nplans = np.where(keep, nplans, 0)
        owner = np.repeat(np.arange(len(tasks), dtype=np.int64), nplans)
        first = np.repeat(np.cumsum(nplans) - nplans, nplans)
        plan = np.repeat(tasks.plan_lo.astype(np.int64), nplans) + np.arange(len(owner)) - first
        la = graph.seg_len[tasks.a[owner]].astype(np.int64)
        lb = graph.seg_len[tasks.b[owner]].astype(np.int64)
        l2 = self._l2[plan]
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

    def _launch(self, units: npt.NDArray[np.int32], tasks: MatchTasks, graph: HostGraph,
                counts: Any, rows: Any, row_off: Any, want: Any, slots: Any) -> None:
        cp = self.cp
        nu = units.shape[1]
        stride = (graph.max_degree_bound() + 32) // 32 * 32
        per_warp = M * stride
        warps = min(self.sm_count * self.config.warps_per_sm, len(self._stack) // per_warp, nu)
        if warps < 1:
            raise MemoryError(f"a vertex of degree {stride} needs more than the "
                              f"{self.config.stack_bytes} bytes of stack_bytes")
        ints = np.concatenate([units.ravel(), tasks.a, tasks.b, tasks.label]).astype(np.int32)
        n = len(tasks)
        du = cp.asarray(ints)
        dk = cp.asarray(tasks.tick)
        self._counter.fill(0)
        blocks = (warps + _WARPS_PER_BLOCK - 1) // _WARPS_PER_BLOCK
        table, nb_level, nb_label = self._plans_dev
        g = self.graph
        null = np.uint64(0)
        self._match(
            (blocks,), (32 * _WARPS_PER_BLOCK,),
            (du[0:nu], du[nu:2 * nu], du[2 * nu:3 * nu], du[3 * nu:4 * nu], np.int32(nu),
             du[4 * nu:4 * nu + n], du[4 * nu + n:4 * nu + 2 * n],
             du[4 * nu + 2 * n:4 * nu + 3 * n], dk, table, nb_level, nb_label,
             *g.arrays(), self._stack, np.int64(stride), np.int64(warps), self._counter, counts,
             rows if rows is not None else null, row_off if row_off is not None else null,
             want if want is not None else null, slots if slots is not None else null))

    def match(self, graph: HostGraph, plans: PlanSet, tasks: MatchTasks) -> MatchOutput:
        cp = self.cp
        n = len(tasks)
        zero = MatchOutput(np.zeros(n, np.int64), np.zeros(n, np.int64),
                           np.zeros(n + 1, np.int64), np.zeros((0, M), np.int32))
        if n == 0:
            return zero
        self._upload_plans(plans)
        with self.stream:
            units = self._units(graph, plans, tasks)
            dcounts = cp.zeros(n, cp.uint64)
            if units.shape[1]:
                self._launch(units, tasks, graph, dcounts, None, None, None, None)
            counts = dcounts.get(stream=self.stream).astype(np.int64)
            listed = np.where(tasks.cap >= 0, np.minimum(counts, np.maximum(tasks.cap, 0)), 0)
            row_off = np.zeros(n + 1, np.int64)
            np.cumsum(listed, out=row_off[1:])
            total = int(row_off[-1])
            rows = np.zeros((total, M), np.int32)
            if total:
                lunits = self._units(graph, plans, tasks, keep=listed > 0)
                drows = cp.zeros((total, M), cp.int32)
                self._launch(lunits, tasks, graph, dcounts, drows, cp.asarray(row_off[:-1]),
                             cp.asarray(listed), cp.zeros(n, cp.uint64))
                rows = drows.get(stream=self.stream)
            self.stream.synchronize()
        return MatchOutput(counts, listed, row_off, rows)


@functools.cache
def _stack(nbytes: int) -> Any:
    """The warps' candidate rows, allocated once per process and size (engines share it:
    an executor's launches are serialised on the host)."""
    return cupy_or_raise().empty(nbytes // 8, np.int64)


def _factory() -> GpuExecutor:
    return GpuExecutor()


EXECUTORS["gpu"] = _factory
