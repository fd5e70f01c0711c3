"""The matching runtime: consume the updates log in order, match, publish, commit.

The updates topic (one partition) is the source of truth. For every chunk of records:

1. decode each message (a bad one goes to the dead-letter topic with its reason);
2. apply runs of update messages as one engine batch, control records in between;
3. send one matches message per (update, query) with a non-empty delta;
4. wait until the broker has acknowledged every send;
5. commit the offset after the chunk, then wake the API requests waiting on it.

The parts, one module each: ``_consume`` (reading the log, engine runs), ``_publish``
(the matches, dead-letter and queries topics), ``_control`` (registrations, deletions,
graph uploads), ``_recovery`` (snapshot, replay and the cut after a crash),
``_ownership`` and ``_catchup`` (scale-out: which shards of the queries this instance
publishes, and taking one over), ``_window`` (past runs kept for that). This class runs
the steps above and answers the API.

Scale-out (``instance_group`` set): every instance applies the whole log to its own
graph, but matches and publishes only the queries of the shards the group gives it, and
commits each shard's progress on the assignment topic instead of an update-log offset.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable
from typing import Any

import numpy as np
from aiokafka import TopicPartition

from gpu import BatchResult, Engine, UpdateBatch, UpdateOp, UpdateStatus
from streams import OP_NAMES
from streams.codec import LoadPart, Updates, decode
from streams.exceptions import DecodeError
from streams.kafka import KafkaConfig, kafka_errors, make_consumer, make_producer

from ._catchup import release, take_over
from ._consume import LogReader
from ._control import Controls
from ._faults import crash_point
from ._ownership import Ownership
from ._publish import Publisher
from ._recovery import recover, take_snapshot
from ._runs import RUN_UPDATES, Run, Runs, run_batch
from ._snapshots import Snapshots
from ._types import STATUS, STATUS_NAMES, Chunk, Outcome, RegisteredDoc, RuntimeConfig
from ._window import PastRun, Window
from .exceptions import NotOwner, NotReady
from .metrics import Metrics

__all__ = ["STATUS_NAMES", "Outcome", "RegisteredDoc", "Runtime", "RuntimeConfig"]

log = logging.getLogger("csm.runtime")


class Runtime:
    def __init__(self, engine: Engine, kafka: KafkaConfig, cfg: RuntimeConfig,
                 metrics: Metrics, truncate: Callable[[int], int] | None = None) -> None:
        """``truncate(offset)`` drops update-log records below ``offset`` once a snapshot
        there is on disk (the durable embedded broker's retention)."""
        self.engine, self.kafka, self.cfg, self.metrics = engine, kafka, cfg, metrics
        self.snaps = Snapshots(cfg.snapshot_dir, cfg.snapshot_every,
                               cfg.snapshot_every_updates, truncate)
        self._finishing: asyncio.Future[None] | None = None
        self.tp = TopicPartition(cfg.updates_topic, 0)
        self.queries: dict[int, RegisteredDoc] = {}
        self.next_offset = 0
        self.ready = False
        self.failed: BaseException | None = None
        self._outcomes: dict[int, Outcome] = {}
        self._waiters: dict[int, list[asyncio.Future[Outcome]]] = {}
        self._reclaimed_seen = 0
        self._task: asyncio.Task[None] | None = None
        self._producer = make_producer(kafka)
        group = cfg.instance_group
        self.consumer = make_consumer(kafka, None if group else cfg.group)
        self.reader = LogReader(self.consumer, self.tp, cfg.max_poll_records)
        self.pub = Publisher(self._producer, cfg, metrics)
        self.window = Window(engine, cfg.window_updates if group else 0)
        self.own = None if group is None else Ownership(
            kafka, cfg.assignment_topic, group, cfg.instance_id, metrics,
            cfg.matches_partitions, cfg.session_timeout_ms, cfg.advertised_url)
        #: held while a chunk is handled or shards change hands (one at a time)
        self.step = asyncio.Lock()
        if self.own is None:   # one instance: every shard is its own
            metrics.owned_shards.set(cfg.matches_partitions)
        self.controls = Controls(engine, self.queries, self.pub, metrics, self.window,
                                 self.owns)
        self.runs = Runs(engine, self._ran, on_query=self._ran_query,
                         per_query=cfg.per_query_delivery)

    def owns(self, qid: int) -> bool:
        """This instance publishes the query's deltas (alone)."""
        return self.own is None or qid % self.cfg.matches_partitions in self.own.owned

    # -- lifecycle ---------------------------------------------------------------
    async def start(self) -> None:
        with kafka_errors("starting the runtime's Kafka clients"):
            await self._producer.start()
            await self.consumer.start()
        self.consumer.assign([self.tp])
        self._task = asyncio.create_task(self._main(), name="csm-runtime")

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._task
        await self.reader.close()
        if self.own is not None:   # a clean leave: hand the shards over where they stand
            with contextlib.suppress(Exception):
                await self.settled()
                await self.runs.drain()   # a stopped chunk's runs: none publishes after leaving
                await self.own.commit(self.next_offset)
            await self.own.stop()
        await self.runs.close()
        if self._finishing is not None:
            self._finishing.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._finishing
        await self.snaps.close()
        with contextlib.suppress(Exception):
            await self.consumer.stop()
        with contextlib.suppress(Exception):
            await self._producer.stop()
        for fs in self._waiters.values():
            for f in fs:
                f.cancel()

    async def _main(self) -> None:
        try:
            await recover(self)
            await self._maybe_snapshot()   # a long replay: the next restart skips it
            self.ready = True
            self.metrics.ready.set(1)
            self.reader.expected = self.next_offset
            if self.own is not None:
                self.own.release = lambda shards: release(self, shards)
                await self.own.start()
            while True:
                await self.runs.below()
                records = await self.reader.next_records()
                if self._finishing is not None and self._finishing.done():
                    self._finishing.result()   # surfaces a failed publish or commit
                async with self.step:
                    if self.own is not None and self.own.pending:
                        await self.settled()
                        await take_over(self, set(self.own.pending))
                    if records:
                        await self.handle(records, replay=False)
                if records:
                    await self._maybe_snapshot()
                hw = self.consumer.highwater(self.tp)
                if hw is not None:
                    self.metrics.lag.set(max(hw - self.next_offset, 0))
        except asyncio.CancelledError:
            raise
        except BaseException as exc:
            log.exception("runtime stopped")
            self.failed = exc
            self.ready = False
            self.metrics.ready.set(0)
            for fs in self._waiters.values():
                for f in fs:
                    if not f.done():
                        f.set_result(exc)

    def offer(self, offset: int, value: bytes, timestamp_ms: int) -> None:
        """A record the broker acknowledged at ``offset`` for this process (the API)."""
        self.reader.offer(offset, value, timestamp_ms)

    # -- API side ----------------------------------------------------------------
    async def outcome(self, offset: int, timeout: float) -> Outcome:
        """Wait until the record at ``offset`` is processed and committed."""
        if self.failed is not None:
            return self.failed
        if offset < self.next_offset:
            return self._outcomes.get(offset)
        fut: asyncio.Future[Outcome] = asyncio.get_running_loop().create_future()
        self._waiters.setdefault(offset, []).append(fut)
        return await asyncio.wait_for(fut, timeout)

    def recent(self, qid: int, after_seq: int, limit: int) -> list[dict[str, Any]]:
        return self.pub.recent(qid, after_seq, limit)

    async def check_owner(self, qid: int) -> None:
        """Nothing where this instance publishes ``qid``; else :class:`NotOwner` naming
        the instance that does (or :class:`NotReady` while its shard has none)."""
        if self.own is None or self.owns(qid):
            return
        shard = qid % self.cfg.matches_partitions
        who = await self.own.owner(shard)
        if who is None or who.get("instance") == self.cfg.instance_id:
            raise NotReady(f"query {qid} (shard {shard}) is moving to another instance; "
                           "retry shortly")
        raise NotOwner(f"query {qid} lives on instance {who.get('instance')} "
                       f"({who.get('url')})", instance=who.get("instance", ""),
                       url=who.get("url", ""))

    # -- snapshots -------------------------------------------------------------------
    async def _maybe_snapshot(self) -> None:
        """When one is due, between chunks (the engine is idle) and once every chunk is
        committed: copy the state here; it is written on a worker thread."""
        if self.controls.loads or not self.snaps.due(self.next_offset):
            return
        await self.settled()
        self.snaps.write(take_snapshot(self))

    # -- processing ------------------------------------------------------------------
    async def handle(self, records: list[Any], *, replay: bool) -> None:
        """Decode while the engine works: runs of update messages (cut at control records
        and at ``RUN_UPDATES``) go to the engine in log order (``_runs``: several at once
        on the device pipeline, and across chunks), and their deltas are published in
        that order as they come back. A control record waits for every run before it."""
        if not replay:
            crash_point("publish")
        chunk = Chunk([], [], {})
        run: list[tuple[int, Updates, float]] = []
        size = 0
        for rec in records:
            try:
                item = decode(rec.value)
            except DecodeError as exc:
                item = exc
            if isinstance(item, Updates):
                arrived = item.arrived_at if item.arrived_at is not None else rec.timestamp / 1e3
                chunk.arrivals.append(arrived)
                run.append((rec.offset, item, arrived))
                size += len(item)
                self.snaps.work += len(item)
                if size >= RUN_UPDATES:
                    self._add_run(run, chunk, replay)
                    run, size = [], 0
                continue
            self._add_run(run, chunk, replay)
            run, size = [], 0
            await self.runs.drain()
            if isinstance(item, DecodeError):   # scale-out: shard 0's owner sends them
                self.window.dead_letter(rec, str(item))
                await self.pub.dead_letter(rec, str(item), chunk, replay or not self.owns(0))
            else:
                chunk.outcomes[rec.offset] = await self.controls.apply(rec.offset, item, chunk,
                                                                       replay)
                self.snaps.work += len(item.edges) if isinstance(item, LoadPart) else 1
        self._add_run(run, chunk, replay)
        last = records[-1].offset
        self.reader.expected = last + 1
        if replay:
            await self.runs.drain()
            self.next_offset = last + 1
            self._settle(chunk.outcomes)
            self.gauges()
            return
        # steps 4-5 overlap the next chunk's matching: the broker's acks and the commit
        # are waits, and each commit still follows its own chunk's acks and the previous
        # commit (the order recovery relies on)
        self._finishing = asyncio.ensure_future(self._finish(self._finishing, chunk, last))

    async def _finish(self, before: asyncio.Future[None] | None, chunk: Chunk,
                      last: int) -> None:
        """Wait for the chunk's acks, commit after it, then answer its waiters."""
        if before is not None:
            await before
        await asyncio.gather(*chunk.runs)   # their deltas are all handed to the producer
        with kafka_errors("publishing deltas"):
            await asyncio.gather(*chunk.futures)
            crash_point("commit")
            if self.own is None:
                await self.consumer.commit({self.tp: last + 1})
        if self.own is not None:
            await self.own.commit(last + 1)
        now = time.time()
        for a in chunk.arrivals:
            self.metrics.response.observe(max(now - a, 0.0))
        for q, (n, pos, neg) in chunk.tally.items():
            if q in self.queries:
                self.metrics.deltas.labels(str(q)).inc(n)
                self.metrics.matches.labels(str(q), "+").inc(pos)
                self.metrics.matches.labels(str(q), "-").inc(neg)
        self.next_offset = last + 1
        self.pub.committed(self.next_offset)
        self._settle(chunk.outcomes)
        self.gauges()

    async def settled(self) -> None:
        """Until every chunk handled so far is committed (raises what failed)."""
        if self._finishing is not None:
            await self._finishing

    def _settle(self, outcomes: dict[int, Outcome]) -> None:
        self._outcomes.update(outcomes)
        while len(self._outcomes) > 10_000:
            self._outcomes.pop(next(iter(self._outcomes)))
        for off in [o for o in self._waiters if o < self.next_offset]:
            for f in self._waiters.pop(off):
                if not f.done():
                    f.set_result(self._outcomes.get(off))

    def gauges(self) -> None:
        g, m = self.engine.graph, self.metrics
        m.vertices.set(g.num_vertices)
        m.edges.set(g.num_edges)
        m.versions.set(g.pool_used)
        m.garbage.set(g.garbage)
        gained = g.reclaimed - self._reclaimed_seen
        if gained > 0:
            m.reclaimed.inc(gained)
        self._reclaimed_seen = g.reclaimed
        used, budget = self.engine.executor.device_memory()
        m.device_used.set(used)
        m.device_budget.set(budget)

    def _add_run(self, run: list[tuple[int, Updates, float]], chunk: Chunk,
                 replay: bool) -> None:
        if run:
            self.runs.add(Run(run, run_batch(run), chunk, replay))

    async def _ran(self, done: Run, result: BatchResult) -> None:
        """A run's result, in log order: its deltas to the matches topic, and the past run
        a shard's next owner may need again."""
        self.metrics.batch.observe(time.perf_counter() - done.t0)
        self._count_updates(done.batch, result)
        st = result.stats
        if st.host_bytes:
            self.metrics.host_bytes.inc(st.host_bytes)
        if st.cache_hits + st.cache_misses:
            self.metrics.cache_hit.set(st.cache_hits / (st.cache_hits + st.cache_misses))
        arrived = {off: a for off, _, a in done.run}
        if not done.replay:   # (the queries handed on ahead are on their way already)
            rest = (result if not done.handed else
                    result.select(q for q in result.query_ids if q not in done.handed))
            await self.pub.publish(rest, arrived, done.chunk)
        if self.window.enabled:
            self.window.add(done.tick0, PastRun.of(done.run[0][0], done.run[-1][0], result,
                                                   arrived))

    async def _ran_query(self, run: Run, result: BatchResult) -> None:
        """One query's result of a run ahead of the run's (per-query delivery): its deltas
        to the matches topic, in log order per query."""
        if not run.replay:
            await self.pub.publish(result, {off: a for off, _, a in run.run}, run.chunk)

    def _count_updates(self, batch: UpdateBatch, result: BatchResult) -> None:
        raw = result.ops.raw
        if not len(raw):
            return
        last = np.r_[raw[1:] != raw[:-1], True]
        status = np.full(len(batch), UpdateStatus.APPLIED, np.int64)
        status[raw[last]] = result.ops.status[last]
        key = batch.op.astype(np.int64) * 3 + status
        for k, n in enumerate(np.bincount(key, minlength=12).tolist()):
            if n:
                self.metrics.updates.labels(OP_NAMES[UpdateOp(k // 3)],
                                            STATUS[UpdateStatus(k % 3)]).inc(n)
