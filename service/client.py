"""A small client: post updates and queries over HTTP, read match deltas from Kafka.

    with CsmClient("http://127.0.0.1:8000") as c:
        q = c.register({"vertices": [...], "edges": [...]})
        c.post_updates([{"op": "insert", "src": 1, "dst": 2}])
        for event in c.deltas(stop=lambda e: ...):   # from the matches topic
            ...
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator, Callable, Sequence
from pathlib import Path
from typing import Any

import httpx
from aiokafka import AIOKafkaConsumer, TopicPartition

from gpu import CsmError

__all__ = ["ApiError", "CsmClient", "iter_deltas", "read_topic"]


class ApiError(CsmError):
    """A non-2xx answer; ``status`` and the service's ``detail`` are kept."""

    def __init__(self, status: int, detail: str) -> None:
        super().__init__(f"HTTP {status}: {detail}")
        self.status, self.detail = status, detail


class CsmClient:
    def __init__(self, base_url: str, token: str | None = None, timeout: float = 600.0) -> None:
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        self.http = httpx.Client(base_url=base_url, headers=headers, timeout=timeout)

    def __enter__(self) -> CsmClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.http.close()

    def _call(self, method: str, path: str, **kw: Any) -> Any:
        r = self.http.request(method, path, **kw)
        if r.status_code >= 400:
            try:
                detail = r.json().get("detail", r.text)
            except ValueError:
                detail = r.text
            raise ApiError(r.status_code, str(detail))
        return r.json() if r.content else None

    def wait_ready(self, timeout: float = 120.0) -> dict[str, Any]:
        deadline = time.monotonic() + timeout
        while True:
            try:
                r = self.http.get("/readyz")
                if r.status_code == 200:
                    return dict(r.json())
            except httpx.TransportError:
                pass
            if time.monotonic() > deadline:
                raise TimeoutError(f"{self.http.base_url} not ready after {timeout} s")
            time.sleep(0.02)

    def post_updates(self, updates: Sequence[dict[str, Any]]) -> dict[str, int]:
        return dict(self._call("POST", "/v1/updates", json={"updates": list(updates)}))

    def register(self, query: dict[str, Any]) -> dict[str, Any]:
        return dict(self._call("POST", "/v1/queries", json=query))

    def queries(self) -> list[dict[str, Any]]:
        return list(self._call("GET", "/v1/queries"))

    def delete_query(self, qid: int) -> None:
        self._call("DELETE", f"/v1/queries/{qid}")

    def graph(self) -> dict[str, Any]:
        return dict(self._call("GET", "/v1/graph"))

    def load_graph(self, path: str | Path, fmt: str = "csm") -> dict[str, Any]:
        with open(path, "rb") as f:
            return dict(self._call("POST", "/v1/graph", params={"format": fmt}, content=f))

    def matches(self, query: int, after_seq: int = -1, limit: int = 1000) -> list[dict[str, Any]]:
        page = self._call("GET", "/v1/matches",
                          params={"query": query, "after_seq": after_seq, "limit": limit})
        return list(page["events"])

    def deltas(self, bootstrap: str, topic: str = "csm.matches",
               stop: Callable[[list[dict[str, Any]]], bool] = lambda _: False,
               timeout: float = 60.0) -> list[dict[str, Any]]:
        """Every delta on the matches topic from the start, until ``stop(all_so_far)``."""
        return asyncio.run(_collect(bootstrap, topic, stop, timeout))


async def iter_deltas(bootstrap: str, topic: str = "csm.matches",
                      idle_timeout: float | None = None) -> AsyncIterator[dict[str, Any]]:
    """Match deltas from the start of the topic, in partition order (no consumer group)."""
    consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, group_id=None,
                                auto_offset_reset="earliest", fetch_max_wait_ms=5,
                                enable_auto_commit=False, max_partition_fetch_bytes=32 << 20)
    await consumer.start()
    try:
        parts = consumer.partitions_for_topic(topic) or set()
        while not parts:
            await consumer.force_metadata_update()
            parts = consumer.partitions_for_topic(topic) or set()
        consumer.assign([TopicPartition(topic, p) for p in sorted(parts)])
        idle_since = time.monotonic()
        while True:
            got = await consumer.getmany(timeout_ms=100)
            if not got:
                if idle_timeout is not None and time.monotonic() - idle_since > idle_timeout:
                    return
                continue
            idle_since = time.monotonic()
            for recs in got.values():
                for r in recs:
                    yield json.loads(r.value)
    finally:
        await consumer.stop()


async def _collect(bootstrap: str, topic: str, stop: Callable[[list[dict[str, Any]]], bool],
                   timeout: float) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []

    async def run() -> None:
        if stop(out):
            return
        async for e in iter_deltas(bootstrap, topic):
            out.append(e)
            if stop(out):
                return

    await asyncio.wait_for(run(), timeout)
    return out




def read_topic(bootstrap: str, topic: str, until: Callable[[list[Any]], bool] | None = None,
               timeout: float = 60.0) -> list[Any]:
    """All records of ``topic`` (every partition, each in order); with ``until``, wait for it."""
    async def run() -> list[Any]:
        # 100 ms: a broker on object storage lists a partition per fetch, which a long
        # topic cannot do within 5 ms (the fetch would come back empty every time)
        c = AIOKafkaConsumer(bootstrap_servers=bootstrap, group_id=None,
                             auto_offset_reset="earliest", fetch_max_wait_ms=100,
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
