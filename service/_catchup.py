"""Taking over shards: continue exactly where their last owner stopped.

For each shard taken, the group's committed offset says below which update-log offset
its deltas are all on the matches topic, and the partition's last record says how far
past that the last owner got before it stopped (acknowledged, not committed). Then:

1. shards whose progress is at or past this replica's position: drop their deltas up to
   there (:attr:`Publisher.skip`) and match them from here on;
2. otherwise match the updates from the progress offset on again, each against its own
   graph version (:class:`Window`, ``Engine.rematch``), for the shard's queries alive
   at that update (deleted ones included), with the initial matches of registrations
   in the gap, dropping what the partition already holds;
3. wait for the broker's acks, commit the shards at this replica's position, and
   publish them live from the next chunk on.

A gap older than the window is matched the same way from a side engine rebuilt from
this instance's snapshot and the log (``_rebuild``).
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from typing import TYPE_CHECKING, Any

import numpy as np

from gpu import BatchResult, Engine, OpTable
from streams.codec import SEQ_STRIDE
from streams.kafka import kafka_errors, last_records

from ._publish import Cut
from ._rebuild import rebuild
from ._types import Chunk, RegisteredDoc
from ._window import PastRun, Window

if TYPE_CHECKING:
    from .runtime import Runtime

__all__ = ["release", "take_over"]

log = logging.getLogger("csm.ownership")
_TOP = 1 << 62


async def _tails(rt: Runtime, shards: set[int]) -> None:
    """What the shards' matches partitions hold already: their cuts, into the publisher."""
    async for rec in last_records(rt.kafka, rt.cfg.matches_topic, rt.cfg.matches_partitions):
        if rec.partition in shards:
            rt.pub.recovered(rec.partition, rec)


async def take_over(rt: Runtime, shards: set[int]) -> None:
    """Called between chunks with every chunk before committed (``rt.next_offset``)."""
    assert rt.own is not None
    t0 = time.perf_counter()
    here = rt.next_offset
    P = rt.cfg.matches_partitions
    progress = await rt.own.progress(shards)
    await _tails(rt, shards)
    t1 = time.perf_counter()
    gap = {s for s in shards if progress[s] < here}
    start = min((progress[s] for s in gap), default=here)
    for s in shards:   # what the partition already holds is not sent again
        floor: Cut = (progress[s] * SEQ_STRIDE - 1, _TOP, _TOP)
        rt.pub.skip[s] = max(rt.pub.skip.get(s, floor), floor)
    alive = sorted(q for q in rt.queries if q % P in shards)
    for q in alive:
        rd = rt.queries[q]
        reg, _ = await asyncio.to_thread(rt.engine.register, rd.doc.to_spec(), query_id=q)
        rt.queries[q] = RegisteredDoc(reg, rd.doc, rd.seq, rd.tick)
        rt.pub.open_query(q)
    chunk = Chunk([], [], {})
    updates = 0
    if 0 in shards:   # what the dead-letter topic holds already is not sent again
        async for rec in last_records(rt.kafka, rt.cfg.deadletter_topic, 1):
            rt.pub.dead_upto = max(rt.pub.dead_upto, json.loads(rec.value)["offset"])
    t2 = time.perf_counter()
    if gap:
        engine, window, seen = rt.engine, rt.window, rt.queries
        if not rt.window.covers(start):   # older than the window: rebuild the versions
            log.warning("shards %s: progress at offset %d is before the retention window "
                        "(from %d); rebuilding from snapshot and log", sorted(gap), start,
                        rt.window.start)
            side = await rebuild(rt, start, here)
            engine, window, seen = side.engine, side.window, side.queries
        docs = {q: seen.get(q, rt.queries[q]) for q in alive if q % P in gap}
        retired = {q: r for q, r in window.retired.items() if q % P in gap}
        docs.update({q: r.doc for q, r in retired.items()})
        standing = {r.id for r in engine.queries}
        extra = [q for q in docs if q not in standing]
        for q in extra:
            await asyncio.to_thread(engine.register, docs[q].doc.to_spec(), query_id=q)
        try:
            updates = await _rematch(rt, engine, window, docs,
                                     {q: r.offset for q, r in retired.items()}, progress,
                                     start, chunk)
            if 0 in gap:   # shard 0's owner also writes the dead-letter topic
                await _dead_letters(rt, window, progress[0], chunk)
        finally:
            if engine is rt.engine:
                for q in extra:
                    rt.engine.unregister(q)
    t3 = time.perf_counter()
    with kafka_errors("publishing a shard's missed deltas"):
        await asyncio.gather(*chunk.futures)
    await rt.own.commit(here, shards)
    await rt.own.announce(shards, rt.pub.producer)
    rt.own.took(shards)
    rt.metrics.owned_queries.set(len(rt.engine.queries))
    rt.metrics.catchup_updates.inc(updates)
    rt.metrics.catchup.observe(time.perf_counter() - t0)
    log.info("took shards %s at offset %d: %d updates matched again from offset %d in "
             "%.3f s (progress and tails %.3f, registering %.3f, matching and sending "
             "%.3f, acks and commit %.3f)", sorted(shards), here, updates, start,
             time.perf_counter() - t0, t1 - t0, t2 - t1, t3 - t2, time.perf_counter() - t3)


async def _rematch(rt: Runtime, engine: Engine, window: Window,
                   docs: dict[int, RegisteredDoc], ends: dict[int, int],
                   progress: dict[int, int], start: int, chunk: Chunk) -> int:
    """The deltas of ``docs`` for every update from ``start`` on, in log order."""
    P = rt.cfg.matches_partitions
    qids = tuple(sorted(docs))
    reg_at = np.array(qids, np.int64)              # a query's id is its record's offset
    end_at = np.array([ends.get(q, _TOP) for q in qids], np.int64)
    from_at = np.array([progress[q % P] for q in qids], np.int64)
    inits = sorted((q, d) for q, d in docs.items()
                   if d.doc.emit_initial and q >= start and q >= progress[q % P])
    updates = 0
    for run in _merged(window.since(start), [q for q, _ in inits]):
        for q, d in [x for x in inits if x[0] < run.first]:
            await _initial(rt, engine, q, d, chunk)
        inits = [x for x in inits if x[0] >= run.first]
        res = await asyncio.to_thread(engine.rematch, run.result, qids)
        off = (res.seq // SEQ_STRIDE)[:, None]
        ok = (off > reg_at) & (off < end_at) & (off >= from_at)
        counts = np.where(ok, res.counts, 0)
        updates += int((res.seq // SEQ_STRIDE >= start).sum())
        await rt.pub.publish(BatchResult(
            ops=res.ops, seq=res.seq, sub=res.sub, request_op=res.request_op,
            query_ids=res.query_ids, counts=counts, listings=res.listings,
            stats=res.stats), run.arrived, chunk)
    for q, d in inits:
        await _initial(rt, engine, q, d, chunk)
    return updates


async def _dead_letters(rt: Runtime, window: Window, since: int, chunk: Chunk) -> None:
    """The dead letters of the gap that the dead-letter topic does not hold yet."""
    for offset, rec, reason in window.dead:
        if offset >= since:
            await rt.pub.dead_letter(rec, reason, chunk, replay=False)


#: primitive updates per re-matched batch at most (fewer, larger engine calls)
_MERGE = 65_536


def _merged(runs: list[PastRun], cuts: list[int]) -> list[PastRun]:
    """Consecutive runs joined into batches of up to ``_MERGE`` updates, never across a
    registration in ``cuts`` (its initial matches go between them, in log order)."""
    out: list[PastRun] = []
    group: list[PastRun] = []

    def close() -> None:
        if len(group) == 1:
            out.append(group[0])
        elif group:
            rs = [g.result for g in group]
            cols = {f: np.concatenate([getattr(r.ops, f) for r in rs])
                    for f in OpTable.__dataclass_fields__}
            out.append(PastRun(group[0].first, group[-1].last, BatchResult(
                ops=OpTable(**cols), seq=np.concatenate([r.seq for r in rs]),
                sub=np.concatenate([r.sub for r in rs]),
                request_op=np.concatenate([r.request_op for r in rs]), query_ids=(),
                counts=np.zeros((sum(len(r.ops) for r in rs), 0), np.int64)),
                {k: v for g in group for k, v in g.arrived.items()}))
        group.clear()

    size = 0
    for run in runs:
        crosses = group and any(group[-1].last < c < run.first for c in cuts)
        if crosses or size + len(run.result.ops) > _MERGE:
            close()
            size = 0
        group.append(run)
        size += len(run.result.ops)
    close()
    return out


async def _initial(rt: Runtime, engine: Engine, q: int, d: RegisteredDoc,
                   chunk: Chunk) -> None:
    if d.tick < 0 or not rt.pub.wanted(q, d.seq):
        return
    res = await asyncio.to_thread(engine.initial_at, q, d.tick)
    count = int(res.counts[0, 0])
    if count <= 0:
        return
    lst = res.listings.get(q)
    event: dict[str, Any] = {
        "query": q, "seq": d.seq, "sub": 0, "op": "initial", "src": None, "dst": None,
        "sign": 1, "count": count, "matches": None if lst is None else lst.tuples.tolist(),
        "truncated": False if lst is None else bool(lst.truncated[0]),
        "arrived_at": time.time()}
    await rt.pub.send_event(event, chunk)


async def release(rt: Runtime, shards: set[int]) -> None:
    """Inside a rebalance, before ``shards`` are given up: publish and commit every chunk
    handled so far, then stop matching their queries."""
    assert rt.own is not None
    async with rt.step:   # no chunk or take-over is half done
        mine = shards & rt.own.owned
        if mine:
            await rt.settled()
            await rt.own.commit(rt.next_offset, mine)
        P = rt.cfg.matches_partitions
        for reg in rt.engine.queries:
            if reg.id % P in shards:
                rt.engine.unregister(reg.id)
                rt.pub.close_query(reg.id)
        rt.own.dropped(shards)
        rt.metrics.owned_queries.set(len(rt.engine.queries))
    if mine:
        log.info("released shards %s at offset %d", sorted(mine), rt.next_offset)
