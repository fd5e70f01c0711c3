"""Each query's cut on the matches topic (service/_publish.py, design.md 2x): with a
query's deltas sent ahead of another query's earlier ones, a crash anywhere leaves every
query's deltas on the topic once and in order after the restart resends the uncommitted
runs, against a real broker; a tail written without the frontier header still gives its
prefix cut."""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator
from typing import Any

import numpy as np
import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition

from gpu import BatchResult, CountMode, Engine, Query, QuerySpec
from service._publish import FRONTIER, Publisher, cuts_of
from service._runs import run_batch
from service._types import Chunk, RuntimeConfig
from service.metrics import Metrics
from streams import GenConfig, generate, iter_chunks
from streams.broker import EmbeddedBroker
from streams.codec import Updates
from streams.kafka import KafkaConfig, ensure_topics, last_records, make_producer

pytestmark = pytest.mark.kafka

RUNS = 6


def _results() -> tuple[list[tuple[dict[int, float], BatchResult]], list[int]]:
    """RUNS runs of update messages (two messages each) through a CPU engine with three
    standing queries: each run's arrivals and result, and the query ids."""
    ds = generate(GenConfig(vertices=300, edges=2000, labels=2, queries=2, max_query=4,
                            insert_ratio=0.6, delete_ratio=0.2, seed=21))
    eng = Engine("cpu")
    g = ds.initial
    eng.load_graph(g.vertex_ids, g.vertex_labels, g.src, g.dst, g.label)
    tri = Query.build([(v, None) for v in range(3)], [(0, 1, None), (1, 2, None), (0, 2, None)])
    qids = [eng.register(QuerySpec(q, CountMode.EMBEDDINGS))[0].id
            for q in [tri, *(q for _, q in ds.queries)]]
    msgs = [Updates(op=c.op, src=c.src, dst=c.dst, label=c.label)
            for c in iter_chunks(ds.stream, 60)][:2 * RUNS]
    out = []
    for k in range(RUNS):
        run = [(off, msgs[off], float(off)) for off in (2 * k, 2 * k + 1)]
        out.append(({off: a for off, _, a in run}, eng.apply(run_batch(run))))
    return out, qids


def _only(r: BatchResult, q: int) -> BatchResult:
    """``r`` for query ``q`` alone, as per-query delivery hands it on."""
    from dataclasses import replace

    j = r.query_ids.index(q)
    return replace(r, query_ids=(q,), counts=np.ascontiguousarray(r.counts[:, j:j + 1]))


async def _topic(kafka: KafkaConfig, topic: str) -> list[tuple[int, int, int, int]]:
    """Every delta on partition 0: (query, seq, sub, signed count), in topic order."""
    c = AIOKafkaConsumer(bootstrap_servers=kafka.bootstrap, enable_auto_commit=False,
                         auto_offset_reset="earliest")
    await c.start()
    try:
        tp = TopicPartition(topic, 0)
        c.assign([tp])
        end = (await c.end_offsets([tp]))[tp]
        out: list[tuple[int, int, int, int]] = []
        while len(out) < end:
            for rec in (await c.getmany(tp, timeout_ms=1000)).get(tp, []):
                v = json.loads(rec.value)
                out.append((v["query"], v["seq"], v["sub"], v["sign"] * v["count"]))
        return out
    finally:
        await c.stop()


def _tail_cut(rec: Any) -> tuple[int, int, int]:
    v = json.loads(rec.value)
    return v["seq"], v["sub"], v["query"]


def _want(runs: list[tuple[dict[int, float], BatchResult]], q: int) -> list[tuple[int, int, int]]:
    out = []
    for _, r in runs:
        j = r.query_ids.index(q)
        for i in np.flatnonzero(r.counts[:, j]).tolist():
            out.append((int(r.seq[i]), int(r.sub[i]), int(r.counts[i, j])))
    return out


@contextlib.asynccontextmanager
async def _producer(kafka: KafkaConfig, topic: str) -> AsyncIterator[AIOKafkaProducer]:
    """A started producer, ``topic`` created (one partition)."""
    await ensure_topics(kafka, {topic: 1})
    producer = make_producer(kafka)
    await producer.start()
    try:
        yield producer
    finally:
        await producer.stop()


async def _recovered(pub: Publisher, kafka: KafkaConfig, topic: str) -> Publisher:
    """``pub`` with the cuts the topic's tail gives (recovery's reading)."""
    async for rec in last_records(kafka, topic, 1):
        pub.recovered(rec.partition, rec)
    return pub


async def _publish(pub: Publisher, items: list[tuple[dict[int, float], BatchResult]]) -> None:
    chunk = Chunk([], [], {})
    for arrived, r in items:
        await pub.publish(r, arrived, chunk)
    await asyncio.gather(*chunk.futures)


@pytest.mark.parametrize("crash_after", [0, 3, 7, 11, 17])
def test_a_crash_mid_per_query_delivery_resends_each_delta_once(
        broker: EmbeddedBroker, crash_after: int) -> None:
    runs, qids = _results()
    topic = f"frontier{crash_after}.matches"
    cfg = RuntimeConfig(matches_topic=topic)
    kafka = KafkaConfig(broker.bootstrap)
    # the first query runs ahead: all its runs, then the others run by run
    order = [(k, qids[0]) for k in range(RUNS)] + [(k, q) for k in range(RUNS)
                                                   for q in qids[1:]]

    async def main() -> list[tuple[int, int, int, int]]:
        async with _producer(kafka, topic) as producer:
            first = Publisher(producer, cfg, Metrics())
            await _publish(first, [(runs[k][0], _only(runs[k][1], q))
                                   for k, q in order[:crash_after]])
            # the crash: nothing was committed, so the restart sends every run again
            again = await _recovered(Publisher(producer, cfg, Metrics()), kafka, topic)
            await _publish(again, runs)
        return await _topic(kafka, topic)

    got = asyncio.run(main())
    for q in qids:
        mine = [(s, sub, c) for qq, s, sub, c in got if qq == q]
        assert mine == _want(runs, q), q
    assert len(got) == sum(len(_want(runs, q)) for q in qids)


def test_a_tail_without_frontier_is_a_prefix_cut_that_the_frontier_carries_on(
        broker: EmbeddedBroker) -> None:
    """A topic written in order without frontier headers (as before them): its last record
    cuts every query's deltas up to it; publishing on carries that cut in the frontier
    until a commit passes it, so a second crash before that commit still resends nothing
    twice."""
    runs, qids = _results()
    topic = "frontier-legacy.matches"
    cfg = RuntimeConfig(matches_topic=topic)
    kafka = KafkaConfig(broker.bootstrap)

    async def main() -> list[tuple[int, int, int, int]]:
        async with _producer(kafka, topic) as producer:
            old = Publisher(producer, cfg, Metrics())
            await _publish(old, runs[:2])
            # strip the frontier from what was sent: write the tail again without it
            tail = [rec async for rec in last_records(kafka, topic, 1)][0]
            assert cuts_of(tail)[1] is None
            await producer.send_and_wait(topic, tail.value, key=tail.key, partition=0,
                                         headers=[h for h in tail.headers if h[0] != FRONTIER])
            tail = [rec async for rec in last_records(kafka, topic, 1)][0]
            assert cuts_of(tail) == ({}, _tail_cut(tail))   # a prefix cut alone
            second = await _recovered(Publisher(producer, cfg, Metrics()), kafka, topic)
            await _publish(second, runs[:4])   # the crash again, before any commit
            tail = [rec async for rec in last_records(kafka, topic, 1)][0]
            assert cuts_of(tail)[1] == second.skip[0]   # the prefix cut, carried on
            third = await _recovered(Publisher(producer, cfg, Metrics()), kafka, topic)
            await _publish(third, runs)
            third.committed(2 * RUNS)
            assert third.cuts == {} and third.skip == {} and third.frontier[0] == {}
        return await _topic(kafka, topic)

    got = asyncio.run(main())
    n = sum(len(_want(runs[:2], q)) for q in qids)   # the tail, written again by hand
    assert got[n] == got[n - 1]
    del got[n]
    for q in qids:
        assert [(s, sub, c) for qq, s, sub, c in got if qq == q] == _want(runs, q), q
