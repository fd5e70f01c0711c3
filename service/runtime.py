"""The matching runtime: consume the updates log in order, match, publish, commit.

The updates topic (one partition) is the source of truth. For every chunk of records:

1. decode each message (a bad one goes to the dead-letter topic with its reason);
2. apply runs of update messages as one engine batch, control records in between;
3. send one matches message per (update, query) with a non-empty delta;
4. wait until the broker has acknowledged every send;
5. commit the offset after the chunk, then wake the API requests waiting on it.

After a crash the service restores its newest snapshot (graph, queries, log position;
``service.snapshot``), replays the log from there up to the committed offset without
publishing, then goes on from there, skipping the deltas that the
matches topic already holds: each matches partition is a prefix of the ordered delta
stream, so its last record says exactly where that prefix ends.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import json
import logging
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
from aiokafka import TopicPartition

from gpu import (
    BatchResult,
    Engine,
    LoadStats,
    QueryError,
    RegisteredQuery,
    UnknownQueryError,
    UpdateBatch,
    UpdateOp,
    UpdateStatus,
)
from streams import OP_NAMES
from streams.codec import (
    SEQ_STRIDE,
    EventColumns,
    LoadPart,
    QueryDoc,
    Register,
    Unregister,
    Updates,
    decode,
    format_events,
)
from streams.exceptions import DecodeError
from streams.kafka import KafkaConfig, kafka_errors, last_records, make_consumer, make_producer

from ._faults import crash_point
from ._feed import LocalFeed, LocalRecord
from ._snapshots import Snapshots
from .exceptions import GraphNotEmpty, StateCorrupt
from .metrics import Metrics
from .snapshot import Snapshot

__all__ = ["STATUS_NAMES", "Outcome", "RegisteredDoc", "Runtime", "RuntimeConfig"]

log = logging.getLogger("csm.runtime")
_STATUS = {UpdateStatus.APPLIED: "applied", UpdateStatus.IGNORED: "ignored",
           UpdateStatus.REJECTED: "rejected"}
STATUS_NAMES = tuple(_STATUS.values())


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


@dataclass(frozen=True, slots=True)
class RegisteredDoc:
    reg: RegisteredQuery
    doc: QueryDoc
    seq: int


#: what a control record led to: a registration, a load, or the error to answer with
Outcome = RegisteredDoc | LoadStats | Exception | None


@dataclass(slots=True)
class _Chunk:
    """Per-chunk bookkeeping: sends to await, arrivals to time, outcomes to publish."""

    futures: list[asyncio.Future[Any]]
    arrivals: list[float]
    outcomes: dict[int, Outcome]
    #: per query: deltas, matches created, matches destroyed (metrics, once per chunk)
    tally: dict[int, list[int]] = field(default_factory=dict)
    #: record batches filled up, waiting to be sent before the open ones (partition, batch)
    full: list[tuple[int, Any]] = field(default_factory=list)


@dataclass(slots=True)
class _Run:
    """Update messages handed to the engine, and the worker-thread task matching them."""

    run: list[tuple[int, Updates, float]]
    batch: UpdateBatch
    task: asyncio.Future[BatchResult]
    t0: float


@functools.lru_cache(maxsize=4096)
def _key(qid: int) -> bytes:
    """A matches message's key: the query id."""
    return str(qid).encode()


def _listed(result: BatchResult, ii: npt.NDArray[np.int64],
            jj: npt.NDArray[np.int64]) -> dict[str, npt.NDArray[Any]]:
    """Where each delta (update ii, query column jj) finds its listed matches, as the
    listing columns of :class:`EventColumns` (row0 -1: none listed)."""
    n = len(ii)
    row0 = np.full(n, -1, np.int64)
    rows = np.zeros(n, np.int64)
    width = np.zeros(n, np.int64)
    trunc = np.zeros(n, np.bool_)
    flat, base = [], 0
    for j, q in enumerate(result.query_ids):
        lst = result.listings.get(q)
        if lst is None or not len(lst.op_index):
            continue
        sel = np.flatnonzero(jj == j)
        r = np.searchsorted(lst.op_index, ii[sel])
        r[r >= len(lst.op_index)] = 0
        hit = lst.op_index[r] == ii[sel]
        sel, r = sel[hit], r[hit]
        w = lst.tuples.shape[1]
        starts = lst.offsets[r]
        rows[sel] = lst.offsets[r + 1] - starts
        width[sel] = w
        trunc[sel] = lst.truncated[r]
        row0[sel] = base + starts * w
        flat.append(lst.tuples.reshape(-1))
        base += lst.tuples.size
    tuples = np.concatenate(flat).astype(np.int64) if flat else np.zeros(0, np.int64)
    return {"truncated": trunc, "row0": row0, "rows": rows, "width": width, "tuples": tuples}


#: updates per engine batch at most, so decoding the next batch overlaps matching this one
_RUN_UPDATES = 32_768


class Runtime:
    def __init__(self, engine: Engine, kafka: KafkaConfig, cfg: RuntimeConfig,
                 metrics: Metrics, truncate: Callable[[int], int] | None = None) -> None:
        """``truncate(offset)`` drops update-log records below ``offset`` once a snapshot
        there is on disk (the durable embedded broker's retention)."""
        self.engine, self.kafka, self.cfg, self.metrics = engine, kafka, cfg, metrics
        self._snaps = Snapshots(cfg.snapshot_dir, cfg.snapshot_every,
                                cfg.snapshot_every_updates, truncate)
        self._finishing: asyncio.Future[None] | None = None
        self._published: dict[int, list[int]] = {}
        self.tp = TopicPartition(cfg.updates_topic, 0)
        self.queries: dict[int, RegisteredDoc] = {}
        self.next_offset = 0
        self.ready = False
        self.failed: BaseException | None = None
        self._recent: dict[int, deque[tuple[int, bytes]]] = {}   # (seq, message value)
        self._outcomes: dict[int, Outcome] = {}
        self._waiters: dict[int, list[asyncio.Future[Outcome]]] = {}
        self._loads: dict[str, list[LoadPart]] = {}
        self._skip: dict[int, tuple[int, int, int]] = {}
        self._dead_upto = -1
        self._reclaimed_seen = 0
        self._task: asyncio.Task[None] | None = None
        #: this process's own appends (``offer``), and the offset after the last record
        #: handed to the engine; a fetch in flight outlives a loop turn the feed won
        self._feed = LocalFeed()
        self._expected = 0
        self._fetch: asyncio.Future[dict[Any, list[Any]]] | None = None
        self._producer = make_producer(kafka)
        self._consumer = make_consumer(kafka, cfg.group)

    # -- lifecycle ---------------------------------------------------------------
    async def start(self) -> None:
        with kafka_errors("starting the runtime's Kafka clients"):
            await self._producer.start()
            await self._consumer.start()
        self._consumer.assign([self.tp])
        self._task = asyncio.create_task(self._main(), name="csm-runtime")

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._task
        if self._fetch is not None:
            self._fetch.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._fetch
        if self._finishing is not None:
            self._finishing.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._finishing
        await self._snaps.close()
        with contextlib.suppress(Exception):
            await self._consumer.stop()
        with contextlib.suppress(Exception):
            await self._producer.stop()
        for fs in self._waiters.values():
            for f in fs:
                f.cancel()

    async def _main(self) -> None:
        try:
            await self._recover()
            await self._maybe_snapshot()   # a long replay: the next restart skips it
            self.ready = True
            self.metrics.ready.set(1)
            self._expected = self.next_offset
            while True:
                records = await self._next_records()
                if self._finishing is not None and self._finishing.done():
                    self._finishing.result()   # surfaces a failed publish or commit
                if records:
                    await self._handle(records, replay=False)
                    await self._maybe_snapshot()
                hw = self._consumer.highwater(self.tp)
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

    async def _next_records(self) -> list[Any]:
        """The next records in log order: this process's own appends as soon as they
        are next (no fetch wait), else what the fetch brings; [] after an idle fetch."""
        while True:
            local = self._feed.take(self._expected, self.cfg.max_poll_records)
            if local:
                return local
            if self._fetch is None:
                self._fetch = asyncio.ensure_future(self._consumer.getmany(
                    self.tp, timeout_ms=200, max_records=self.cfg.max_poll_records))
            woke = asyncio.ensure_future(self._feed.wait())
            try:
                await asyncio.wait({self._fetch, woke}, return_when=asyncio.FIRST_COMPLETED)
            finally:
                woke.cancel()
            if self._fetch.done():
                got, self._fetch = self._fetch.result(), None
                return [r for r in got.get(self.tp, []) if r.offset >= self._expected]

    def offer(self, offset: int, value: bytes, timestamp_ms: int) -> None:
        """A record the broker acknowledged at ``offset`` for this process (the API)."""
        self._feed.offer(LocalRecord(offset, value, timestamp_ms))

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
        out = []
        for seq, value in self._recent.get(qid, ()):
            if seq > after_seq:
                out.append(json.loads(value))
                if len(out) == limit:
                    break
        return out

    # -- recovery ------------------------------------------------------------------
    async def _recover(self) -> None:
        with kafka_errors("reading committed offsets"):
            committed = await self._consumer.committed(self.tp) or 0
            end = (await self._consumer.end_offsets([self.tp]))[self.tp]
        async for rec in last_records(self.kafka, self.cfg.matches_topic,
                                      self.cfg.matches_partitions):
            v = json.loads(rec.value)
            self._skip[rec.partition] = (v["seq"], v["sub"], v["query"])
        async for rec in last_records(self.kafka, self.cfg.deadletter_topic, 1):
            self._dead_upto = json.loads(rec.value)["offset"]
        t0 = time.perf_counter()
        start = await self._restore(committed)
        with kafka_errors("reading the log's start"):
            first = (await self._consumer.beginning_offsets([self.tp]))[self.tp]
        if first > start and start < committed:
            raise StateCorrupt(
                f"{self.cfg.updates_topic} starts at offset {first}, but recovery needs it "
                f"from offset {start} (the newest snapshot): its retention dropped records "
                "no snapshot covers; keep the updates topic's retention above the snapshot "
                "interval")
        log.info("recovering: replaying %d update-log records, then %d to re-process",
                 committed - start, end - committed)
        self._consumer.seek(self.tp, start)
        while self.next_offset < committed:
            got = await self._consumer.getmany(self.tp, timeout_ms=1000,
                                               max_records=self.cfg.max_poll_records)
            records = [r for r in got.get(self.tp, []) if r.offset < committed]
            if records:
                await self._handle(records, replay=True)
        self._consumer.seek(self.tp, committed)
        self.next_offset = committed
        for qid in sorted(self.queries):
            rd = self.queries[qid]
            reg, _ = self.engine.register(rd.doc.to_spec(), query_id=qid)
            self.queries[qid] = RegisteredDoc(reg, rd.doc, rd.seq)
            self._recent.setdefault(qid, deque(maxlen=self.cfg.recent_per_query))
        self.metrics.queries.set(len(self.queries))
        self._gauges()
        if committed:
            g = self.engine.graph
            log.info("replayed %d records in %.2f s, at offset %d: %d vertices, %d edges, "
                     "%d queries", committed - start, time.perf_counter() - t0, committed,
                     g.num_vertices, g.num_edges, len(self.queries))

    # -- snapshots -------------------------------------------------------------------
    async def _restore(self, committed: int) -> int:
        """Load the newest snapshot (if any); return the offset to replay from."""
        snap = await self._snaps.latest()
        if snap is None:
            return 0
        if snap.offset > committed:
            raise StateCorrupt(
                f"snapshot at update-log offset {snap.offset} is ahead of the committed "
                f"offset {committed} of {self.cfg.updates_topic}: the log is not the one "
                "the snapshot was taken from; nothing was changed")
        await asyncio.to_thread(self.engine.restore_graph, snap.graph)
        for q in snap.queries:
            doc = QueryDoc.model_validate(q["doc"])
            reg = RegisteredQuery(id=q["id"], spec=doc.to_spec(), automorphisms=0,
                                  plan_count=0)
            self.queries[q["id"]] = RegisteredDoc(reg, doc, q["seq"])
        self._published = dict(snap.published)
        self.next_offset = snap.offset
        log.info("restored the snapshot at offset %d: %d vertices, %d edges, %d queries",
                 snap.offset, self.engine.graph.num_vertices, self.engine.graph.num_edges,
                 len(snap.queries))
        return snap.offset

    async def _maybe_snapshot(self) -> None:
        """When one is due, between chunks (the engine is idle) and once every chunk is
        committed: copy the state here; it is written on a worker thread."""
        if self._loads or not self._snaps.due(self.next_offset):
            return
        await self._settled()
        self._snaps.write(Snapshot(
            offset=self.next_offset,
            queries=[{"id": q, "seq": rd.seq, "doc": rd.doc.model_dump(mode="json")}
                     for q, rd in self.queries.items()],
            published={p: list(v) for p, v in self._published.items()},
            graph={k: np.array(v) for k, v in self.engine.graph.dump().items()}))

    # -- processing ------------------------------------------------------------------
    async def _handle(self, records: list[Any], *, replay: bool) -> None:
        """Decode while the engine works: runs of update messages (cut at control records
        and at ``_RUN_UPDATES``) are applied in a worker thread one after another, and
        the loop decodes the next run and publishes the previous one meanwhile."""
        if not replay:
            crash_point("publish")
        chunk = _Chunk([], [], {})
        run: list[tuple[int, Updates, float]] = []
        size = 0
        pending: _Run | None = None
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
                self._snaps.work += len(item)
                if size >= _RUN_UPDATES:
                    pending = await self._next_run(pending, run, chunk, replay)
                    run, size = [], 0
                continue
            pending = await self._next_run(pending, run, chunk, replay)
            pending = await self._next_run(pending, [], chunk, replay)   # drained
            run, size = [], 0
            if isinstance(item, DecodeError):
                await self._dead_letter(rec, str(item), chunk, replay)
            else:
                chunk.outcomes[rec.offset] = await self._control(rec.offset, item, chunk, replay)
                self._snaps.work += len(item.edges) if isinstance(item, LoadPart) else 1
        pending = await self._next_run(pending, run, chunk, replay)
        await self._next_run(pending, [], chunk, replay)
        last = records[-1].offset
        self._expected = last + 1
        if replay:
            self.next_offset = last + 1
            self._settle(chunk.outcomes)
            self._gauges()
            return
        # steps 4-5 overlap the next chunk's matching: the broker's acks and the commit
        # are waits, and each commit still follows its own chunk's acks and the previous
        # commit (the order recovery relies on)
        self._finishing = asyncio.ensure_future(self._finish(self._finishing, chunk, last))

    async def _finish(self, before: asyncio.Future[None] | None, chunk: _Chunk,
                      last: int) -> None:
        """Wait for the chunk's acks, commit after it, then answer its waiters."""
        if before is not None:
            await before
        with kafka_errors("publishing deltas"):
            await asyncio.gather(*chunk.futures)
            crash_point("commit")
            await self._consumer.commit({self.tp: last + 1})
        now = time.time()
        for a in chunk.arrivals:
            self.metrics.response.observe(max(now - a, 0.0))
        for q, (n, pos, neg) in chunk.tally.items():
            if q in self.queries:
                self.metrics.deltas.labels(str(q)).inc(n)
                self.metrics.matches.labels(str(q), "+").inc(pos)
                self.metrics.matches.labels(str(q), "-").inc(neg)
        self.next_offset = last + 1
        self._settle(chunk.outcomes)
        self._gauges()

    async def _settled(self) -> None:
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

    def _gauges(self) -> None:
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

    async def _next_run(self, pending: _Run | None, run: list[tuple[int, Updates, float]],
                        chunk: _Chunk, replay: bool) -> _Run | None:
        """Start ``run`` on the engine as soon as the previous run is done, then publish
        the previous run's deltas while this one is matched (an empty ``run`` drains)."""
        result = None
        if pending is not None:
            result = await pending.task
            self.metrics.batch.observe(time.perf_counter() - pending.t0)
        nxt = None
        if run:
            seq = np.concatenate([off * SEQ_STRIDE + np.arange(len(u), dtype=np.int64)
                                  for off, u, _ in run])
            us = [u for _, u, _ in run]
            batch = UpdateBatch(seq=seq, op=np.concatenate([u.op for u in us]),
                                src=np.concatenate([u.src for u in us]),
                                dst=np.concatenate([u.dst for u in us]),
                                label=np.concatenate([u.label for u in us]))
            nxt = _Run(run, batch, asyncio.ensure_future(
                asyncio.to_thread(self.engine.apply, batch)), time.perf_counter())
        if pending is not None and result is not None:
            await self._publish_run(pending, result, chunk, replay)
        return nxt

    async def _publish_run(self, done: _Run, result: BatchResult, chunk: _Chunk,
                           replay: bool) -> None:
        self._count_updates(done.batch, result)
        st = result.stats
        if st.host_bytes:
            self.metrics.host_bytes.inc(st.host_bytes)
        if st.cache_hits + st.cache_misses:
            self.metrics.cache_hit.set(st.cache_hits / (st.cache_hits + st.cache_misses))
        if not replay:
            await self._publish(result, {off: a for off, _, a in done.run}, chunk)

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
                                            _STATUS[UpdateStatus(k % 3)]).inc(n)

    async def _publish(self, result: BatchResult, arrived: dict[int, float],
                       chunk: _Chunk) -> None:
        """One matches message per non-empty (update, query) delta, built column-wise and
        appended to one record batch per partition: no per-delta dict, send or future."""
        ii, jj = np.nonzero(result.counts)
        if not len(ii):
            return
        qids = np.asarray(result.query_ids, np.int64)[jj]
        seq, sub = result.seq[ii], result.sub[ii].astype(np.int64)
        P = self.cfg.matches_partitions
        keep = np.ones(len(ii), np.bool_)
        for part, (cs, csub, cq) in self._skip.items():   # after a crash: already published
            mine = qids % P == part
            done = (seq < cs) | ((seq == cs) & ((sub < csub) | ((sub == csub) & (qids <= cq))))
            keep &= ~(mine & done)
        if self._skip and self._skip_passed(arrived):
            self._skip.clear()
        if not keep.all():
            ii, jj, qids, seq, sub = ii[keep], jj[keep], qids[keep], seq[keep], sub[keep]
        counts = result.counts[ii, jj]
        offs = np.fromiter(arrived, np.int64, len(arrived))
        at = np.fromiter(arrived.values(), np.float64, len(arrived))
        order = np.argsort(offs)
        ev = EventColumns(
            query=qids, seq=seq, sub=sub, op=result.request_op[ii].astype(np.int64),
            src=result.ops.src[ii], dst=result.ops.dst[ii], count=counts,
            arrived_at=at[order][np.searchsorted(offs[order], seq // SEQ_STRIDE)],
            **_listed(result, ii, jj))
        values, off, headers, hoff = format_events(ev, time.time())
        parts = qids % P
        for part in np.unique(parts).tolist():
            k = int(np.flatnonzero(parts == part)[-1])
            self._published[part] = [int(seq[k]), int(sub[k]), int(qids[k])]
        batches: dict[int, Any] = {}
        for k, (q, sq) in enumerate(zip(qids.tolist(), seq.tolist(), strict=True)):
            value = values[off[k]:off[k + 1]]
            self._append(batches, q % P, _key(q), value, headers[hoff[k]:hoff[k + 1]], chunk)
            recent = self._recent.get(q)
            if recent is not None:
                recent.append((sq, value))
        await self._flush(batches, chunk)
        self._tally(chunk, qids, counts)

    def _append(self, batches: dict[int, Any], part: int, key: bytes, value: bytes, seq: bytes,
                chunk: _Chunk) -> None:
        b = batches.get(part)
        if b is None:
            b = batches[part] = self._producer.create_batch()
        if b.append(key=key, value=value, timestamp=None,
                    headers=[("seq", seq)]) is None:   # full: start another
            chunk.full.append((part, b))
            b = batches[part] = self._producer.create_batch()
            b.append(key=key, value=value, timestamp=None, headers=[("seq", seq)])

    async def _flush(self, batches: dict[int, Any], chunk: _Chunk) -> None:
        """Submit the record batches in the order they were filled (per partition)."""
        full, chunk.full = chunk.full, []
        with kafka_errors("sending deltas"):
            for part, b in [*full, *batches.items()]:
                b.close()
                chunk.futures.append(await self._producer.send_batch(
                    b, self.cfg.matches_topic, partition=part))

    @staticmethod
    def _tally(chunk: _Chunk, qids: npt.NDArray[np.int64], counts: npt.NDArray[np.int64]) -> None:
        for q in np.unique(qids).tolist():
            c = counts[qids == q]
            t = chunk.tally.setdefault(q, [0, 0, 0])   # deltas, +matches, -matches
            t[0] += len(c)
            t[1] += int(c[c > 0].sum())
            t[2] += int(-c[c < 0].sum())

    def _skip_passed(self, arrived: dict[int, float]) -> bool:
        top = (max(arrived) + 1) * SEQ_STRIDE
        return all(s < top for s, _, _ in self._skip.values())

    async def _send_event(self, event: dict[str, Any], chunk: _Chunk) -> None:
        """A single delta outside update batches (a registration's initial matches)."""
        q = event["query"]
        event["published_at"] = time.time()
        value = json.dumps(event, separators=(",", ":")).encode()
        batches: dict[int, Any] = {}
        self._append(batches, q % self.cfg.matches_partitions, _key(q), value,
                     str(event["seq"]).encode(), chunk)
        await self._flush(batches, chunk)
        self._tally(chunk, np.array([q]), np.array([event["count"] * event["sign"]]))
        recent = self._recent.get(q)
        if recent is not None:
            recent.append((event["seq"], value))

    async def _dead_letter(self, rec: Any, reason: str, chunk: _Chunk, replay: bool) -> None:
        log.warning("update-log offset %d dead-lettered: %s", rec.offset, reason)
        if replay or rec.offset <= self._dead_upto:
            return
        value = rec.value.decode("utf-8", "replace") if rec.value is not None else None
        body = {"offset": rec.offset, "reason": reason, "value": value,
                "topic": self.cfg.updates_topic, "dead_at": time.time()}
        with kafka_errors("dead-lettering"):
            chunk.futures.append(await self._producer.send(
                self.cfg.deadletter_topic, json.dumps(body).encode(), key=rec.key))
        self.metrics.dead_letters.inc()

    # -- control records ----------------------------------------------------------------
    async def _control(self, offset: int, item: Register | Unregister | LoadPart,
                       chunk: _Chunk, replay: bool) -> Outcome:
        if isinstance(item, Register):
            return await self._register(offset, item.query, chunk, replay)
        if isinstance(item, Unregister):
            return await self._unregister(item.id, chunk, replay)
        return await self._load(item)

    async def _register(self, offset: int, doc: QueryDoc, chunk: _Chunk,
                        replay: bool) -> Outcome:
        try:
            spec = doc.to_spec()
        except QueryError as exc:
            return exc
        seq = offset * SEQ_STRIDE
        if replay:   # registered in the engine once the graph is rebuilt
            reg = RegisteredQuery(id=offset, spec=spec, automorphisms=0, plan_count=0)
            self.queries[offset] = RegisteredDoc(reg, doc, seq)
            return self.queries[offset]
        reg, initial = await asyncio.to_thread(self.engine.register, spec, query_id=offset,
                                               initial=doc.emit_initial)
        rd = self.queries[offset] = RegisteredDoc(reg, doc, seq)
        self._recent[offset] = deque(maxlen=self.cfg.recent_per_query)
        self.metrics.queries.set(len(self.queries))
        body = {"id": offset, "seq": seq, **doc.model_dump()}
        with kafka_errors("recording a query"):
            chunk.futures.append(await self._producer.send(
                self.cfg.queries_topic, json.dumps(body).encode(), key=str(offset).encode()))
        if initial is not None and int(initial.counts[0, 0]) > 0:
            cut = self._skip.get(offset % self.cfg.matches_partitions)
            if cut is None or (seq, 0, offset) > cut:
                lst = initial.listings.get(offset)
                await self._send_event({
                    "query": offset, "seq": seq, "sub": 0, "op": "initial", "src": None,
                    "dst": None, "sign": 1, "count": int(initial.counts[0, 0]),
                    "matches": None if lst is None else lst.tuples.tolist(),
                    "truncated": False if lst is None else bool(lst.truncated[0]),
                    "arrived_at": time.time()}, chunk)
        return rd

    async def _unregister(self, qid: int, chunk: _Chunk, replay: bool) -> Outcome:
        if qid not in self.queries:
            return UnknownQueryError(f"no query with id {qid}")
        del self.queries[qid]
        if replay:
            return None
        self.engine.unregister(qid)
        self._recent.pop(qid, None)
        self.metrics.queries.set(len(self.queries))
        self.metrics.drop_query(qid)
        with kafka_errors("recording a query deletion"):
            chunk.futures.append(await self._producer.send(
                self.cfg.queries_topic, None, key=str(qid).encode()))
        return None

    async def _load(self, part: LoadPart) -> Outcome:
        parts = self._loads.setdefault(part.load, [])
        for other in [k for k in self._loads if k != part.load]:
            del self._loads[other]   # an upload cut short by a crash: never completes
        parts.append(part)
        if len(parts) < part.parts:
            log.info("graph upload %s: part %d of %d received", part.load, len(parts),
                     part.parts)
            return None
        del self._loads[part.load]
        if self.engine.graph.num_vertices:
            return GraphNotEmpty("the graph is not empty: an initial graph can only be "
                                 "loaded before any update")
        e = [p.edges for p in parts]
        t0 = time.perf_counter()
        stats = await asyncio.to_thread(
            self.engine.load_graph, np.concatenate([p.vertex_ids for p in parts]),
            np.concatenate([p.vertex_labels for p in parts]),
            np.concatenate([x.src for x in e]), np.concatenate([x.dst for x in e]),
            np.concatenate([x.label for x in e]))
        log.info("graph upload %s loaded: %d vertices, %d edges in %.2f s", part.load,
                 stats.vertices, stats.edges, time.perf_counter() - t0)
        return stats
