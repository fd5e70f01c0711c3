"""The one executor interface (CPU and GPU) and the registry that picks one.

An executor matches *tasks*: an updated (or, for static matching, an existing) directed
edge ``a -> b`` with its label, the tick ``k`` whose graph version it must read, and the
range of plans to run. It returns exact counts per task and, for tasks with a listing
cap, up to that many match tuples (internal ids, query-vertex order).
"""

from __future__ import annotations

import enum
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

import numba as nb
import numpy as np
import numpy.typing as npt

from .cpu._kernels import live_pairs
from .exceptions import BackendError
from .graph._host import HostGraph, OpTable
from .planning._planner import PlanSet

__all__ = ["EXECUTORS", "CachePolicy", "Done", "Executor", "ExecutorOptions", "IoStats",
           "MatchOutput", "MatchTasks", "Ticket", "create_executor", "live_units", "plan_units",
           "task_starts", "task_sums"]


@dataclass(frozen=True, slots=True)
class MatchTasks:
    a: npt.NDArray[np.int32]
    b: npt.NDArray[np.int32]
    label: npt.NDArray[np.int32]
    tick: npt.NDArray[np.int64]
    plan_lo: npt.NDArray[np.int32]
    plan_hi: npt.NDArray[np.int32]
    #: listing cap per task; -1 = count only
    cap: npt.NDArray[np.int64]

    def __len__(self) -> int:
        return len(self.a)


def edge_tasks(a: npt.NDArray[np.int32], b: npt.NDArray[np.int32],
               label: npt.NDArray[np.int32], tick: npt.NDArray[np.int64],
               ei: npt.NDArray[np.int64], query_lo: npt.NDArray[np.int32],
               query_hi: npt.NDArray[np.int32], caps: npt.NDArray[np.int64]) -> MatchTasks:
    """One task per (applied edge update, query), queries innermost: task ``e * nq + j``
    is update ``ei[e]`` (rows of the primitive updates' columns a, b, label, tick) for
    the query whose plans are ``query_lo[j]..query_hi[j]``. The rows are picked in the
    compiled pass (four numpy gathers of Enron's 18k rows before it took 0.1-0.2 ms)."""
    c = np.ascontiguousarray   # one compiled signature (see gpu/_result_columns.py)
    cols = _edge_tasks(c(a, np.int32), c(b, np.int32), c(label, np.int32), c(tick, np.int64),
                       c(ei, np.int64), c(query_lo, np.int32), c(query_hi, np.int32),
                       c(caps, np.int64))
    return MatchTasks(*cols)


@nb.njit(cache=True, nogil=True)
def _edge_tasks(a, b, label, tick, ei, query_lo, query_hi, caps):  # type: ignore[no-untyped-def]
    nq, n = len(query_lo), len(ei)
    m = n * nq
    ta, tb, tl = np.empty(m, np.int32), np.empty(m, np.int32), np.empty(m, np.int32)
    tt, lo, hi = np.empty(m, np.int64), np.empty(m, np.int32), np.empty(m, np.int32)
    cap = np.empty(m, np.int64)
    for e in range(n):
        r = ei[e]
        for j in range(nq):
            k = e * nq + j
            ta[k], tb[k], tl[k], tt[k] = a[r], b[r], label[r], tick[r]
            lo[k], hi[k], cap[k] = query_lo[j], query_hi[j], caps[j]
    return ta, tb, tl, tt, lo, hi, cap


def plan_units(tasks: MatchTasks) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]:
    """Every (task, plan) pair of ``tasks``: owner task, plan index."""
    nplans = (tasks.plan_hi - tasks.plan_lo).astype(np.int64)
    owner = np.repeat(np.arange(len(tasks), dtype=np.int64), nplans)
    first = np.repeat(np.cumsum(nplans) - nplans, nplans)
    plan = np.repeat(tasks.plan_lo.astype(np.int64), nplans) + np.arange(len(owner)) - first
    return owner, plan


def live_units(graph: HostGraph, plans: PlanSet, tasks: MatchTasks,
               only: npt.NDArray[np.bool_] | None = None, degrees: bool = True,
               ) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]:
    """``plan_units`` less the pairs whose root fails the kernels' own first checks
    (labels of both ends, the root edge label, the degree bound, the level-1 symmetry
    condition), in one compiled pass: on labelled queries most pairs end here, not in a
    kernel. ``degrees`` off leaves the degree bound to the kernels (which test it again):
    then no version length is read, so it can run while versions change.

    Exact: the host's current version lengths bound every degree a batch in flight can
    see, and internal ids never change label (a relabel makes a new id)."""
    owner, plan = live_pairs(tasks.a, tasks.b, tasks.label, tasks.plan_lo, tasks.plan_hi,
                             np.zeros(0, np.bool_) if only is None else only, plans.table,
                             graph.vlabel, graph.seg_len if degrees else _NO_DEGREES)
    return owner, plan


_NO_DEGREES = np.zeros(0, np.int32)


def task_starts(owner: npt.NDArray[np.int64]) -> npt.NDArray[np.int64]:
    """Index of each task's first unit (``owner`` ascending, as units come)."""
    if not len(owner):
        return np.zeros(0, np.int64)
    step = np.ones(len(owner), np.bool_)
    np.not_equal(owner[1:], owner[:-1], out=step[1:])
    return np.flatnonzero(step)


def task_sums(n: int, owner: npt.NDArray[np.int64], start: npt.NDArray[np.int64],
              values: npt.NDArray[np.int64]) -> npt.NDArray[np.int64]:
    """Exact int64 sum per task of unit values (``start`` from ``task_starts(owner)``)."""
    out = np.zeros(n, np.int64)
    if len(start):
        out[owner[start]] = np.add.reduceat(values, start)
    return out


@dataclass(frozen=True, slots=True)
class MatchOutput:
    counts: npt.NDArray[np.int64]       # [ntasks] exact, unsigned
    listed: npt.NDArray[np.int64]       # [ntasks] tuples written (0 where not listed)
    row_off: npt.NDArray[np.int64]      # [ntasks + 1] first row of each task in ``rows``
    rows: npt.NDArray[np.int32]         # [total, 12] internal ids by query vertex
    io: IoStats | None = None           # out-of-core traffic (GPU, host-resident graph)


@dataclass(frozen=True, slots=True)
class IoStats:
    """What a batch moved in out-of-core mode (GCSM Table 5's breakdown)."""

    host_bytes: int = 0          # read by kernels from host memory over PCIe
    cache_hits: int = 0          # neighbour-array lookups served by the device cache
    cache_misses: int = 0        # ... read from host memory instead
    cached_vertices: int = 0
    cache_bytes: int = 0         # sent in the cache copy
    estimate_seconds: float = 0.0
    pack_seconds: float = 0.0    # host: gathering the cached arrays
    copy_seconds: float = 0.0    # device: the one host-to-device copy
    kernel_seconds: float = 0.0  # device: the count (and listing) kernels
    walks: int = 0


class Ticket(Protocol):
    """A submitted match; ``wait`` returns its output (the same object on every call)."""

    @property
    def finished(self) -> bool: ...

    @property
    def ready(self) -> bool:
        """``wait`` would not block on the device."""
        ...

    def wait(self) -> MatchOutput: ...

    def sync(self) -> None:
        """Block until :attr:`ready`. Touches no executor state, so any thread may call it
        while another submits (the service waits for the device off its engine calls)."""
        ...


@dataclass(frozen=True, slots=True)
class Done:
    """A ticket whose output is already there (synchronous executors)."""

    out: MatchOutput
    finished: bool = True
    ready: bool = True

    def wait(self) -> MatchOutput:
        return self.out

    def sync(self) -> None:
        return None


class Executor(Protocol):
    """What the engine needs from a backend.

    ``submit`` may return before the matching ends (the GPU runs several batches at once,
    each against its own ticks); ``drain`` waits for every ticket in flight. The engine
    drains before anything that moves graph memory.
    """

    name: str
    #: whether matching may still read the graph while the next batch is applied (the host
    #: graph then copies each version a batch changes instead of writing it in place)
    reads_during_updates: bool

    def on_update(self, graph: HostGraph, ops: OpTable) -> None:
        """The host graph just applied ``ops``: mirror them (device backends)."""

    def submit(self, graph: HostGraph, plans: PlanSet, tasks: MatchTasks) -> Ticket:
        """Start exact counts (and capped listings) of every task against its own tick."""

    def drain(self) -> None:
        """Finish every submitted ticket."""

    def device_memory(self) -> tuple[int, int]:
        """(bytes held on the device, bytes it may hold); (0, 0) for host-only backends."""


class CachePolicy(enum.StrEnum):
    """What the out-of-core device cache holds (GPU)."""

    WALK = "walk"        # the arrays a random-walk estimate says the batch reads most
    DEGREE = "degree"    # the highest-degree vertices' arrays (GCSM's naive baseline)
    NONE = "none"        # nothing: every read goes over PCIe (zero-copy baseline)


@dataclass(frozen=True, slots=True)
class ExecutorOptions:
    """Settings a backend may use (the CPU executor reads the host graph and needs none)."""

    #: GPU: device bytes for neighbour arrays (0: no limit); beyond it the graph stays in
    #: host memory and batches read it through a device cache and PCIe (out-of-core)
    graph_budget_bytes: int = 0
    #: GPU out-of-core cache: "walk" (estimated most-read), "degree" or "none"
    cache: str = "walk"
    #: GPU: the device owns the graph and resolves updates itself (no host updater, no
    #: per-batch install; stage 1 of the device pipeline, docs/design.md); off (default
    #: until snapshots read it and its small-batch cost is down), the host updater
    #: resolves and the device mirrors it
    device_graph: bool = False
    #: GPU: SMs matching leaves free for the updater (0: matching on every SM)
    front_sms: int = 0

    def __post_init__(self) -> None:
        if self.graph_budget_bytes < 0:
            raise BackendError("graph_budget_bytes must be >= 0")
        if self.front_sms < 0:
            raise BackendError(f"front_sms must be >= 0, not {self.front_sms}")
        if self.cache not in set(CachePolicy):
            raise BackendError(f"cache {self.cache!r}: expected one of "
                               f"{', '.join(repr(str(c)) for c in CachePolicy)}")


EXECUTORS: dict[str, Callable[[ExecutorOptions], Executor]] = {}


def _gpu_available() -> bool:
    try:
        import cupy  # noqa: F401
    except ImportError:
        return False
    try:
        return bool(cupy.cuda.runtime.getDeviceCount() > 0)
    except Exception:  # noqa: BLE001 - any CUDA runtime failure means "no device"
        return False


def create_executor(backend: str, options: ExecutorOptions | None = None) -> Executor:
    """``cpu``, ``gpu`` or ``auto`` (GPU when CuPy sees a device and the backend exists)."""
    if backend == "auto":
        backend = "gpu" if "gpu" in EXECUTORS and _gpu_available() else "cpu"
    if backend not in EXECUTORS:
        known = ", ".join(sorted(EXECUTORS)) or "none"
        raise BackendError(f"backend {backend!r} is not available here (available: {known})")
    return EXECUTORS[backend](options or ExecutorOptions())
