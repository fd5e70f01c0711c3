"""When to take a snapshot, and writing it off the event loop.

The runtime decides *what* a snapshot holds (it owns the engine and the queries); this
keeps the schedule (records or updates since the last one), the one write in flight, and
the log truncation that follows a write.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable
from pathlib import Path

from .snapshot import Snapshot, read_latest, write_snapshot

__all__ = ["Snapshots"]

log = logging.getLogger("csm.runtime")


class Snapshots:
    """``truncate(offset)`` drops update-log records below ``offset`` once a snapshot
    there is on disk (the durable embedded broker's retention); None keeps the log."""

    def __init__(self, folder: Path | None, every: int, every_updates: int,
                 truncate: Callable[[int], int] | None) -> None:
        self.folder, self.every, self.every_updates = folder, every, every_updates
        self._truncate = truncate
        self.offset = 0      # of the last snapshot taken
        self.work = 0        # updates (and loaded edges) applied since
        self._task: asyncio.Future[None] | None = None

    async def latest(self) -> Snapshot | None:
        if self.folder is None:
            return None
        snap = await asyncio.to_thread(read_latest, self.folder)
        if snap is not None:
            self.offset = snap.offset
        return snap

    def due(self, next_offset: int) -> bool:
        """Enough records or updates since the last one, and no write in flight."""
        return self.folder is not None and (self._task is None or self._task.done()) and (
            next_offset - self.offset >= self.every or self.work >= self.every_updates)

    def write(self, snap: Snapshot) -> None:
        """Start writing ``snap`` (already copied: the engine may move on) on a thread."""
        assert self.folder is not None
        self.offset, self.work = snap.offset, 0
        self._task = asyncio.ensure_future(asyncio.to_thread(self._write, self.folder, snap))

    def _write(self, folder: Path, snap: Snapshot) -> None:
        t0 = time.perf_counter()
        try:
            write_snapshot(folder, snap)
            dropped = self._truncate(snap.offset) if self._truncate is not None else 0
        except Exception:   # the log still holds everything: the next one may succeed
            log.exception("snapshot at offset %d failed", snap.offset)
            return
        log.info("snapshot at offset %d in %.2f s (%d log batches dropped behind it)",
                 snap.offset, time.perf_counter() - t0, dropped)

    async def close(self) -> None:
        if self._task is not None:
            with contextlib.suppress(Exception):
                await self._task
