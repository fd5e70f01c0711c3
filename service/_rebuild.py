"""A gap older than the retention window: rebuild the graph versions it needs.

A side engine restores this instance's newest snapshot when it is older than the gap
(else starts empty), replays the log from there up to this replica's position with no
query registered, and keeps every run from the gap's start on, with the graph versions
held from there (a :class:`Window` without a limit). The shard's deltas are then matched
from it exactly as from the live window, and the side engine is dropped.
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import TYPE_CHECKING, Any

from aiokafka import TopicPartition

from gpu import Engine
from streams.codec import LoadPart, Register, Unregister, Updates, decode
from streams.exceptions import DecodeError
from streams.kafka import kafka_errors, make_consumer

from ._control import Controls
from ._publish import Publisher
from ._recovery import load_snapshot
from ._runs import run_batch
from ._types import Chunk, RegisteredDoc
from ._window import PastRun, Window
from .exceptions import StateCorrupt
from .metrics import Metrics

if TYPE_CHECKING:
    from .runtime import Runtime

__all__ = ["Rebuilt", "rebuild"]

log = logging.getLogger("csm.ownership")


class Rebuilt:
    """The side engine, its window over the gap and the queries it saw."""

    def __init__(self, engine: Engine, window: Window,
                 queries: dict[int, RegisteredDoc]) -> None:
        self.engine, self.window, self.queries = engine, window, queries


async def rebuild(rt: Runtime, start: int, here: int) -> Rebuilt:
    t0 = time.perf_counter()
    engine = Engine(rt.engine.backend, options=rt.engine.options)   # (its graph budget too)
    window = Window(engine, 1 << 62)
    queries: dict[int, RegisteredDoc] = {}
    quiet = Metrics()   # the side engine's gauges are nobody's
    controls = Controls(engine, queries, Publisher(None, rt.cfg, quiet),
                        quiet, window)
    offset = 0
    snap = await rt.snaps.latest()
    if snap is not None and snap.offset <= start:
        await load_snapshot(engine, snap, queries)   # queries registered before the gap
        offset = snap.offset
    window.reset(offset)
    tp = TopicPartition(rt.cfg.updates_topic, 0)
    consumer = make_consumer(rt.kafka)
    with kafka_errors("rebuilding from the log"):
        await consumer.start()
        try:
            consumer.assign([tp])
            first = (await consumer.beginning_offsets([tp]))[tp]
            if first > offset:
                raise StateCorrupt(
                    f"a shard's gap starts at update-log offset {start}, before this "
                    f"instance's retention window, and the log starts at {first}: no "
                    "snapshot here covers it; raise CSM_CATCHUP_WINDOW_UPDATES")
            consumer.seek(tp, offset)
            while offset < here:
                got = await consumer.getmany(tp, timeout_ms=1000, max_records=1000)
                for rec in got.get(tp, []):
                    if rec.offset >= here:
                        break
                    await _apply(engine, window, controls, rec)
                    offset = rec.offset + 1
        finally:
            await consumer.stop()
    log.info("rebuilt the graph versions from offset %d to %d in %.2f s", start, here,
             time.perf_counter() - t0)
    return Rebuilt(engine, window, queries)


async def _apply(engine: Engine, window: Window, controls: Controls, rec: Any) -> None:
    """One record, as the replica applied it (update runs of one message each)."""
    try:
        item = decode(rec.value)
    except DecodeError as exc:
        window.dead_letter(rec, str(exc))
        return
    if isinstance(item, Updates):
        tick0 = engine.graph.tick + 1
        r = await asyncio.to_thread(engine.apply, run_batch([(rec.offset, item, 0.0)]))
        arrived = (item.arrived_at if item.arrived_at is not None
                   else rec.timestamp / 1e3)
        window.add(tick0, PastRun.of(rec.offset, rec.offset, r, {rec.offset: arrived}))
    elif isinstance(item, Register | Unregister | LoadPart):
        await controls.apply(rec.offset, item, Chunk([], [], {}), replay=True)
