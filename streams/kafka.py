"""aiokafka at the boundary: connection settings, clients tuned for latency, topics.

Producers use acks=all with one request in flight per partition (aiokafka's default), so
each partition holds what was sent in the order it was sent: the runtime's restart logic
relies on that. aiokafka errors leave this module as :class:`KafkaError`.
"""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from aiokafka.admin import AIOKafkaAdminClient, NewTopic
from aiokafka.errors import KafkaError as _AioKafkaError
from aiokafka.errors import TopicAlreadyExistsError

from .exceptions import KafkaError

__all__ = ["MAX_MESSAGE_BYTES", "KafkaConfig", "ensure_topics", "kafka_errors", "last_records",
           "make_consumer", "make_producer"]

MAX_MESSAGE_BYTES = 8 << 20


@dataclass(frozen=True, slots=True)
class KafkaConfig:
    bootstrap: str
    security_protocol: str = "PLAINTEXT"
    sasl_mechanism: str | None = None
    sasl_username: str | None = None
    sasl_password: str | None = None
    ssl_cafile: str | None = None
    ssl_certfile: str | None = None
    ssl_keyfile: str | None = None
    fetch_max_wait_ms: int = 5

    def client_kwargs(self) -> dict[str, Any]:
        kw: dict[str, Any] = {"bootstrap_servers": self.bootstrap,
                              "security_protocol": self.security_protocol}
        if self.sasl_mechanism:
            kw.update(sasl_mechanism=self.sasl_mechanism,
                      sasl_plain_username=self.sasl_username,
                      sasl_plain_password=self.sasl_password)
        if self.security_protocol in ("SSL", "SASL_SSL"):
            from aiokafka.helpers import create_ssl_context
            kw["ssl_context"] = create_ssl_context(cafile=self.ssl_cafile,
                                                   certfile=self.ssl_certfile,
                                                   keyfile=self.ssl_keyfile)
        return kw


@contextlib.contextmanager
def kafka_errors(what: str) -> Any:
    try:
        yield
    except _AioKafkaError as exc:
        raise KafkaError(f"{what}: {type(exc).__name__}: {exc}") from exc


def make_producer(cfg: KafkaConfig, *, linger_ms: int = 0) -> AIOKafkaProducer:
    return AIOKafkaProducer(**cfg.client_kwargs(), acks="all", linger_ms=linger_ms,
                            max_request_size=MAX_MESSAGE_BYTES, max_batch_size=1 << 20,
                            request_timeout_ms=30_000)


def make_consumer(cfg: KafkaConfig, group_id: str | None = None) -> AIOKafkaConsumer:
    """Manually assigned (no group join, which is slow on the embedded broker); with a
    ``group_id`` it can still commit and read committed offsets."""
    return AIOKafkaConsumer(**cfg.client_kwargs(), group_id=group_id, enable_auto_commit=False,
                            auto_offset_reset="earliest",
                            fetch_max_wait_ms=cfg.fetch_max_wait_ms,
                            max_partition_fetch_bytes=4 * MAX_MESSAGE_BYTES,
                            fetch_max_bytes=16 * MAX_MESSAGE_BYTES)


async def ensure_topics(cfg: KafkaConfig, partitions: dict[str, int]) -> dict[str, int]:
    """Create the missing topics; return every topic's partition count."""
    admin = AIOKafkaAdminClient(**cfg.client_kwargs())
    with kafka_errors("creating topics"):
        await admin.start()
        try:
            existing = set(await admin.list_topics())
            new = [NewTopic(t, n, 1) for t, n in partitions.items() if t not in existing]
            if new:
                with contextlib.suppress(TopicAlreadyExistsError):
                    await admin.create_topics(new)
            found = await admin.describe_topics(list(partitions))
        finally:
            await admin.close()
    return {d["topic"]: len(d["partitions"]) for d in found}


async def last_records(cfg: KafkaConfig, topic: str, partitions: int) -> AsyncIterator[Any]:
    """The last record of every non-empty partition of ``topic``."""
    # a one-off read, latency does not matter; a longer wait lets a broker on object
    # storage (which lists a partition's batches per fetch) answer a long partition
    consumer = make_consumer(dataclasses.replace(cfg, fetch_max_wait_ms=max(
        cfg.fetch_max_wait_ms, 500)))
    with kafka_errors(f"reading the tail of {topic}"):
        await consumer.start()
        try:
            tps = [TopicPartition(topic, p) for p in range(partitions)]
            consumer.assign(tps)
            ends = await consumer.end_offsets(tps)
            starts = await consumer.beginning_offsets(tps)
            for tp in tps:
                if ends[tp] <= starts[tp]:
                    continue
                consumer.seek(tp, ends[tp] - 1)
                for _ in range(30):
                    got = await consumer.getmany(tp, timeout_ms=1000)
                    if got.get(tp):
                        yield got[tp][-1]
                        break
                else:
                    raise KafkaError(f"{tp}: its last record could not be read in 30 s")
        finally:
            await consumer.stop()
