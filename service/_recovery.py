"""Recovery after a restart: the newest snapshot, then the log replayed up to the
committed offset without publishing, then the deltas already on the matches topic
skipped (:attr:`Publisher.skip`), so nothing is lost or published twice.

A snapshot at offset N holds what recovery would have rebuilt at N; taking one is the
other half of this module.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from typing import TYPE_CHECKING

import numpy as np

from gpu import Engine, RegisteredQuery
from streams.codec import QueryDoc
from streams.kafka import kafka_errors, last_records

from ._types import RegisteredDoc
from .exceptions import StateCorrupt
from .snapshot import Snapshot

if TYPE_CHECKING:
    from .runtime import Runtime

__all__ = ["load_snapshot", "recover", "take_snapshot"]

log = logging.getLogger("csm.runtime")


async def recover(rt: Runtime) -> None:
    """Rebuild ``rt`` from its snapshot and the log; leave the consumer at the committed
    offset and the publisher's cuts set."""
    cfg, consumer, tp = rt.cfg, rt.consumer, rt.tp
    sharded = rt.own is not None
    with kafka_errors("reading committed offsets"):
        end = (await consumer.end_offsets([tp]))[tp]
        # scale-out: the replica replays the whole log; shards are caught up once taken
        committed = end if sharded else await consumer.committed(tp) or 0
    if not sharded:
        async for rec in last_records(rt.kafka, cfg.matches_topic, cfg.matches_partitions):
            rt.pub.recovered(rec.partition, rec)
    async for rec in last_records(rt.kafka, cfg.deadletter_topic, 1):
        rt.pub.dead_upto = json.loads(rec.value)["offset"]
    t0 = time.perf_counter()
    start = await _restore(rt, committed)
    rt.window.reset(start)
    with kafka_errors("reading the log's start"):
        first = (await consumer.beginning_offsets([tp]))[tp]
    if first > start and start < committed:
        raise StateCorrupt(
            f"{cfg.updates_topic} starts at offset {first}, but recovery needs it "
            f"from offset {start} (the newest snapshot): its retention dropped records "
            "no snapshot covers; keep the updates topic's retention above the snapshot "
            "interval")
    log.info("recovering: replaying %d update-log records, then %d to re-process",
             committed - start, end - committed)
    consumer.seek(tp, start)
    while rt.next_offset < committed:
        got = await consumer.getmany(tp, timeout_ms=1000, max_records=cfg.max_poll_records)
        records = [r for r in got.get(tp, []) if r.offset < committed]
        if records:
            await rt.handle(records, replay=True)
    consumer.seek(tp, committed)
    rt.next_offset = committed
    for qid in sorted(rt.queries):
        rd = rt.queries[qid]   # scale-out: described here, registered by the shard's owner
        reg = rt.engine.describe(rd.doc.to_spec(), qid) if sharded else \
            rt.engine.register(rd.doc.to_spec(), query_id=qid)[0]
        rt.queries[qid] = RegisteredDoc(reg, rd.doc, rd.seq, rd.tick)
        if not sharded:
            rt.pub.open_query(qid)
    rt.metrics.queries.set(len(rt.queries))
    rt.metrics.owned_queries.set(len(rt.engine.queries))
    rt.gauges()
    if committed:
        g = rt.engine.graph
        log.info("replayed %d records in %.2f s, at offset %d: %d vertices, %d edges, "
                 "%d queries", committed - start, time.perf_counter() - t0, committed,
                 g.num_vertices, g.num_edges, len(rt.queries))


async def _restore(rt: Runtime, committed: int) -> int:
    """Load the newest snapshot (if any); return the offset to replay from."""
    snap = await rt.snaps.latest()
    if snap is None:
        return 0
    if snap.offset > committed:
        raise StateCorrupt(
            f"snapshot at update-log offset {snap.offset} is ahead of the committed "
            f"offset {committed} of {rt.cfg.updates_topic}: the log is not the one "
            "the snapshot was taken from; nothing was changed")
    await load_snapshot(rt.engine, snap, rt.queries)
    rt.pub.published = dict(snap.published)
    rt.next_offset = snap.offset
    log.info("restored the snapshot at offset %d: %d vertices, %d edges, %d queries",
             snap.offset, rt.engine.graph.num_vertices, rt.engine.graph.num_edges,
             len(snap.queries))
    return snap.offset


async def load_snapshot(engine: Engine, snap: Snapshot,
                        queries: dict[int, RegisteredDoc]) -> None:
    """Put ``snap``'s graph into ``engine`` (empty) and its queries into ``queries``, as
    they stood before the snapshot's offset (registered in the engine after the replay)."""
    await asyncio.to_thread(engine.restore_graph, snap.graph)
    for q in snap.queries:
        doc = QueryDoc.model_validate(q["doc"])
        reg = RegisteredQuery(id=q["id"], spec=doc.to_spec(), automorphisms=0,
                              plan_count=0)
        queries[q["id"]] = RegisteredDoc(reg, doc, q["seq"])


def take_snapshot(rt: Runtime) -> Snapshot:
    """The runtime's state now, copied (the engine may move on while it is written)."""
    return Snapshot(
        offset=rt.next_offset,
        queries=[{"id": q, "seq": rd.seq, "doc": rd.doc.model_dump(mode="json")}
                 for q, rd in rt.queries.items()],
        published={p: list(v) for p, v in rt.pub.published.items()},
        graph={k: np.array(v) for k, v in rt.engine.graph.dump().items()})
