"""Running services for tests, and the expected deltas derived from the updates log itself.

The log is the source of truth, so the oracle replays it through a plain CPU engine: the
matches topic must then hold exactly those deltas, each once.
"""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import numpy as np
from aiokafka import AIOKafkaProducer

from gpu import Engine, UpdateBatch
from service.client import read_topic
from service.serve import ServerThread
from service.settings import Settings
from streams import OP_NAMES
from streams.broker import free_port
from streams.codec import (
    SEQ_STRIDE,
    LoadPart,
    Register,
    Unregister,
    Updates,
    decode,
    doc_from_query,
    docs_from_batch,
)
from streams.exceptions import DecodeError

update_docs = docs_from_batch


@dataclass(frozen=True, slots=True)
class _Rec:
    offset: int


def settings_for(bootstrap: str, prefix: str | None = None, **kw: Any) -> Settings:
    p = prefix or f"t{uuid.uuid4().hex[:10]}"
    base: dict[str, Any] = dict(kafka_bootstrap=bootstrap, backend="cpu", port=free_port(),
                                topic_updates=f"{p}.updates", topic_matches=f"{p}.matches",
                                topic_queries=f"{p}.queries", topic_deadletter=f"{p}.dead",
                                kafka_consumer_group=f"{p}.runtime", log_level="warning")
    base.update(kw)
    return Settings(**base)


Running = ServerThread


def start(settings: Settings) -> ServerThread:
    return ServerThread(settings).start()


query_doc = doc_from_query


def produce(bootstrap: str, topic: str, values: list[bytes]) -> list[int]:
    async def run() -> list[int]:
        p = AIOKafkaProducer(bootstrap_servers=bootstrap, acks="all")
        await p.start()
        try:
            return [(await p.send_and_wait(topic, v, partition=0)).offset for v in values]
        finally:
            await p.stop()
    return asyncio.run(run())


def delta_key(e: dict[str, Any]) -> tuple[Any, ...]:
    m = None if e["matches"] is None else tuple(sorted(map(tuple, e["matches"])))
    return (e["query"], e["seq"], e["sub"], e["op"], e["src"], e["dst"], e["sign"], e["count"],
            m)


def expected_from_log(bootstrap: str, topic: str) -> list[tuple[Any, ...]]:
    """Replay the updates log through a CPU engine, as the service must have."""
    items = []
    for rec in read_topic(bootstrap, topic):
        try:
            items.append((rec.offset, decode(rec.value)))
        except DecodeError:
            continue
    return expected_from_items(items)


def expected_from_items(items: Iterable[tuple[int, Any]]) -> list[tuple[Any, ...]]:
    """The deltas of (log offset, decoded record) pairs through a CPU engine (where the
    log itself is truncated, a test that knows what it appended replays that)."""
    eng = Engine("cpu")
    out: list[tuple[Any, ...]] = []
    loads: dict[str, list[LoadPart]] = {}
    for offset, item in items:
        rec = _Rec(offset)
        if isinstance(item, Updates):
            seq = rec.offset * SEQ_STRIDE + np.arange(len(item), dtype=np.int64)
            res = eng.apply(UpdateBatch(seq, item.op, item.src, item.dst, item.label))
            for d in res.deltas():
                out.append(delta_key({
                    "query": d.query, "seq": d.seq, "sub": d.sub, "op": OP_NAMES[d.request_op],
                    "src": d.src, "dst": d.dst, "sign": d.sign, "count": d.count,
                    "matches": None if d.matches is None else d.matches.tolist()}))
        elif isinstance(item, Register):
            _, init = eng.register(item.query.to_spec(), query_id=rec.offset,
                                   initial=item.query.emit_initial)
            if init is not None and int(init.counts[0, 0]):
                lst = init.listings.get(rec.offset)
                out.append(delta_key({
                    "query": rec.offset, "seq": rec.offset * SEQ_STRIDE, "sub": 0,
                    "op": "initial", "src": None, "dst": None, "sign": 1,
                    "count": int(init.counts[0, 0]),
                    "matches": None if lst is None else lst.tuples.tolist()}))
        elif isinstance(item, Unregister):
            eng.unregister(item.id)
        elif isinstance(item, LoadPart):
            parts = loads.setdefault(item.load, [])
            parts.append(item)
            if len(parts) == item.parts and not eng.graph.num_vertices:
                e = [p.edges for p in parts]
                eng.load_graph(np.concatenate([p.vertex_ids for p in parts]),
                               np.concatenate([p.vertex_labels for p in parts]),
                               np.concatenate([x.src for x in e]),
                               np.concatenate([x.dst for x in e]),
                               np.concatenate([x.label for x in e]))
    return out


def published(bootstrap: str, topic: str, expect: int, timeout: float = 60.0) -> list[Any]:
    recs = read_topic(bootstrap, topic, until=lambda xs: len(xs) >= expect, timeout=timeout)
    return [delta_key(json.loads(r.value)) for r in recs]
