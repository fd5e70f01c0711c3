"""The retention window: the last engine runs, kept with their ticks, so a shard's new
owner can match the updates its last owner did not publish against the graph versions
they saw (``Engine.rematch``), even though its own graph is already past them.

The engine keeps every version readable from :attr:`Window.start_tick` on
(``Engine.hold_versions``): entries deleted inside the window are reclaimed only once
it moves past them. A gap that starts before :attr:`Window.start` cannot be served from
here: the new owner rebuilds those deltas from a snapshot and the log instead.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass
from typing import Any

import numpy as np

from gpu import BatchResult, Engine

from ._types import RegisteredDoc

__all__ = ["PastRun", "Retired", "Window"]


@dataclass(frozen=True, slots=True)
class PastRun:
    """One engine run: the update-log offsets it covered and its primitive updates."""

    first: int
    last: int
    result: BatchResult
    arrived: dict[int, float]

    @classmethod
    def of(cls, first: int, last: int, result: BatchResult,
           arrived: dict[int, float]) -> PastRun:
        """A run's primitive updates, without its counts: a new owner matches them again."""
        r = result
        return cls(first, last, BatchResult(
            ops=r.ops, seq=r.seq, sub=r.sub, request_op=r.request_op, query_ids=(),
            counts=np.zeros((len(r.ops), 0), np.int64)), arrived)


@dataclass(frozen=True, slots=True)
class Retired:
    """A query deleted inside the window: its deltas before ``offset`` may still be owed."""

    doc: RegisteredDoc
    offset: int


class Window:
    """``limit``: primitive updates kept at most (0: none, the single-instance default)."""

    def __init__(self, engine: Engine, limit: int) -> None:
        self.engine, self.limit = engine, limit
        self.runs: deque[tuple[int, PastRun]] = deque()   # (tick before the run, run)
        self.retired: dict[int, Retired] = {}
        #: dead-lettered records (offset, record, reason): shard 0's owner sends them
        self.dead: deque[tuple[int, Any, str]] = deque()
        self.start = 0
        self.start_tick = 1
        self._size = 0

    @property
    def enabled(self) -> bool:
        return self.limit > 0

    def reset(self, offset: int) -> None:
        """Start empty at ``offset`` (after a restore: nothing older is kept)."""
        self.runs.clear()
        self.retired.clear()
        self.dead.clear()
        self._size = 0
        self.start, self.start_tick = offset, self.engine.graph.tick + 1
        self._hold()

    def add(self, tick0: int, run: PastRun) -> None:
        """A run whose first update got a tick >= ``tick0`` (the graph's next tick)."""
        if not self.enabled:
            return
        self.runs.append((tick0, run))
        self._size += len(run.result.ops)
        while self._size > self.limit and len(self.runs) > 1:
            _, old = self.runs.popleft()
            self._size -= len(old.result.ops)
            self.start = old.last + 1
        if self.runs:
            self.start_tick = self.runs[0][0]
        for q in [q for q, r in self.retired.items() if r.offset < self.start]:
            del self.retired[q]
        while self.dead and self.dead[0][0] < self.start:
            self.dead.popleft()
        self._hold()

    def retire(self, doc: RegisteredDoc, offset: int) -> None:
        if self.enabled:
            self.retired[doc.reg.id] = Retired(doc, offset)

    def dead_letter(self, rec: Any, reason: str) -> None:
        if self.enabled:
            self.dead.append((rec.offset, rec, reason))

    def covers(self, offset: int) -> bool:
        """Every update from ``offset`` on is here."""
        return offset >= self.start

    def since(self, offset: int) -> list[PastRun]:
        return [r for _, r in self.runs if r.last >= offset]

    def _hold(self) -> None:
        self.engine.hold_versions(self.start_tick if self.enabled else None)
