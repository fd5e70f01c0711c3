"""Shard ownership through Kafka's consumer-group assignment (no protocol of our own).

Query ``q`` belongs to shard ``q % P``, which is also its matches partition. Every
instance joins one consumer group on the assignment topic (P empty partitions); the
group coordinator gives each live member some of them, and a member owns the shards of
the partitions it holds. A member that dies misses its heartbeats and the coordinator
moves its partitions after the session timeout; one that joins or leaves cleanly takes
part in a rebalance.

A shard's progress is the group's committed offset on its partition: the update-log
offset below which every delta of the shard is on the matches topic. The coordinator
accepts commits only from the current owner (the generation fences older ones), and
:meth:`Ownership.release` lets the runtime publish and commit everything before a
partition is given up, so the next owner continues exactly there.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import time
from collections.abc import Awaitable, Callable

from aiokafka import (
    AIOKafkaConsumer,
    AIOKafkaProducer,
    ConsumerRebalanceListener,
    TopicPartition,
)
from aiokafka.errors import KafkaError as AioKafkaError
from aiokafka.structs import OffsetAndMetadata

from streams.kafka import KafkaConfig, kafka_errors, last_records

from .metrics import Metrics

__all__ = ["Ownership"]

log = logging.getLogger("csm.ownership")


class _Listener(ConsumerRebalanceListener):  # type: ignore[misc]
    def __init__(self, own: Ownership) -> None:
        self.own = own

    async def on_partitions_revoked(self, revoked: list[TopicPartition]) -> None:
        await self.own._revoked({tp.partition for tp in revoked})

    async def on_partitions_assigned(self, assigned: list[TopicPartition]) -> None:
        self.own._assigned({tp.partition for tp in assigned})


class Ownership:
    """``release(shards)`` runs inside a rebalance, before the partitions are given up:
    the runtime settles, stops publishing them and calls :meth:`dropped`."""

    def __init__(self, kafka: KafkaConfig, topic: str, group: str, instance: str,
                 metrics: Metrics, partitions: int, session_timeout_ms: int = 3000,
                 url: str = "") -> None:
        """``url``: where this instance answers; announced with each shard it takes, so
        any instance can say where a shard lives (:meth:`owner`)."""
        self.kafka, self.topic = kafka, topic
        self.instance, self.metrics = instance, metrics
        self._meta = json.dumps({"instance": instance, "url": url}, separators=(",", ":"))
        self._owners: dict[int, dict[str, str]] = {}
        self._owners_at = -1e9
        self.partitions = partitions
        self.consumer = AIOKafkaConsumer(
            **kafka.client_kwargs(), group_id=group, client_id=instance,
            enable_auto_commit=False, auto_offset_reset="earliest", fetch_max_wait_ms=20,
            session_timeout_ms=session_timeout_ms,
            heartbeat_interval_ms=max(session_timeout_ms // 4, 100),
            rebalance_timeout_ms=max(4 * session_timeout_ms, 30_000),
            max_poll_interval_ms=300_000)
        #: shards caught up and published by this instance
        self.owned: set[int] = set()
        #: shards assigned but not caught up yet
        self.pending: set[int] = set()
        self.changed = asyncio.Event()
        self.release: Callable[[set[int]], Awaitable[None]] | None = None
        self._poll: asyncio.Task[None] | None = None

    async def start(self) -> None:
        with kafka_errors("joining the instance group"):
            await self.consumer.start()
        self.consumer.subscribe([self.topic], listener=_Listener(self))
        self._poll = asyncio.create_task(self._keep_polling(), name="csm-ownership")

    async def _keep_polling(self) -> None:
        """The group needs a polling member; the assignment topic itself stays empty."""
        while True:
            try:
                await self.consumer.getmany(timeout_ms=500)
            except asyncio.CancelledError:
                raise
            except Exception:   # the coordinator retries; keep the member polling
                log.exception("polling the assignment topic")
                await asyncio.sleep(0.5)

    async def stop(self) -> None:
        """Leave the group (a clean leave: the others rebalance at once)."""
        if self._poll is not None:
            self._poll.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._poll
        with contextlib.suppress(Exception):
            await self.consumer.stop()

    # -- the group's decisions ---------------------------------------------------
    async def _revoked(self, shards: set[int]) -> None:
        if self.release is not None:
            await self.release(shards)
        else:
            self.dropped(shards)

    def dropped(self, shards: set[int]) -> None:
        """``shards`` are given up (the runtime stopped publishing them)."""
        self.pending -= shards
        self.owned -= shards
        self.metrics.owned_shards.set(len(self.owned))

    def _assigned(self, shards: set[int]) -> None:
        self.metrics.rebalances.inc()
        self.pending |= shards - self.owned
        log.info("instance %s assigned shards %s", self.instance, sorted(shards))
        self.changed.set()

    # -- progress ------------------------------------------------------------------
    async def progress(self, shards: set[int]) -> dict[int, int]:
        """Each shard's committed offset (0 where none was committed yet)."""
        out = {}
        with kafka_errors("reading shard progress"):
            for s in sorted(shards):
                out[s] = await self.consumer.committed(TopicPartition(self.topic, s)) or 0
        return out

    async def commit(self, offset: int, shards: set[int] | None = None) -> bool:
        """Record that the owned shards (or ``shards``) are published below ``offset``;
        False where the group refused it (a rebalance took them: the next owner goes on
        from the previous commit and the matches topic's tail)."""
        which = self.owned if shards is None else shards
        if not which:
            return True
        try:
            await self.consumer.commit({TopicPartition(self.topic, s):
                                        OffsetAndMetadata(offset, "")
                                        for s in which})
            return True
        except AioKafkaError as exc:
            log.warning("shard progress at %d not committed: %s", offset, exc)
            return False

    async def announce(self, shards: set[int], producer: AIOKafkaProducer) -> None:
        """Say on the shards' own assignment partitions that this instance has them now
        (the broker keeps no commit metadata to carry it: Tansu drops it)."""
        with kafka_errors("announcing shard owners"):
            for s in sorted(shards):
                await producer.send_and_wait(self.topic, self._meta.encode(), partition=s)

    async def owner(self, shard: int) -> dict[str, str] | None:
        """The instance that took ``shard`` last (its owner, or during a handover its
        last owner): ``{"instance", "url"}``, or None before any. Cached for a second."""
        if time.monotonic() - self._owners_at > 1.0:
            found: dict[int, dict[str, str]] = {}
            async for rec in last_records(self.kafka, self.topic, self.partitions):
                with contextlib.suppress(ValueError, AttributeError):
                    found[rec.partition] = {k: str(v) for k, v in json.loads(rec.value).items()}
            self._owners, self._owners_at = found, time.monotonic()
        return self._owners.get(shard)

    def took(self, shards: set[int]) -> None:
        """``shards`` are caught up: published from now on."""
        self.pending -= shards
        self.owned |= shards
        self.metrics.owned_shards.set(len(self.owned))
