"""Matching runtime: exact continuous subgraph matching on the CPU or a GPU."""

from . import _cpu, _gpu  # noqa: F401  (register the "cpu" and "gpu" executors)
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
from ._graph import HostGraph, LoadStats, OpTable
from ._query import Query
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
