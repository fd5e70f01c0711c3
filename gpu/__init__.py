"""Matching runtime: exact continuous subgraph matching on the CPU or a GPU.

    _types.py, _results.py   updates, statuses, counts and listings (the public records)
    _engine.py               Engine: queries, batches in flight, results in order
    _executor.py             the one executor interface, tasks and units, the registry
    _jit.py, _intrinsics.py  numba helpers: leaf functions, atomic fetch-and-add
    graph/                   the host multi-version graph and the external-id map
    planning/                queries, symmetry, matching plans
    cpu/                     the CPU executor (numba), the reference
    cuda/                    the CUDA executor: the device-owned graph, the pipeline, the
                             .cu kernels and their loader
    ooc/                     graphs larger than the GPU: walk estimates, the device cache
    exceptions.py            CsmError and its subclasses

An update's path through the CUDA executor is drawn in docs/design.md, "Device-resident
pipeline".
"""

from . import cpu, cuda  # noqa: F401  (register the "cpu" and "gpu" executors)
from ._engine import Engine, PendingBatch, QuerySpec, RegisteredQuery, warm_up
from ._executor import (
    EXECUTORS,
    Executor,
    ExecutorOptions,
    IoStats,
    MatchOutput,
    MatchTasks,
    create_executor,
)
from ._results import BatchResult, BatchStats, Listing, MatchDelta
from ._types import (
    INF_TICK,
    MAX_QUERY_VERTICES,
    WILDCARD,
    CountMode,
    RejectReason,
    UpdateBatch,
    UpdateOp,
    UpdateStatus,
)
from .exceptions import BackendError, CsmError, EngineError, QueryError, UnknownQueryError
from .graph._host import HostGraph, LoadStats, OpTable
from .planning._query import Query

__all__ = [
    "ExecutorOptions",
    "IoStats",
    "EXECUTORS",
    "INF_TICK",
    "MAX_QUERY_VERTICES",
    "WILDCARD",
    "BackendError",
    "BatchResult",
    "BatchStats",
    "CountMode",
    "CsmError",
    "Engine",
    "EngineError",
    "Executor",
    "HostGraph",
    "Listing",
    "LoadStats",
    "MatchDelta",
    "MatchOutput",
    "MatchTasks",
    "OpTable",
    "PendingBatch",
    "Query",
    "QueryError",
    "QuerySpec",
    "RegisteredQuery",
    "RejectReason",
    "UnknownQueryError",
    "UpdateBatch",
    "UpdateOp",
    "UpdateStatus",
    "create_executor",
    "warm_up",
]
