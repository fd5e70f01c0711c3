"""Publishing: deltas to the matches topic, bad records to the dead-letter topic, query
records to the queries topic, and each query's recent deltas for ``GET /v1/matches``.

Every send goes into the chunk's futures; the runtime commits the chunk only once all of
them are acknowledged. A query's deltas may leave ahead of another query's earlier ones
(per-query delivery: design.md 2x), so a partition is a prefix of each of its queries'
ordered delta streams, not of their interleaving: the last record of every publish call
to a partition carries the partition's frontier (header ``frontier``: each query's last
delta there), and after a crash :attr:`Publisher.cuts` holds it, so each query's deltas up
to its cut are dropped instead of sent twice. A partition whose last record has no
frontier (written before) gives a prefix cut, :attr:`Publisher.skip`, as before.
"""

from __future__ import annotations

import functools
import json
import logging
import time
from collections import deque
from typing import Any

import numpy as np
import numpy.typing as npt
from aiokafka import AIOKafkaProducer

from gpu import BatchResult
from streams.codec import SEQ_STRIDE, EventColumns, format_events
from streams.kafka import kafka_errors

from ._types import Chunk, RuntimeConfig
from .metrics import Metrics

__all__ = ["FRONTIER", "Cut", "Publisher", "cuts_of"]

log = logging.getLogger("csm.runtime")

#: the last delta of a matches partition: (seq, sub, query)
Cut = tuple[int, int, int]
#: the header of a partition's frontier: JSON {query: [seq, sub]}, each query's last delta
#: there; under key -1 a prefix cut [seq, sub, query] still in force (a tail written
#: without frontier, recovered and not yet committed past)
FRONTIER = "frontier"
_PREFIX = -1


def cuts_of(record: Any) -> tuple[dict[int, tuple[int, int]], Cut | None]:
    """What a matches partition's last record says is there already: each query's last
    delta and a prefix cut (a record without frontier header: its own delta, as a prefix
    of every query's deltas there)."""
    v = json.loads(record.value)
    for k, h in record.headers or ():
        if k == FRONTIER:
            front = {int(q): c for q, c in json.loads(h).items()}
            pre = front.pop(_PREFIX, None)
            return ({q: (int(c[0]), int(c[1])) for q, c in front.items()},
                    None if pre is None else (int(pre[0]), int(pre[1]), int(pre[2])))
    return {}, (v["seq"], v["sub"], v["query"])


@functools.lru_cache(maxsize=4096)
def _key(qid: int) -> bytes:
    """A matches message's key: the query id."""
    return str(qid).encode()


def _listed(result: BatchResult, ii: npt.NDArray[np.int64],
            jj: npt.NDArray[np.int64]) -> dict[str, npt.NDArray[Any]]:
    """Where each delta (update ii, query column jj) finds its listed matches, as the
    listing columns of :class:`EventColumns` (row0 -1: none listed)."""
    n = len(ii)
    row0 = np.full(n, -1, np.int64)
    rows = np.zeros(n, np.int64)
    width = np.zeros(n, np.int64)
    trunc = np.zeros(n, np.bool_)
    flat, base = [], 0
    for j, q in enumerate(result.query_ids):
        lst = result.listings.get(q)
        if lst is None or not len(lst.op_index):
            continue
        sel = np.flatnonzero(jj == j)
        r = np.searchsorted(lst.op_index, ii[sel])
        r[r >= len(lst.op_index)] = 0
        hit = lst.op_index[r] == ii[sel]
        sel, r = sel[hit], r[hit]
        w = lst.tuples.shape[1]
        starts = lst.offsets[r]
        rows[sel] = lst.offsets[r + 1] - starts
        width[sel] = w
        trunc[sel] = lst.truncated[r]
        row0[sel] = base + starts * w
        flat.append(lst.tuples.reshape(-1))
        base += lst.tuples.size
    tuples = np.concatenate(flat).astype(np.int64) if flat else np.zeros(0, np.int64)
    return {"truncated": trunc, "row0": row0, "rows": rows, "width": width, "tuples": tuples}


def _tally(chunk: Chunk, qids: npt.NDArray[np.int64], counts: npt.NDArray[np.int64]) -> None:
    for q in np.unique(qids).tolist():
        c = counts[qids == q]
        t = chunk.tally.setdefault(q, [0, 0, 0])   # deltas, +matches, -matches
        t[0] += len(c)
        t[1] += int(c[c > 0].sum())
        t[2] += int(-c[c < 0].sum())


def _frontier(front: dict[int, list[int]]) -> bytes:
    return json.dumps(front, separators=(",", ":")).encode()


class Publisher:
    def __init__(self, producer: AIOKafkaProducer, cfg: RuntimeConfig, metrics: Metrics) -> None:
        self.producer, self.cfg, self.metrics = producer, cfg, metrics
        #: per matches partition: the cut below which deltas are already on the topic (a
        #: prefix of every query's deltas there: a tail without frontier, a shard's floor)
        self.skip: dict[int, Cut] = {}
        #: per query: its last delta already on the topic (a tail's frontier)
        self.cuts: dict[int, tuple[int, int]] = {}
        #: per matches partition: each query's last delta sent there, [seq, sub] (the
        #: frontier header; queries with nothing past the last commit are dropped; under
        #: -1 a recovered prefix cut)
        self.frontier: dict[int, dict[int, list[int]]] = {}
        #: per matches partition: the last delta sent (snapshots record it)
        self.published: dict[int, list[int]] = {}
        #: dead-letter records up to this update-log offset are already on their topic
        self.dead_upto = -1
        self._recent: dict[int, deque[tuple[int, bytes]]] = {}   # (seq, message value)

    # -- recent deltas per query ---------------------------------------------------
    def open_query(self, qid: int) -> None:
        self._recent.setdefault(qid, deque(maxlen=self.cfg.recent_per_query))

    def close_query(self, qid: int) -> None:
        self._recent.pop(qid, None)

    def recent(self, qid: int, after_seq: int, limit: int) -> list[dict[str, Any]]:
        out = []
        for seq, value in self._recent.get(qid, ()):
            if seq > after_seq:
                out.append(json.loads(value))
                if len(out) == limit:
                    break
        return out

    # -- deltas ------------------------------------------------------------------------
    def wanted(self, qid: int, seq: int, sub: int = 0) -> bool:
        """This delta is past its partition's cut and its query's (not on the matches
        topic yet)."""
        cut = self.skip.get(qid % self.cfg.matches_partitions)
        if cut is not None and (seq, sub, qid) <= cut:
            return False
        mine = self.cuts.get(qid)
        return mine is None or (seq, sub) > mine

    def recovered(self, part: int, record: Any) -> None:
        """The last record of matches partition ``part`` (recovery, a shard's take-over):
        its frontier's cuts, or a prefix cut where it has none; the frontier goes on."""
        front, pre = cuts_of(record)
        for q, c in front.items():
            self.cuts[q] = max(self.cuts.get(q, c), c)
        self.frontier[part] = {q: list(c) for q, c in front.items()}
        if pre is not None:   # carried on in the frontier until committed past
            self.skip[part] = max(self.skip.get(part, pre), pre)
            self.frontier[part][_PREFIX] = list(self.skip[part])

    def committed(self, offset: int) -> None:
        """Every delta of update-log offsets below ``offset`` is on the topic and will not
        be sent again: cuts and frontier entries below it tell nothing more, and go (a
        query's deltas past a cut may leave before another's below it, so a cut stays
        until the commit, not until some delta passes it)."""
        floor = offset * SEQ_STRIDE
        for front in self.frontier.values():
            for q in [q for q, c in front.items() if c[0] < floor]:
                del front[q]
        for q in [q for q, c in self.cuts.items() if c[0] < floor]:
            del self.cuts[q]
        for part in [p for p, c in self.skip.items() if c[0] < floor]:
            del self.skip[part]

    async def publish(self, result: BatchResult, arrived: dict[int, float],
                      chunk: Chunk) -> None:
        """One matches message per non-empty (update, query) delta, built column-wise and
        appended to one record batch per partition: no per-delta dict, send or future."""
        ii, jj = np.nonzero(result.counts)
        if not len(ii):
            return
        qids = np.asarray(result.query_ids, np.int64)[jj]
        seq, sub = result.seq[ii], result.sub[ii].astype(np.int64)
        P = self.cfg.matches_partitions
        keep = np.ones(len(ii), np.bool_)
        for part, (cs, csub, cq) in self.skip.items():   # after a crash: already published
            mine = qids % P == part
            done = (seq < cs) | ((seq == cs) & ((sub < csub) | ((sub == csub) & (qids <= cq))))
            keep &= ~(mine & done)
        for q, (cs, csub) in self.cuts.items():
            done = (seq < cs) | ((seq == cs) & (sub <= csub))
            keep &= ~((qids == q) & done)
        if not keep.all():
            ii, jj, qids, seq, sub = ii[keep], jj[keep], qids[keep], seq[keep], sub[keep]
        counts = result.counts[ii, jj]
        offs = np.fromiter(arrived, np.int64, len(arrived))
        at = np.fromiter(arrived.values(), np.float64, len(arrived))
        order = np.argsort(offs)
        ev = EventColumns(
            query=qids, seq=seq, sub=sub, op=result.request_op[ii].astype(np.int64),
            src=result.ops.src[ii], dst=result.ops.dst[ii], count=counts,
            arrived_at=at[order][np.searchsorted(offs[order], seq // SEQ_STRIDE)],
            **_listed(result, ii, jj))
        values, off, headers, hoff = format_events(ev, time.time())
        parts = qids % P
        fronts: dict[int, tuple[int, bytes]] = {}   # a partition's last record, its header
        for part in np.unique(parts).tolist():
            here = np.flatnonzero(parts == part)
            k = int(here[-1])
            self.published[part] = [int(seq[k]), int(sub[k]), int(qids[k])]
            front = self.frontier.setdefault(part, {})
            # deltas are in seq order: each query's last, one pass from the end
            qs, first = np.unique(qids[here][::-1], return_index=True)
            for q, j in zip(qs.tolist(), here[::-1][first].tolist(), strict=True):
                front[q] = [int(seq[j]), int(sub[j])]
            fronts[part] = (k, _frontier(front))
        batches: dict[int, Any] = {}
        for k, (q, sq) in enumerate(zip(qids.tolist(), seq.tolist(), strict=True)):
            value = values[off[k]:off[k + 1]]
            last = fronts.get(q % P)
            self._append(batches, q % P, _key(q), value, headers[hoff[k]:hoff[k + 1]], chunk,
                         last[1] if last is not None and last[0] == k else None)
            recent = self._recent.get(q)
            if recent is not None:
                recent.append((sq, value))
        await self._flush(batches, chunk)
        _tally(chunk, qids, counts)

    def _append(self, batches: dict[int, Any], part: int, key: bytes, value: bytes, seq: bytes,
                chunk: Chunk, front: bytes | None = None) -> None:
        hdrs = [("seq", seq)] if front is None else [("seq", seq), (FRONTIER, front)]
        b = batches.get(part)
        if b is None:
            b = batches[part] = self.producer.create_batch()
        if b.append(key=key, value=value, timestamp=None, headers=hdrs) is None:   # full
            chunk.full.append((part, b))
            b = batches[part] = self.producer.create_batch()
            b.append(key=key, value=value, timestamp=None, headers=hdrs)

    async def _flush(self, batches: dict[int, Any], chunk: Chunk) -> None:
        """Submit the record batches in the order they were filled (per partition)."""
        full, chunk.full = chunk.full, []
        with kafka_errors("sending deltas"):
            for part, b in [*full, *batches.items()]:
                b.close()
                chunk.futures.append(await self.producer.send_batch(
                    b, self.cfg.matches_topic, partition=part))

    async def send_event(self, event: dict[str, Any], chunk: Chunk) -> None:
        """A single delta outside update batches (a registration's initial matches)."""
        q = event["query"]
        event["published_at"] = time.time()
        value = json.dumps(event, separators=(",", ":")).encode()
        part = q % self.cfg.matches_partitions
        front = self.frontier.setdefault(part, {})
        front[q] = [int(event["seq"]), int(event["sub"])]
        batches: dict[int, Any] = {}
        self._append(batches, part, _key(q), value, str(event["seq"]).encode(), chunk,
                     _frontier(front))
        await self._flush(batches, chunk)
        _tally(chunk, np.array([q]), np.array([event["count"] * event["sign"]]))
        recent = self._recent.get(q)
        if recent is not None:
            recent.append((event["seq"], value))

    # -- other topics --------------------------------------------------------------------
    async def dead_letter(self, rec: Any, reason: str, chunk: Chunk, replay: bool) -> None:
        log.warning("update-log offset %d dead-lettered: %s", rec.offset, reason)
        if replay or rec.offset <= self.dead_upto:
            return
        value = rec.value.decode("utf-8", "replace") if rec.value is not None else None
        body = {"offset": rec.offset, "reason": reason, "value": value,
                "topic": self.cfg.updates_topic, "dead_at": time.time()}
        with kafka_errors("dead-lettering"):
            chunk.futures.append(await self.producer.send(
                self.cfg.deadletter_topic, json.dumps(body).encode(), key=rec.key))
        self.metrics.dead_letters.inc()

    async def record_query(self, qid: int, body: dict[str, Any] | None, chunk: Chunk) -> None:
        """The query's record on the queries topic (None: its deletion, a tombstone)."""
        what = "recording a query" if body is not None else "recording a query deletion"
        with kafka_errors(what):
            chunk.futures.append(await self.producer.send(
                self.cfg.queries_topic, None if body is None else json.dumps(body).encode(),
                key=str(qid).encode()))
