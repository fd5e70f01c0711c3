"""Running services for tests, and the expected deltas derived from the updates log itself.

The log is the source of truth, so the oracle replays it through a plain CPU engine: the
matches topic must then hold exactly those deltas, each once.
"""

from __future__ import annotations

import asyncio
import json
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import uvicorn
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition

from gpu import Engine, Query, UpdateBatch
from service.app import create_app
from service.client import CsmClient
from service.settings import Settings
from streams import OP_NAMES
from streams.broker import free_port
from streams.codec import SEQ_STRIDE, LoadPart, Register, Unregister, Updates, decode
from streams.exceptions import DecodeError


def settings_for(bootstrap: str, prefix: str | None = None, **kw: Any) -> Settings:
    p = prefix or f"t{uuid.uuid4().hex[:10]}"
    base: dict[str, Any] = dict(kafka_bootstrap=bootstrap, backend="cpu", port=free_port(),
                                topic_updates=f"{p}.updates", topic_matches=f"{p}.matches",
                                topic_queries=f"{p}.queries", topic_deadletter=f"{p}.dead",
                                kafka_consumer_group=f"{p}.runtime", log_level="warning")
    base.update(kw)
    return Settings(**base)


@dataclass
class Running:
    settings: Settings
    server: uvicorn.Server
    thread: threading.Thread

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.settings.port}"

    def client(self, token: str | None = None) -> CsmClient:
        return CsmClient(self.url, token=token)

    def stop(self) -> None:
        self.server.should_exit = True
        self.thread.join(30)


def start(settings: Settings) -> Running:
    app = create_app(settings)
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=settings.port,
                                           log_level="warning", access_log=False))
    th = threading.Thread(target=server.run, daemon=True)
    th.start()
    r = Running(settings, server, th)
    with r.client() as c:
        c.wait_ready()
    return r


def query_doc(q: Query, **kw: Any) -> dict[str, Any]:
    return {"vertices": [{"id": i, "label": lab} for i, lab in enumerate(q.vertex_labels)],
            "edges": [{"src": a, "dst": b, "label": lab} for a, b, lab in q.edges], **kw}


def update_docs(batch: UpdateBatch) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for op, s, d, lab in zip(batch.op.tolist(), batch.src.tolist(), batch.dst.tolist(),
                             batch.label.tolist(), strict=True):
        name = OP_NAMES[op]
        if op <= 1:
            out.append({"op": name, "src": s, "dst": d, "label": lab})
        elif op == 2:
            out.append({"op": name, "id": s, "label": lab})
        else:
            out.append({"op": name, "id": s})
    return out


def read_topic(bootstrap: str, topic: str, until: Callable[[list[Any]], bool] | None = None,
               timeout: float = 60.0) -> list[Any]:
    """All records of ``topic`` (every partition, each in order); with ``until``, wait for it."""
    async def run() -> list[Any]:
        c = AIOKafkaConsumer(bootstrap_servers=bootstrap, group_id=None,
                             auto_offset_reset="earliest", fetch_max_wait_ms=5,
                             enable_auto_commit=False, max_partition_fetch_bytes=64 << 20)
        await c.start()
        try:
            parts = c.partitions_for_topic(topic)
            while not parts:
                await c.force_metadata_update()
                parts = c.partitions_for_topic(topic)
            tps = [TopicPartition(topic, p) for p in sorted(parts)]
            c.assign(tps)
            out: list[Any] = []
            deadline = time.monotonic() + timeout
            while True:
                ends = await c.end_offsets(tps)
                done = all([await c.position(tp) >= ends[tp] for tp in tps])
                if done and (until is None or until(out)):
                    return out
                if time.monotonic() > deadline:
                    raise TimeoutError(f"{topic}: condition not met, {len(out)} records")
                for recs in (await c.getmany(timeout_ms=50)).values():
                    out.extend(recs)
        finally:
            await c.stop()
    return asyncio.run(run())


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
    eng = Engine("cpu")
    out: list[tuple[Any, ...]] = []
    loads: dict[str, list[LoadPart]] = {}
    for rec in read_topic(bootstrap, topic):
        try:
            item = decode(rec.value)
        except DecodeError:
            continue
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
