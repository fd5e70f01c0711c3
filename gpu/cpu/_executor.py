"""The CPU executor: numba-compiled backtracking, updates of a batch matched in parallel."""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, replace

import numba as nb
import numpy as np
import numpy.typing as npt

from .._executor import EXECUTORS, Done, MatchOutput, MatchTasks, live_units, task_starts, task_sums
from ..graph._host import HostGraph, OpTable
from ..planning._planner import PlanSet
from . import _kernels as K
from ._sets import SetBuffers

__all__ = ["CpuExecutor"]

#: the most memory the threads' marks and weights are kept in (SetBuffers), made at the
#: graph's load with their pages touched: then every count uses them, whatever its size
#: (Enron at b=64: q5 316 -> 181 ms, q7 1.07 -> 0.70 s; round 24). Enron's 36,692
#: vertices take 5 MB for two threads; a graph too large for this makes them for each
#: count that earns them back (``_sets_nv``)
SETS_KEEP_BYTES = 256 << 20
#: such a count needs this many (task, plan) units per 64 vertices (see ``_sets_nv``)
SETS_UNITS_PER_64 = 1
#: a count expected to take less than this on one thread runs on the calling thread: the
#: pool's other threads wait passively (``_kernels``), and waking them costs tens of
#: microseconds, which two threads earn back only on counts of about twice that
HERE_BELOW_S = 100e-6


class CpuExecutor:
    name = "cpu"
    reads_during_updates = False   # every batch is matched before the next is applied

    def __init__(self, threads: int | None = None) -> None:
        self.threads = threads or nb.get_num_threads()
        self._sets: tuple[PlanSet | None, bool] = (None, True)
        #: each thread's marks and weights, kept from count to count; the lock keeps two
        #: callers' counts (an engine matches one batch at a time) from sharing them
        self._set_buffers = SetBuffers(self.threads)
        self._lock = threading.Lock()
        #: one thread's seconds a (task, plan) unit, lately (a moving average of the counts
        #: so far; None: none yet): whether a batch's count is worth the pool
        self._unit_s: float | None = None

    def on_update(self, graph: HostGraph, ops: OpTable) -> None:
        """The CPU reads the host graph directly. Once a graph is there (its load), the
        threads' marks and weights are made for its vertices with their pages touched,
        where they are kept (SETS_KEEP_BYTES): a count's first marks would otherwise fault
        them in (q3's one-batch count on Enron: 0.45 ms of 2.3; round 24)."""
        nv = graph.num_vertices
        if nv and not self._set_buffers.fits(nv) and self._keeps_sets(nv):
            with self._lock:
                self._set_buffers.fit(nv, touch=True)

    def _keeps_sets(self, nv: int) -> bool:
        return SetBuffers.nbytes(self.threads, nv) <= SETS_KEEP_BYTES

    def _set_slots(self, units: int, nv: int) -> tuple[npt.NDArray[np.generic], ...]:
        """The kernels' marks and weights for a count of ``units`` units on ``nv`` vertex
        slots (0: the plans use none): the kept ones, or for a graph too large to keep
        them, new ones (fresh pages) where the count earns them back."""
        if nv == 0 or self._keeps_sets(nv):
            return self._set_buffers.fit(nv)
        nv = _sets_nv(units, nv)
        return SetBuffers(self.threads).fit(nv) if nv else self._set_buffers.fit(0)

    def drain(self) -> None:
        """Nothing runs in the background."""

    def device_memory(self) -> tuple[int, int]:
        return 0, 0

    def submit(self, graph: HostGraph, plans: PlanSet, tasks: MatchTasks,
               prepared: Units | None = None) -> Done:
        return Done(self.match(graph, plans, tasks, prepared))

    def prepare(self, graph: HostGraph, plans: PlanSet, tasks: MatchTasks) -> Units:
        """The count phase's units and their order, from the vertex labels and degrees
        alone (no version is read: the engine builds them while a batch's insertions are
        merged, ``HostGraph.apply``'s ``beside``); the kernels test the degree bound."""
        return _units(graph, plans, tasks, degrees=False)

    def match(self, graph: HostGraph, plans: PlanSet, tasks: MatchTasks,
              prepared: Units | None = None) -> MatchOutput:
        with self._lock:   # the kept marks and weights: one count at a time
            return self._match(graph, plans, tasks, prepared)

    def _match(self, graph: HostGraph, plans: PlanSet, tasks: MatchTasks,
               prepared: Units | None) -> MatchOutput:
        n = len(tasks)
        if n == 0:
            return _counted(np.zeros(0, np.int64))
        pl = plans.table
        nv = graph.num_vertices
        g = (graph.seg_off[:nv], graph.seg_len[:nv], graph.loff[:nv], graph.vlabel[:nv],
             graph.key, graph.elab, graph.ct, graph.dt)
        maxlen = graph.max_degree_bound()
        nv_sets = nv if self._uses_sets(plans) else 0   # vertex slots of marks and weights
        u = prepared if prepared is not None else _units(graph, plans, tasks, degrees=True)
        owner, plan = u.owner, u.plan
        unit_counts = self._count(tasks.a[owner], tasks.b[owner], tasks.label[owner],
                                  tasks.tick[owner], plan, plan + 1, u.order, maxlen,
                                  *self._set_slots(len(owner), nv_sets), pl,
                                  plans.nb_level, plans.nb_label, *g)
        if plans.weighted:
            unit_counts *= plans.weight[plan]
        counts = task_sums(n, owner, u.start, unit_counts)
        if u.div is not None:   # exact: |Aut| x the conditioned plans' count; most
            nz = np.flatnonzero(counts)   # tasks count 0, and a division a task took
            counts[nz] //= u.div[nz]      # 78 us of Enron q3's 18k
        if int(tasks.cap.max()) <= 0:   # counts only (caps of -1, or 0): nothing to list
            return _counted(counts)
        listed = np.where(tasks.cap >= 0, np.minimum(counts, np.maximum(tasks.cap, 0)), 0)
        row_off = np.zeros(n + 1, np.int64)
        np.cumsum(listed, out=row_off[1:])
        rows = np.zeros((int(row_off[-1]), K.M), np.int32)
        sel = np.flatnonzero(listed > 0)
        if len(sel):
            K.list_tasks(tasks.a, tasks.b, tasks.label, tasks.tick, tasks.plan_lo,
                         tasks.plan_hi, sel, row_off[sel], listed[sel],
                         min(self.threads, len(sel)), maxlen,
                         *self._set_slots(len(sel), nv_sets)[:2], pl,
                         plans.nb_level, plans.nb_label, *g, rows)
        return MatchOutput(counts, listed, row_off, rows)

    def _count(self, a: npt.NDArray[np.int32], *rest: object) -> npt.NDArray[np.int64]:
        """``K.count_tasks`` of ``len(a)`` units on the pool, or on this thread alone when
        the units' recent cost says the count is small (b=64 on light queries); the time
        each takes feeds the estimate."""
        units = len(a)
        if units == 0:
            return np.zeros(0, np.int64)
        threads = min(self.threads, units)
        here = threads == 1 or (self._unit_s is not None
                                and units * self._unit_s < HERE_BELOW_S)
        t = time.perf_counter()
        if here:
            counts = K.count_tasks_here(a, *rest)
            threads = 1
        else:
            counts = K.count_tasks(threads, a, *rest)
        unit_s = (time.perf_counter() - t) * threads / units
        self._unit_s = unit_s if self._unit_s is None else 0.75 * self._unit_s + 0.25 * unit_s
        return counts  # type: ignore[no-any-return]

    def _uses_sets(self, plans: PlanSet) -> bool:
        """``K.plans_use_sets`` of this plan set (one pass, kept until the set changes)."""
        if self._sets[0] is not plans:
            self._sets = (plans, bool(K.plans_use_sets(plans.table, plans.nb_level)))
        return self._sets[1]


@dataclass(frozen=True, slots=True)
class Units:
    """The count phase's units: one per (task, plan) with a live root, so heavy updates
    spread over threads, the costliest tasks (degree product) dealt first. A query with
    orbits of unequal sizes counts with one weighted plan per orbit
    (``QueryPlan.orbit_plans``), not its conditioned plans: ``div`` divides those sums."""

    owner: npt.NDArray[np.int64]
    plan: npt.NDArray[np.int32]
    start: npt.NDArray[np.int64]
    order: npt.NDArray[np.int64]
    div: npt.NDArray[np.int64] | None


def _units(graph: HostGraph, plans: PlanSet, tasks: MatchTasks, degrees: bool) -> Units:
    """``Units`` of ``tasks``; ``degrees`` off reads no version (lengths): the live test
    leaves the degree bound to the kernels and the order weighs the vertices' degrees."""
    counting, div = _counting_tasks(plans, tasks) if plans.weighted else (tasks, None)
    owner, plan64 = live_units(graph, plans, counting, degrees=degrees)
    start = task_starts(owner)
    order = _by_task_cost(graph.seg_len if degrees else graph.vdeg, tasks.a, tasks.b, owner,
                          start)
    return Units(owner, plan64.astype(np.int32), start, order, div)


def _counted(counts: npt.NDArray[np.int64]) -> MatchOutput:
    """The output of a batch that lists nothing: five numpy calls fewer a batch than the
    listing path (at b=64 the CPU's per-batch Python is most of a light query's time)."""
    n = len(counts)
    return MatchOutput(counts, np.zeros(n, np.int64), np.zeros(n + 1, np.int64),
                       np.zeros((0, K.M), np.int32))


def _counting_tasks(plans: PlanSet, tasks: MatchTasks) -> tuple[MatchTasks, npt.NDArray[np.int64]]:
    """``tasks`` where each one over all of its query's plans takes the query's count
    plans (``PlanSet.count_lo``) instead, and the divisor of each task's weighted sum.
    A task over part of them (the static count's plan 0) keeps its own."""
    lo, hi, div = _count_plans(tasks.plan_lo, tasks.plan_hi, plans.count_for,
                               plans.count_lo, plans.count_hi, plans.count_div)
    return replace(tasks, plan_lo=lo, plan_hi=hi), div


@nb.njit(cache=True, nogil=True)
def _count_plans(plan_lo, plan_hi, count_for, count_lo, count_hi, count_div):  # type: ignore[no-untyped-def]
    """``_counting_tasks``' plan ranges and divisors in one pass (ten numpy calls over the
    tasks took 0.33 ms of Enron q3's 18k, on the set-up beside the merge)."""
    n = len(plan_lo)
    lo, hi = np.empty(n, np.int32), np.empty(n, np.int32)
    div = np.empty(n, np.int64)
    for i in range(n):
        p, q = plan_lo[i], plan_hi[i]
        if q > p and count_for[p] == q:
            lo[i], hi[i], div[i] = count_lo[p], count_hi[p], count_div[p]
        else:
            lo[i], hi[i], div[i] = p, q, 1
    return lo, hi, div


def _sets_nv(units: int, nv: int) -> int:
    """Vertex slots of new per-thread marks and weights (``_sets``) for a graph too large
    to keep them, 0 to leave them off: making them costs a count O(vertices), which a
    batch of few units on a large graph never earns back (made for every count, at b=64
    they made Enron 2-5x slower than merges)."""
    return nv if 64 * units >= SETS_UNITS_PER_64 * nv else 0


@nb.njit(cache=True, nogil=True)
def _by_task_cost(seg_len, ta, tb, owner, start):  # type: ignore[no-untyped-def]
    """Units ordered by their task's degree product (task i: ends ta[i], tb[i]) to the
    power of two, largest first, each task's units side by side (``start``: each task's
    first unit): a counting sort of tasks by the product's bit length, which balances
    the threads as well as a full sort (a merge argsort of Enron q0's 2,182 tasks took
    most of 90 us)."""
    nt, nu = len(start), len(owner)
    bits = np.empty(nt, np.int64)
    cnt = np.zeros(65, np.int64)
    for i in range(nt):
        t = owner[start[i]]
        c = np.uint64(seg_len[ta[t]]) * np.uint64(seg_len[tb[t]])
        b = 0
        for sh in (32, 16, 8, 4, 2, 1):   # bit length of c
            if c >> np.uint64(sh):
                c >>= np.uint64(sh)
                b += sh
        b += np.int64(c)
        bits[i] = 64 - b   # largest first
        cnt[64 - b] += 1
    first = np.zeros(65, np.int64)
    for k in range(1, 65):
        first[k] = first[k - 1] + cnt[k - 1]
    by = np.empty(nt, np.int64)
    for i in range(nt):
        by[first[bits[i]]] = i
        first[bits[i]] += 1
    out = np.empty(nu, np.int64)
    w = 0
    for i in range(nt):
        s = start[by[i]]
        e = start[by[i] + 1] if by[i] + 1 < nt else nu
        for u in range(s, e):
            out[w] = u
            w += 1
    return out


EXECUTORS["cpu"] = lambda options: CpuExecutor()
