"""Consuming: the updates log in offset order, one record at most once.

Records come from two places: this process's own appends (:class:`LocalFeed`, no fetch
wait) as soon as they are the next offset, else the consumer's fetch. A fetch in flight
outlives a loop turn the feed won, so it is kept and awaited again next time.
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

from aiokafka import AIOKafkaConsumer, TopicPartition

from ._feed import LocalFeed, LocalRecord

__all__ = ["LogReader"]


class LogReader:
    """The updates partition from ``expected`` on, one record at most once."""

    def __init__(self, consumer: AIOKafkaConsumer, tp: TopicPartition, max_records: int) -> None:
        self.consumer, self.tp, self.max_records = consumer, tp, max_records
        #: the offset after the last record handed out
        self.expected = 0
        self._feed = LocalFeed()
        self._fetch: asyncio.Future[dict[Any, list[Any]]] | None = None

    def offer(self, offset: int, value: bytes, timestamp_ms: int) -> None:
        """A record the broker acknowledged at ``offset`` for this process (the API)."""
        self._feed.offer(LocalRecord(offset, value, timestamp_ms))

    async def next_records(self) -> list[Any]:
        """The next records in log order: this process's own appends as soon as they
        are next (no fetch wait), else what the fetch brings; [] after an idle fetch."""
        while True:
            local = self._feed.take(self.expected, self.max_records)
            if local:
                return local
            if self._fetch is None:
                self._fetch = asyncio.ensure_future(self.consumer.getmany(
                    self.tp, timeout_ms=200, max_records=self.max_records))
            woke = asyncio.ensure_future(self._feed.wait())
            try:
                await asyncio.wait({self._fetch, woke}, return_when=asyncio.FIRST_COMPLETED)
            finally:
                woke.cancel()
            if self._fetch.done():
                got, self._fetch = self._fetch.result(), None
                return [r for r in got.get(self.tp, []) if r.offset >= self.expected]

    async def close(self) -> None:
        if self._fetch is not None:
            self._fetch.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._fetch
