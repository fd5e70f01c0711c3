"""Records this process appended to the updates log, handed to the runtime directly.

The embedded durable broker answers a fetch only at ``fetch_max_wait_ms`` and lists the
partition each time, so a record fetched back costs 5-10 ms after its append was
acknowledged. A record the API appended is already known here, byte for byte, once the
broker acknowledged it: the runtime takes it from this feed as soon as it is the next
offset to process, and from the fetch otherwise (records of other producers, restarts).
The log stays the only source of truth: only acknowledged records enter the feed, at the
offsets the broker gave them, and each offset is processed once, in order.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

__all__ = ["LocalFeed", "LocalRecord"]


@dataclass(frozen=True, slots=True)
class LocalRecord:
    """The fields of a fetched record that the runtime reads."""

    offset: int
    value: bytes
    timestamp: int
    key: bytes | None = None


class LocalFeed:
    def __init__(self) -> None:
        self._records: dict[int, LocalRecord] = {}
        self._event = asyncio.Event()

    def offer(self, rec: LocalRecord) -> None:
        self._records[rec.offset] = rec
        self._event.set()

    def take(self, expected: int, limit: int) -> list[LocalRecord]:
        """The run of records from ``expected`` on (at most ``limit``); drops older ones."""
        for off in [o for o in self._records if o < expected]:
            del self._records[off]
        out = []
        while expected in self._records and len(out) < limit:
            out.append(self._records.pop(expected))
            expected += 1
        if not self._records:
            self._event.clear()
        return out

    async def wait(self) -> None:
        await self._event.wait()
