"""Runs of update messages on the engine: submitted in log order, several at once where
the executor pipelines them (the device pipeline), read back and handed on in log order.

One driver makes every engine call of the runs (``submit``, ``result``), one at a time,
so the engine is never entered twice. Waiting for a batch's device work
(``PendingBatch.wait_ready``) touches no engine state and overlaps the next submit. The
oldest run is read as soon as it is ready: on the CPU, whose ``submit`` has matched the
run already, that is before the next run starts, so its deltas leave at once; with the
device pipeline, up to ``depth`` runs are on the GPU while the oldest is read. Results go
to ``on_result`` in log order, each after the previous call has returned; a run's
``done`` future resolves then (a chunk commits once all of its runs are done).

Per-query delivery (with ``on_query``; on by default where the executor pipelines): while
the oldest run is not ready, each query's next runs that are ready for that query
(``PendingBatch.ready_queries``) go to ``on_query`` one query at a time, in log order per
query, so a heavy query's matching holds back its own deltas only; ``on_result`` then
gets the run with the queries already handed on in :attr:`Run.handed`.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections import deque
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from gpu import BatchResult, Engine, PendingBatch, UpdateBatch
from streams.codec import SEQ_STRIDE, Updates

from ._types import Chunk

__all__ = ["QUERY_POLL", "RUNS_IN_FLIGHT", "RUN_UPDATES", "Run", "Runs", "run_batch"]

#: runs submitted and not yet read at most (the device pipeline's depth)
RUNS_IN_FLIGHT = 8
#: updates per engine batch at most, so decoding the next batch overlaps matching this one
RUN_UPDATES = 32_768
#: per-query delivery: how often the driver looks for queries ready while the oldest run
#: is not (seconds; a run's whole readiness still wakes it at once)
QUERY_POLL = 100e-6


def run_batch(run: list[tuple[int, Updates, float]]) -> UpdateBatch:
    """One engine batch of the run's messages (offset, updates, arrival); update i of the
    message at offset o gets seq ``o * SEQ_STRIDE + i``."""
    seq = np.concatenate([off * SEQ_STRIDE + np.arange(len(u), dtype=np.int64)
                          for off, u, _ in run])
    us = [u for _, u, _ in run]
    return UpdateBatch(seq=seq, op=np.concatenate([u.op for u in us]),
                       src=np.concatenate([u.src for u in us]),
                       dst=np.concatenate([u.dst for u in us]),
                       label=np.concatenate([u.label for u in us]))


@dataclass(slots=True)
class Run:
    """Update messages handed to the engine as one batch, and where its deltas go."""

    run: list[tuple[int, Updates, float]]
    batch: UpdateBatch
    chunk: Chunk
    replay: bool
    #: when it was submitted (the batch latency metric)
    t0: float = 0.0
    done: asyncio.Future[None] = field(
        default_factory=lambda: asyncio.get_running_loop().create_future())
    #: the graph's next tick when the run was submitted (its updates' ticks are >= it)
    tick0: int = 0
    pending: PendingBatch | None = None
    #: queries whose deltas of this run were handed on already (per-query delivery)
    handed: set[int] = field(default_factory=set)


class Runs:
    """The runs between the log and the publisher (see the module docstring)."""

    def __init__(self, engine: Engine, on_result: Callable[[Run, BatchResult], Awaitable[None]],
                 depth: int = RUNS_IN_FLIGHT,
                 on_query: Callable[[Run, BatchResult], Awaitable[None]] | None = None,
                 per_query: bool | None = None) -> None:
        """``on_query``: where one query's result of a run goes ahead of the run's (a
        BatchResult of that query alone). ``per_query``: True hands every query on that
        way, also where the oldest run is ready as a whole; None, where the executor
        pipelines, only while the oldest run is not ready (a ready run goes whole, in one
        publish); False never."""
        self.engine, self.on_result, self.depth = engine, on_result, depth
        self.on_query = on_query
        pipelined = bool(getattr(engine.executor, "pipelined", False))
        self.per_query = on_query is not None and (pipelined if per_query is None
                                                   else per_query)
        self._eager = per_query is True
        #: runs open at most before the runtime fetches more: a pipelining executor takes
        #: the next while the GPU works; the CPU's submit does the work, so one there
        self.ahead = 2 if pipelined else 1
        self._queued: deque[Run] = deque()   # its first may be being submitted
        self._flight: deque[Run] = deque()
        self._wake = asyncio.Event()
        self._read_one = asyncio.Event()   # set whenever a run is handed on (or all failed)
        self._device: tuple[Run, asyncio.Future[Any]] | None = None
        self._woke: asyncio.Future[Any] | None = None   # _wait's wait for a new run
        self._task: asyncio.Task[None] | None = None
        self._failed: BaseException | None = None

    def add(self, run: Run) -> None:
        """Queue ``run`` behind every run added before."""
        if self._failed is not None:
            raise self._failed
        run.chunk.runs.append(run.done)
        self._queued.append(run)
        self._wake.set()
        if self._task is None:
            self._task = asyncio.create_task(self._drive(), name="csm-runs")

    @property
    def open(self) -> int:
        """Runs added and not yet handed on."""
        return len(self._queued) + len(self._flight)

    async def below(self, n: int | None = None) -> None:
        """Until fewer than ``n`` runs are open. The runtime fetches records only then:
        what arrives meanwhile makes the next run bigger (fewer, fuller batches under
        load), instead of a queue of small ones. ``n`` defaults to :attr:`ahead`."""
        n = self.ahead if n is None else n
        while self.open >= n and self._failed is None:
            self._read_one.clear()
            await self._read_one.wait()
        if self._failed is not None:
            raise self._failed

    async def drain(self) -> None:
        """Until every run added so far is handed on (the engine is idle then)."""
        await self.below(1)

    async def close(self) -> None:
        """Stop: no run is submitted or handed on after this (their chunks never commit)."""
        if self._woke is not None:
            self._woke.cancel()
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        for run in self._open():
            run.done.cancel()

    def _open(self) -> list[Run]:
        return [*self._flight, *self._queued]

    async def _drive(self) -> None:
        try:
            while True:
                if self._flight and self.per_query and (
                        self._eager or not self._flight[0].pending.ready):  # type: ignore[union-attr]
                    await self._hand_queries()
                if self._flight and self._flight[0].pending.ready:  # type: ignore[union-attr]
                    await self._read()
                elif self._queued and len(self._flight) < self.depth:
                    await self._submit()
                elif self._flight:
                    await self._wait()
                else:
                    self._wake.clear()
                    await self._wake.wait()
        except Exception as exc:  # every waiting chunk must see it
            self._failed = exc
            for run in self._open():
                if not run.done.done():
                    run.done.set_exception(exc)
            self._flight.clear()
            self._queued.clear()
            self._read_one.set()

    async def _submit(self) -> None:
        run = self._queued[0]   # stays queued (open) while it is submitted
        run.tick0 = self.engine.graph.tick + 1   # only this driver enters the engine
        run.t0 = time.perf_counter()
        run.pending = await asyncio.to_thread(self.engine.submit, run.batch)
        self._flight.append(run)
        self._queued.popleft()

    async def _read(self) -> None:
        run = self._flight[0]
        assert run.pending is not None
        result = await asyncio.to_thread(run.pending.result)
        await self.on_result(run, result)
        self._flight.popleft()
        run.done.set_result(None)
        self._read_one.set()

    async def _hand_queries(self) -> None:
        """Each query's runs, oldest first, as long as they are ready for that query (one
        poll a run for all its queries)."""
        assert self.on_query is not None
        qids = self._flight[0].pending.qids  # type: ignore[union-attr]
        blocked: set[int] = set()
        for run in self._flight:
            p = run.pending
            assert p is not None
            todo = [q for q in qids if q not in blocked and q not in run.handed]
            if not todo:
                if len(blocked) == len(qids):
                    return
                continue
            ready = set(p.ready_queries())
            for q in todo:
                if q in ready:
                    await self.on_query(run, p.query_result(q))
                    run.handed.add(q)
                else:   # (also a query unregistered since: not standing in this run)
                    blocked.add(q)

    async def _wait(self) -> None:
        """For the oldest run's device work, or for a new run to submit meanwhile (with
        per-query delivery, at most QUERY_POLL: a query may be ready before the run)."""
        run = self._flight[0]
        assert run.pending is not None
        if self._device is None or self._device[0] is not run:
            if self._device is not None and self._device[1].done():
                self._device[1].exception()   # read: a run's failure surfaces in result()
            self._device = (run, asyncio.ensure_future(asyncio.to_thread(run.pending.wait_ready)))
        dev = self._device[1]
        if self._woke is None or self._woke.done():   # (kept across per-query polls: a
            self._wake.clear()                        # task each 100 us was the loop's)
            self._woke = asyncio.ensure_future(self._wake.wait())
        await asyncio.wait({dev, self._woke}, return_when=asyncio.FIRST_COMPLETED,
                           timeout=QUERY_POLL if self.per_query else None)
        if dev.done():
            self._device = None
            dev.result()
