"""Control records on the updates log: query registrations and deletions, and the parts
of an initial graph upload. Each is applied at its place in the log, between update runs,
so every query sees exactly the updates after its registration."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable

import numpy as np

from gpu import Engine, QueryError, RegisteredQuery, UnknownQueryError
from streams.codec import SEQ_STRIDE, LoadPart, QueryDoc, Register, Unregister

from ._publish import Publisher
from ._types import Chunk, Outcome, RegisteredDoc
from ._window import Window
from .exceptions import GraphNotEmpty
from .metrics import Metrics

__all__ = ["Controls"]

log = logging.getLogger("csm.runtime")


class Controls:
    """``queries`` is the runtime's own table of registered queries (shared, not copied)."""

    def __init__(self, engine: Engine, queries: dict[int, RegisteredDoc], publisher: Publisher,
                 metrics: Metrics, window: Window,
                 owns: Callable[[int], bool] = lambda qid: True) -> None:
        """``owns(qid)``: this instance matches and publishes the query (always, alone)."""
        self.engine, self.queries, self.pub, self.metrics = engine, queries, publisher, metrics
        self.window, self.owns = window, owns
        #: graph uploads in progress: their parts so far
        self.loads: dict[str, list[LoadPart]] = {}

    async def apply(self, offset: int, item: Register | Unregister | LoadPart, chunk: Chunk,
                    replay: bool) -> Outcome:
        if isinstance(item, Register):
            return await self._register(offset, item.query, chunk, replay)
        if isinstance(item, Unregister):
            return await self._unregister(offset, item.id, chunk, replay)
        return await self._load(item)

    async def _register(self, offset: int, doc: QueryDoc, chunk: Chunk,
                        replay: bool) -> Outcome:
        try:
            spec = doc.to_spec()
        except QueryError as exc:
            return exc
        seq = offset * SEQ_STRIDE
        tick = self.engine.graph.tick + 1
        if replay or not self.owns(offset):   # replay: registered once the graph is rebuilt
            reg = RegisteredQuery(id=offset, spec=spec, automorphisms=0, plan_count=0) \
                if replay else await asyncio.to_thread(self.engine.describe, spec, offset)
            self.queries[offset] = RegisteredDoc(reg, doc, seq, tick)
            self.metrics.queries.set(len(self.queries))
            return self.queries[offset]
        reg, initial = await asyncio.to_thread(self.engine.register, spec, query_id=offset,
                                               initial=doc.emit_initial)
        rd = self.queries[offset] = RegisteredDoc(reg, doc, seq, tick)
        self.pub.open_query(offset)
        self.metrics.queries.set(len(self.queries))
        self.metrics.owned_queries.set(len(self.engine.queries))
        await self.pub.record_query(offset, {"id": offset, "seq": seq, **doc.model_dump()},
                                    chunk)
        if initial is not None and int(initial.counts[0, 0]) > 0 and \
                self.pub.wanted(offset, seq):
            lst = initial.listings.get(offset)
            await self.pub.send_event({
                "query": offset, "seq": seq, "sub": 0, "op": "initial", "src": None,
                "dst": None, "sign": 1, "count": int(initial.counts[0, 0]),
                "matches": None if lst is None else lst.tuples.tolist(),
                "truncated": False if lst is None else bool(lst.truncated[0]),
                "arrived_at": time.time()}, chunk)
        return rd

    async def _unregister(self, offset: int, qid: int, chunk: Chunk, replay: bool) -> Outcome:
        if qid not in self.queries:
            return UnknownQueryError(f"no query with id {qid}")
        rd = self.queries.pop(qid)
        self.window.retire(rd, offset)
        self.metrics.queries.set(len(self.queries))
        if replay or qid not in {r.id for r in self.engine.queries}:
            return None
        self.engine.unregister(qid)
        self.pub.close_query(qid)
        self.metrics.owned_queries.set(len(self.engine.queries))
        self.metrics.drop_query(qid)
        await self.pub.record_query(qid, None, chunk)
        return None

    async def _load(self, part: LoadPart) -> Outcome:
        parts = self.loads.setdefault(part.load, [])
        for other in [k for k in self.loads if k != part.load]:
            del self.loads[other]   # an upload cut short by a crash: never completes
        parts.append(part)
        if len(parts) < part.parts:
            log.info("graph upload %s: part %d of %d received", part.load, len(parts),
                     part.parts)
            return None
        del self.loads[part.load]
        if self.engine.graph.num_vertices:
            return GraphNotEmpty("the graph is not empty: an initial graph can only be "
                                 "loaded before any update")
        e = [p.edges for p in parts]
        t0 = time.perf_counter()
        stats = await asyncio.to_thread(
            self.engine.load_graph, np.concatenate([p.vertex_ids for p in parts]),
            np.concatenate([p.vertex_labels for p in parts]),
            np.concatenate([x.src for x in e]), np.concatenate([x.dst for x in e]),
            np.concatenate([x.label for x in e]))
        log.info("graph upload %s loaded: %d vertices, %d edges in %.2f s", part.load,
                 stats.vertices, stats.edges, time.perf_counter() - t0)
        return stats
