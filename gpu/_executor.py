"""The one executor interface (CPU and GPU) and the registry that picks one.

An executor matches *tasks*: an updated (or, for static matching, an existing) directed
edge ``a -> b`` with its label, the tick ``k`` whose graph version it must read, and the
range of plans to run. It returns exact counts per task and, for tasks with a listing
cap, up to that many match tuples (internal ids, query-vertex order).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

import numpy as np
import numpy.typing as npt

from ._graph import HostGraph, OpTable
from ._planner import PlanSet
from .exceptions import BackendError

__all__ = ["EXECUTORS", "Done", "Executor", "MatchOutput", "MatchTasks", "Ticket",
           "create_executor"]


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


@dataclass(frozen=True, slots=True)
class MatchOutput:
    counts: npt.NDArray[np.int64]       # [ntasks] exact, unsigned
    listed: npt.NDArray[np.int64]       # [ntasks] tuples written (0 where not listed)
    row_off: npt.NDArray[np.int64]      # [ntasks + 1] first row of each task in ``rows``
    rows: npt.NDArray[np.int32]         # [total, 12] internal ids by query vertex


class Ticket(Protocol):
    """A submitted match; ``wait`` returns its output (the same object on every call)."""

    @property
    def finished(self) -> bool: ...

    def wait(self) -> MatchOutput: ...


@dataclass(frozen=True, slots=True)
class Done:
    """A ticket whose output is already there (synchronous executors)."""

    out: MatchOutput
    finished: bool = True

    def wait(self) -> MatchOutput:
        return self.out


class Executor(Protocol):
    """What the engine needs from a backend.

    ``submit`` may return before the matching ends (the GPU runs several batches at once,
    each against its own ticks); ``drain`` waits for every ticket in flight. The engine
    drains before anything that moves graph memory.
    """

    name: str

    def on_update(self, graph: HostGraph, ops: OpTable) -> None:
        """The host graph just applied ``ops``: mirror them (device backends)."""

    def submit(self, graph: HostGraph, plans: PlanSet, tasks: MatchTasks) -> Ticket:
        """Start exact counts (and capped listings) of every task against its own tick."""

    def drain(self) -> None:
        """Finish every submitted ticket."""

    def device_memory(self) -> tuple[int, int]:
        """(bytes held on the device, bytes it may hold); (0, 0) for host-only backends."""


EXECUTORS: dict[str, Callable[[], Executor]] = {}


def _gpu_available() -> bool:
    try:
        import cupy  # noqa: F401
    except ImportError:
        return False
    try:
        return bool(cupy.cuda.runtime.getDeviceCount() > 0)
    except Exception:  # noqa: BLE001 - any CUDA runtime failure means "no device"
        return False


def create_executor(backend: str) -> Executor:
    """``cpu``, ``gpu`` or ``auto`` (GPU when CuPy sees a device and the backend exists)."""
    if backend == "auto":
        backend = "gpu" if "gpu" in EXECUTORS and _gpu_available() else "cpu"
    if backend not in EXECUTORS:
        known = ", ".join(sorted(EXECUTORS)) or "none"
        raise BackendError(f"backend {backend!r} is not available here (available: {known})")
    return EXECUTORS[backend]()
