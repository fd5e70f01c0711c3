"""What the runtime's parts share: its configuration, a registered query's record, what a
control record led to, and the per-chunk bookkeeping every part writes into."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gpu import LoadStats, RegisteredQuery, UpdateStatus
from streams.codec import QueryDoc

__all__ = ["STATUS", "STATUS_NAMES", "Chunk", "Outcome", "RegisteredDoc", "RuntimeConfig"]

STATUS = {UpdateStatus.APPLIED: "applied", UpdateStatus.IGNORED: "ignored",
          UpdateStatus.REJECTED: "rejected"}
STATUS_NAMES = tuple(STATUS.values())


@dataclass(frozen=True, slots=True)
class RuntimeConfig:
    updates_topic: str = "csm.updates"
    matches_topic: str = "csm.matches"
    queries_topic: str = "csm.queries"
    deadletter_topic: str = "csm.deadletter"
    group: str = "csm-runtime"
    max_poll_records: int = 1000
    matches_partitions: int = 1
    recent_per_query: int = 10_000
    #: where snapshots go (None: none; recovery replays the whole log)
    snapshot_dir: Path | None = None
    #: a snapshot after this many update-log records (keeps the embedded broker's
    #: partition listing short) or this many updates (bounds the replay), whichever first
    snapshot_every: int = 1000
    snapshot_every_updates: int = 500_000
    #: scale-out: the instance group (None: one instance owning every query) and the
    #: assignment topic whose partitions are the shards (one per matches partition)
    instance_group: str | None = None
    instance_id: str = "csm"
    advertised_url: str = ""
    assignment_topic: str = "csm.shards"
    session_timeout_ms: int = 3000
    #: primitive updates kept for a new owner's catch-up (0: none)
    window_updates: int = 0
    #: hand each query's deltas on once that query is matched (None: where the executor
    #: pipelines; service/_runs.py)
    per_query_delivery: bool | None = None


@dataclass(frozen=True, slots=True)
class RegisteredDoc:
    reg: RegisteredQuery
    doc: QueryDoc
    seq: int
    #: the graph's next tick when it was registered (-1: before the last restore)
    tick: int = -1


#: what a control record led to: a registration, a load, or the error to answer with
Outcome = RegisteredDoc | LoadStats | Exception | None


@dataclass(slots=True)
class Chunk:
    """Per-chunk bookkeeping: sends to await, arrivals to time, outcomes to publish."""

    futures: list[asyncio.Future[Any]]
    arrivals: list[float]
    outcomes: dict[int, Outcome]
    #: per query: deltas, matches created, matches destroyed (metrics, once per chunk)
    tally: dict[int, list[int]] = field(default_factory=dict)
    #: record batches filled up, waiting to be sent before the open ones (partition, batch)
    full: list[tuple[int, Any]] = field(default_factory=list)
    #: one future per run of update messages: done once its deltas went to the producer
    runs: list[asyncio.Future[None]] = field(default_factory=list)
