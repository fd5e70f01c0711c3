"""The engine: host graph + registered queries + one executor.

``apply`` runs the two phases of every batch: (1) the graph updater resolves the raw
updates in order and writes lifetimes (``HostGraph.apply``); (2) the executor matches
every applied edge update against its own tick, all in parallel. Results are exactly
those of applying the updates one at a time.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, cast

import numpy as np
import numpy.typing as npt

from ._executor import (
    Executor,
    ExecutorOptions,
    IoStats,
    MatchOutput,
    MatchTasks,
    Ticket,
    create_executor,
    edge_tasks,
)
from ._host_memory import keep_freed_memory
from ._records import positional
from ._result_columns import result_columns
from ._results import BatchResult, BatchStats, Listing
from ._types import CountMode, UpdateBatch, UpdateOp
from .exceptions import EngineError, UnknownQueryError
from .graph._host import BESIDE_EDGES, HALVES_INSERTS, HostGraph, LoadStats, OpTable
from .planning._planner import PlanSet, QueryPlan, plan_query
from .planning._query import Query

if TYPE_CHECKING:
    from .cuda._pipeline import BatchTicket

#: op and status codes as plain ints: numpy compares them with arrays without the enum
_INS_V = int(UpdateOp.INSERT_VERTEX)
_NO_COUNTS = np.zeros(0, np.int64)

__all__ = ["Engine", "PendingBatch", "QuerySpec", "RegisteredQuery", "warm_up"]


@dataclass(frozen=True, slots=True)
class QuerySpec:
    query: Query
    mode: CountMode = CountMode.SUBGRAPHS
    list_matches: bool = False
    #: listed tuples per update and query; counts stay exact beyond it
    max_matches_per_update: int = 1000

    def __post_init__(self) -> None:
        if self.max_matches_per_update < 0:
            raise EngineError("max_matches_per_update must be >= 0")


@dataclass(frozen=True, slots=True)
class RegisteredQuery:
    id: int
    spec: QuerySpec
    automorphisms: int
    plan_count: int
    #: an update's count is (sum of its plans' counts) * num // den (see ``plan_query``)
    scale: tuple[int, int] = (1, 1)
    #: the same for the static count of :meth:`Engine.register`'s ``initial``
    initial_scale: tuple[int, int] = (1, 1)


@dataclass(frozen=True, slots=True)
class _Standing:
    """What every batch reads of the standing queries, in registration order (rebuilt at
    each (un)registration, not per batch)."""

    qids: tuple[int, ...]
    specs: dict[int, QuerySpec]
    scale: npt.NDArray[np.int64]   # (2, queries): count = matches * num // den, a row each
                                   # (contiguous: result_columns takes them as they are)
    caps: npt.NDArray[np.int64]    # listing cap per update; -1: count only
    counting_only: bool            # no query lists its matches (the device pipeline)

    @classmethod
    def of(cls, queries: dict[int, RegisteredQuery]) -> _Standing:
        specs = {q: r.spec for q, r in queries.items()}
        return cls(tuple(queries), specs,
                   np.array([r.scale for r in queries.values()], np.int64).reshape(-1, 2).T.copy(),
                   np.array([s.max_matches_per_update if s.list_matches else -1
                             for s in specs.values()], np.int64),
                   not any(s.list_matches for s in specs.values()))


class Engine:
    def __init__(self, backend: str = "auto", executor: Executor | None = None,
                 options: ExecutorOptions | None = None) -> None:
        keep_freed_memory()   # each batch's results are fresh arrays: reuse freed ones
        #: what the executor was made with (a side engine of the service takes the same)
        self.options = options or ExecutorOptions()
        self.executor = executor or create_executor(backend, self.options)
        # the executor's own graph where it has one (the GPU's device-owned graph), else
        # the host graph, which the executor reads or mirrors
        self.graph: HostGraph = getattr(self.executor, "owned_graph", None) or HostGraph()
        self._queries: dict[int, RegisteredQuery] = {}
        self._plans: dict[int, QueryPlan] = {}
        self._planset: PlanSet | None = None
        self._standing = _Standing.of({})
        #: batches go to the executor's device pipeline: a device-owned graph, queries
        #: standing and none listing (count mode), and (checked per batch) no versions
        #: held, edge updates only; the rest takes the host path, which builds tasks and
        #: listings on the host
        self._has_pipeline = bool(getattr(self.executor, "pipelined", False))
        self._pipe = False
        self._next_id = 1
        self._pending: list[PendingBatch] = []
        self._hold: int | None = None
        # nothing may move graph memory while a kernel reads it
        self.graph.before_relayout = self.drain
        self.graph.copy_on_write = self.executor.reads_during_updates

    @property
    def backend(self) -> str:
        return self.executor.name

    # -- graph ----------------------------------------------------------------
    def load_graph(self, vertex_ids: npt.ArrayLike, vertex_labels: npt.ArrayLike,
                   src: npt.ArrayLike, dst: npt.ArrayLike, label: npt.ArrayLike) -> LoadStats:
        """Bulk-load the initial graph (empty engine only; no deltas are produced)."""
        stats = self.graph.load(np.asarray(vertex_ids, np.int64),
                                np.asarray(vertex_labels, np.int32), np.asarray(src, np.int64),
                                np.asarray(dst, np.int64), np.asarray(label, np.int32))
        self.executor.on_update(self.graph, _empty_ops())
        return stats

    def restore_graph(self, arrays: dict[str, npt.NDArray[np.generic]]) -> None:
        """Put back a graph from :meth:`HostGraph.dump` (empty engine only)."""
        self.graph.restore(arrays)
        self.executor.on_update(self.graph, _empty_ops())

    # -- queries ----------------------------------------------------------------
    @property
    def queries(self) -> tuple[RegisteredQuery, ...]:
        return tuple(self._queries.values())

    def register(self, spec: QuerySpec, *, query_id: int | None = None,
                 initial: bool = False) -> tuple[RegisteredQuery, BatchResult | None]:
        """Add a standing query; with ``initial`` also return its current match set."""
        self._settle()
        qid = self._next_id if query_id is None else query_id
        if qid in self._queries:
            raise EngineError(f"query id {qid} is already registered")
        self._merge_deferred()   # what may fail, before anything changes
        reg, qp = self._planned(spec, qid)
        self._queries[qid] = reg
        self._plans[qid] = qp
        self._changed()
        self._next_id = max(self._next_id, qid + 1)
        return reg, (self._initial(qid) if initial else None)

    def describe(self, spec: QuerySpec, query_id: int) -> RegisteredQuery:
        """What :meth:`register` would record (automorphisms, plans), without registering:
        a query another instance matches (scale-out) is still described the same way."""
        self._settle()
        return self._planned(spec, query_id)[0]

    def _planned(self, spec: QuerySpec, qid: int) -> tuple[RegisteredQuery, QueryPlan]:
        qp = plan_query(spec.query, spec.mode, listing=spec.list_matches,
                        label_share=self._label_share())
        return RegisteredQuery(id=qid, spec=spec, automorphisms=qp.automorphisms,
                               plan_count=len(qp.plans), scale=qp.scale,
                               initial_scale=qp.initial_scale), qp

    def _label_share(self) -> dict[int, float]:
        n = self.graph.num_vertices
        alive = self.graph.valive[:n].astype(bool)
        labels, counts = np.unique(self.graph.vlabel[:n][alive], return_counts=True)
        total = max(int(counts.sum()), 1)
        return {int(lab): c / total for lab, c in zip(labels, counts, strict=True)}

    def unregister(self, query_id: int) -> None:
        self._settle()
        if query_id not in self._queries:
            raise UnknownQueryError(f"no query with id {query_id}")
        self._merge_deferred()
        del self._queries[query_id]
        del self._plans[query_id]
        self._changed()

    def _merge_deferred(self) -> None:
        """The host graph's deferred edges into their versions (a new set of standing
        queries may read them): done before the queries change, so a failure there
        leaves the engine as it was."""
        merge = getattr(self.graph, "merge_deferred", None)
        if merge is not None:
            merge()

    def _changed(self) -> None:
        """The standing queries changed: what batches read of them, the labels they read
        (a host graph in place keeps edges no query reads pending), and the plan set."""
        self._standing = st = _Standing.of(self._queries)
        self._pipe = self._has_pipeline and bool(st.qids) and st.counting_only
        relevant = getattr(self.graph, "set_relevant_labels", None)
        if relevant is not None:
            labels = [lab for q in self._queries.values() for lab in q.spec.query.vertex_labels]
            relevant(None if None in labels else frozenset(labels))
        self._planset = None
        self._plan_set()

    def _plan_set(self) -> PlanSet:
        """Packed at every (un)registration, so no batch pays for it (nor for setting the
        device pipeline up for it)."""
        if self._planset is None:
            qps = [self._plans[q] for q in self._queries]
            self._planset = PlanSet.pack([qp.plans for qp in qps],
                                         [qp.orbit_plans for qp in qps],
                                         [qp.automorphisms for qp in qps])
            prepare = getattr(self.executor, "prepare_batches", None)
            if prepare is not None and self._queries and self._standing.counting_only:
                prepare(self._planset, self._standing.scale)
        return self._planset

    def initial_at(self, qid: int, tick: int) -> BatchResult:
        """``register(initial=True)``'s match set as it was before update ``tick``
        (needs the versions held since then: :meth:`hold_versions`)."""
        self._settle()
        if qid not in self._queries:
            raise UnknownQueryError(f"no query with id {qid}")
        self._readable(tick)
        return self._initial(qid, tick)

    def _initial(self, qid: int, tick: int | None = None) -> BatchResult:
        """Static matching: every alive directed edge as the image of query edge 0."""
        at = self.graph.tick + 1 if tick is None else tick
        a, b, lab = self.graph.alive_edges() if tick is None else self.graph.alive_edges(tick)
        ps = self._plan_set()
        j = list(self._queries).index(qid)
        lo = int(ps.query_lo[j])
        spec = self._queries[qid].spec
        n = len(a)
        tasks = MatchTasks(a=a, b=b, label=lab, tick=np.full(n, at, np.int64),
                           plan_lo=np.full(n, lo, np.int32), plan_hi=np.full(n, lo + 1, np.int32),
                           cap=np.full(n, spec.max_matches_per_update if spec.list_matches
                                       else -1, np.int64))
        t0 = time.perf_counter()
        out = self.executor.submit(self.graph, ps, tasks).wait()
        secs = time.perf_counter() - t0
        num, den = self._queries[qid].initial_scale
        total = int(out.counts.sum()) * num // den
        listing = None
        if spec.list_matches:
            nq = spec.query.n
            rows = self.graph.vext[out.rows[:, :nq]]
            cap = spec.max_matches_per_update
            listing = Listing(op_index=np.zeros(1, np.int64),
                              offsets=np.array([0, min(len(rows), cap)], np.int64),
                              tuples=rows[:cap], truncated=np.array([total > cap]))
        ops = _empty_ops(1)
        return BatchResult(ops=ops, seq=np.full(1, -1, np.int64), sub=np.zeros(1, np.int32),
                           request_op=ops.op, query_ids=(qid,),
                           counts=np.array([[total]], np.int64),
                           listings={qid: listing} if listing is not None else {},
                           stats=BatchStats(positive=total, match_seconds=secs, tasks=n))

    # -- updates ----------------------------------------------------------------
    def apply(self, batch: UpdateBatch) -> BatchResult:
        return self.submit(batch).result()

    def submit(self, batch: UpdateBatch) -> PendingBatch:
        """Resolve and install ``batch`` now; match it in the background where the executor
        can (GPU). Results are exact whatever the order in which pending batches are read;
        a batch with vertex operations waits for the batches before it (vertex labels have
        one version)."""
        t0 = time.perf_counter()
        st = self._standing
        qids, specs, scale = st.qids, st.specs, st.scale
        if self._pipe and self._hold is None and len(batch):   # it keeps its own watermark
            ticket = self.executor.submit_batch(batch, self._plan_set(), scale)  # type: ignore[attr-defined]
            if ticket is not None:   # (None: a vertex operation, for the host path)
                return PendingBatch(self, batch, None, qids, specs, scale, None, ticket, 0,
                                    0, t0, time.perf_counter())
        vertex_ops = len(batch) > 0 and int(batch.op.max()) >= _INS_V
        if vertex_ops:   # vertex labels have one version: every batch before must finish
            self.drain()
        else:
            self._settle()
        self._pending = [p for p in self._pending if p.reading]
        first = min((p.first_tick for p in self._pending), default=self.graph.tick + 1)
        if self._hold is not None:
            first = min(first, self._hold)
        self.graph.set_watermark(first - 1)   # entries dead before that are unreadable
        # a batch too small to merge beside its tasks' set-up keeps the plain path
        prepare = (getattr(self.executor, "prepare", None) if len(batch) >= BESIDE_EDGES
                   else None)
        made: dict[str, Any] = {}

        def beside(ops: OpTable) -> None:
            """The tasks and the executor's set-up that reads no version, built while the
            batch's insertions are merged (``HostGraph.apply``)."""
            made["ei"] = ei = ops.applied_edges()
            if qids and len(ei):
                ps = self._plan_set()
                made["tasks"] = tasks = self._edge_tasks(ops, ei, ps)
                made["units"] = cast(Any, prepare)(self.graph, ps, tasks)

        ops = self.graph.apply(batch, beside) if prepare is not None else self.graph.apply(batch)
        self.executor.on_update(self.graph, ops)
        ei = made["ei"] if "ei" in made else ops.applied_edges()
        ticket, ntasks = None, 0
        if qids and len(ei):
            ps = self._plan_set()
            if "units" in made:
                tasks = made["tasks"]
                ticket = self.executor.submit(self.graph, ps, tasks, made["units"])  # type: ignore[call-arg]
            else:
                tasks = self._edge_tasks(ops, ei, ps)
                ticket = self.executor.submit(self.graph, ps, tasks)
            ntasks = len(tasks)
        pending = PendingBatch(self, batch, ops, qids, specs, scale, ei, ticket, ntasks,
                               first_tick=int(ops.tick[0]) if len(ops) else self.graph.tick + 1,
                               t0=t0, t1=time.perf_counter())
        self._pending.append(pending)
        return pending

    def hold_versions(self, tick: int | None) -> None:
        """Keep the graph readable at ``tick`` and later (None: no hold): entries deleted
        at ``tick`` or after are not reclaimed, so :meth:`rematch` can match past updates
        against their own ticks (a shard's new owner catching up)."""
        self._hold = tick

    def _readable(self, tick: int) -> None:
        wm = getattr(self.graph, "watermark", None)
        if wm is None:
            raise EngineError("this graph (device-owned) cannot read past ticks")
        if tick <= wm:
            raise EngineError(f"graph versions before tick {wm + 1} are reclaimed; tick "
                              f"{tick} cannot be read (hold them with hold_versions)")

    def rematch(self, past: BatchResult, query_ids: tuple[int, ...]) -> BatchResult:
        """Match the primitive updates of an earlier batch again, each against its own
        tick, for ``query_ids`` only (registered now, perhaps after that batch): the
        deltas those queries would have had. Needs the versions held since then."""
        for q in query_ids:
            if q not in self._queries:
                raise UnknownQueryError(f"no query with id {q}")
        ops = past.ops
        ei = ops.applied_edges()
        counts = np.zeros((len(ops), len(query_ids)), np.int64)
        specs = {q: self._queries[q].spec for q in query_ids}
        listings = {q: Listing.empty(s.query.n) for q, s in specs.items() if s.list_matches}
        if len(ei) and query_ids:
            self._readable(int(ops.tick[ei].min()))
            ps = self._plan_set()
            cols = np.array([self._standing.qids.index(q) for q in query_ids], np.int64)
            tasks = self._edge_tasks(ops, ei, ps, cols)
            out = self.executor.submit(self.graph, ps, tasks).wait()
            scale = self._standing.scale[:, cols]
            counts = result_columns(ops.raw, ops.status, ops.op, ei, out.counts, scale[0],
                                    scale[1])[0]
            listings = self._listings(ops, ei, query_ids, specs, out)
        return BatchResult(ops=ops, seq=past.seq, sub=past.sub, request_op=past.request_op,
                           query_ids=query_ids, counts=counts, listings=listings,
                           stats=BatchStats(edge_updates=len(ei)))

    def drain(self) -> None:
        """Finish the matching of every submitted batch (their results stay readable)."""
        self.executor.drain()

    def _settle(self) -> None:
        """Batches in the device pipeline change the graph until they finish: wait for
        them before reading the graph or changing the plans."""
        if getattr(self.executor, "batches_in_flight", 0):
            self.drain()

    def _finish(self, p: PendingBatch) -> BatchResult:
        if p.ops is None:   # the device pipeline resolved it and built its columns
            return self._finish_pipelined(p)
        out = cast(Ticket, p.ticket).wait() if p.ticket is not None else None
        ops, ei, qids = p.ops, p.ei, p.qids
        assert ei is not None
        listings = {q: Listing.empty(s.query.n) for q, s in p.specs.items() if s.list_matches}
        io = None
        flat = _NO_COUNTS
        if out is not None:
            io = out.io
            flat = out.counts
            if listings:
                listings = self._listings(ops, ei, qids, p.specs, out)
        t2 = time.perf_counter()
        raw = ops.raw
        counts, sub, tally = result_columns(raw, ops.status, ops.op, ei, flat, p.scale[0],
                                            p.scale[1])
        # a row a raw update (no vertex deletion expanded): raw is 0..n-1, and the batch's
        # own columns serve, as on the device pipeline (two gathers of 18k rows took
        # 0.1-0.2 ms of an Enron one-batch run)
        whole = len(raw) == len(p.batch)
        return BatchResult(ops=ops, seq=p.batch.seq if whole else p.batch.seq[raw], sub=sub,
                           request_op=p.batch.op if whole else p.batch.op[raw],
                           query_ids=qids, counts=counts,
                           listings=listings, stats=_stats(p, tally, t2, io))

    def _finish_pipelined(self, p: PendingBatch) -> BatchResult:
        """A device pipeline batch: edge updates only (one primitive update each, in raw
        order, so seq and request_op are the batch's own), no listings."""
        r = cast("BatchTicket", p.ticket).wait()
        p.ops, p.ei = r.ops, r.applied
        p.ntasks = len(p.ei) * len(p.qids)
        # positional, without the frozen setattr (gpu/_records.py)
        return _batch_result(r.ops, p.batch.seq, r.sub, p.batch.op, p.qids, r.counts, {},
                             _stats(p, r.tally, time.perf_counter()))

    def _query_pipelined(self, p: PendingBatch, j: int) -> BatchResult:
        """Query column ``j`` of a device pipeline batch whose other queries may still
        be matching (``BatchTicket.ready_set``)."""
        r = cast("BatchTicket", p.ticket).columns_for(j)
        stats = replace(_stats(p, r.tally, time.perf_counter(), ei=r.applied),
                        tasks=len(r.applied))   # (its own: one an applied edge update)
        return _batch_result(r.ops, p.batch.seq, r.sub, p.batch.op, (p.qids[j],), r.counts,
                             {}, stats)

    def _edge_tasks(self, ops: OpTable, ei: npt.NDArray[np.int64], ps: PlanSet,
                    cols: npt.NDArray[np.int64] | None = None) -> MatchTasks:
        """One task per (edge op, query); ``cols``: some queries' places in the plan set
        (None: every standing query)."""
        lo, hi, caps = ps.query_lo, ps.query_hi, self._standing.caps
        if cols is not None:
            lo, hi, caps = lo[cols], hi[cols], caps[cols]
        return edge_tasks(ops.a, ops.b, ops.label, ops.tick, ei, lo, hi, caps)

    def _listings(self, ops: OpTable, ei: npt.NDArray[np.int64], qids: tuple[int, ...],
                  specs: dict[int, QuerySpec], out: MatchOutput) -> dict[int, Listing]:
        res: dict[int, Listing] = {}
        nq = len(qids)
        for j, q in enumerate(qids):
            spec = specs[q]
            if not spec.list_matches:
                continue
            t = np.arange(len(ei)) * nq + j
            keep = out.counts[t] > 0
            t = t[keep]
            n_rows = out.listed[t]
            offsets = np.zeros(len(t) + 1, np.int64)
            np.cumsum(n_rows, out=offsets[1:])
            idx = np.concatenate([np.arange(out.row_off[x], out.row_off[x] + out.listed[x])
                                  for x in t]) if len(t) else np.zeros(0, np.int64)
            tuples = self.graph.vext[out.rows[idx, :spec.query.n]]
            res[q] = Listing(op_index=ei[keep], offsets=offsets, tuples=tuples,
                             truncated=out.counts[t] > n_rows)
        return res


class PendingBatch:
    """A submitted batch: ``result()`` waits for its matching and builds the result once."""

    def __init__(self, engine: Engine, batch: UpdateBatch, ops: OpTable | None,
                 qids: tuple[int, ...], specs: dict[int, QuerySpec],
                 scale: npt.NDArray[np.int64], ei: npt.NDArray[np.int64] | None,
                 ticket: Ticket | BatchTicket | None, ntasks: int,
                 first_tick: int, t0: float, t1: float) -> None:
        self._engine = engine
        self.batch, self.ops, self.qids, self.specs, self.ei = batch, ops, qids, specs, ei
        self.scale = scale
        self.ticket, self.ntasks, self.first_tick, self.t0, self.t1 = (ticket, ntasks,
                                                                      first_tick, t0, t1)
        self._result: BatchResult | None = None

    @property
    def reading(self) -> bool:
        """Its matching may still read graph versions (holds the watermark back)."""
        return self.ticket is not None and not self.ticket.finished

    @property
    def ready(self) -> bool:
        """``result()`` would not wait for the device (its count kernel is done)."""
        return self.ticket is None or self.ticket.ready

    def wait_ready(self) -> None:
        """Block until :attr:`ready`; any thread may wait here while another submits
        (nothing of the engine is touched)."""
        if self.ticket is not None:
            self.ticket.sync()

    def result(self) -> BatchResult:
        if self._result is None:
            self._result = self._engine._finish(self)
        return self._result

    def ready_queries(self) -> tuple[int, ...]:
        """The standing queries (at submit) whose :meth:`query_result` would not wait: their
        deltas of this batch are final (on the device pipeline, those of every pipelined
        batch before it too), although other queries may still be matching: the pipeline
        delivers each query once its own work is done; elsewhere every query is ready with
        the batch (:attr:`ready`). Readers that publish in seq order take a query's batches
        in order. One poll for all the queries."""
        ready_set = getattr(self.ticket, "ready_set", None)
        if self._result is not None or ready_set is None or self.ops is not None:
            return self.qids if self.ready else ()
        return tuple(q for q, ok in zip(self.qids, ready_set().tolist(), strict=True) if ok)

    def query_ready(self, query_id: int) -> bool:
        """:meth:`ready_queries` for one query. Raises UnknownQueryError for a query that
        was not standing at submit."""
        self._column(query_id)
        return query_id in self.ready_queries()

    def query_result(self, query_id: int) -> BatchResult:
        """This batch's result for one standing query (``query_ids`` is that query
        alone; the stats' positive, negative and tasks are its own): at once where
        :meth:`query_ready`, else once :meth:`result` has come."""
        j = self._column(query_id)
        if self._result is None and self.ops is None and query_id in self.ready_queries():
            return self._engine._query_pipelined(self, j)
        return self.result().select((query_id,))

    def _column(self, query_id: int) -> int:
        try:
            return self.qids.index(query_id)
        except ValueError:
            raise UnknownQueryError(f"query {query_id} was not standing when this batch "
                                    f"was submitted (standing: {list(self.qids)})") from None


_batch_result = positional(BatchResult)
_batch_stats = positional(BatchStats)


def _stats(p: PendingBatch, tally: npt.NDArray[np.int64] | list[int], t2: float,
           io: IoStats | None = None, ei: npt.NDArray[np.int64] | None = None) -> BatchStats:
    """A finished batch's stats: its tally (applied, ignored, rejected, created, destroyed;
    the device pipeline's as ints already), times from submit (t0, t1) to ``t2``, and
    out-of-core traffic. Positional: a small batch's keywords cost a microsecond. ``ei``:
    the applied edge updates where the batch has not been read (one query's result)."""
    ei = p.ei if ei is None else ei
    assert ei is not None
    a, i, r, pos, neg = tally if isinstance(tally, list) else tally.tolist()
    hb, hits, misses = (0, 0, 0) if io is None else (io.host_bytes, io.cache_hits,
                                                     io.cache_misses)
    return _batch_stats(len(p.batch), len(ei), a, i, r, pos, neg, p.t1 - p.t0, t2 - p.t1,
                        p.ntasks, hb, hits, misses)


def _empty_ops(n: int = 0) -> OpTable:
    z = lambda dt: np.zeros(n, dt)  # noqa: E731
    return OpTable(raw=z(np.int32), op=z(np.int8), a=z(np.int32), b=z(np.int32), src=z(np.int64),
                   dst=z(np.int64), label=z(np.int32), tick=z(np.int64), status=z(np.int8),
                   reason=z(np.int8))


def warm_up(backend: str = "cpu", options: ExecutorOptions | None = None) -> None:
    """Compile (or load from the on-disk cache) every kernel once, so no timing includes it
    (on the GPU also the out-of-core path: estimator and cache packer are CPU kernels).
    ``options``: the engine's, so that its warm-up engines share its match lanes (the
    GPU's are the process's, one set per ``front_sms``)."""
    base = options or ExecutorOptions()
    budgets = (0, 1) if backend == "gpu" else (0,)
    tri = Query.build([(0, None), (1, None), (2, None)], [(0, 1, None), (1, 2, None),
                                                           (0, 2, None)])
    for budget in budgets:
        eng = Engine(backend, options=replace(base, graph_budget_bytes=budget,
                                              device_graph=False))
        eng.load_graph([], [], [1, 2], [2, 3], [0, 0])
        eng.register(QuerySpec(tri, CountMode.SUBGRAPHS, list_matches=True), initial=True)
        eng.apply(UpdateBatch.build([0, 1, 2, 3], [UpdateOp.INSERT_EDGE, UpdateOp.DELETE_EDGE,
                                                   UpdateOp.INSERT_VERTEX,
                                                   UpdateOp.DELETE_VERTEX],
                                    [1, 1, 9, 2], [3, 3, -1, -1], [0, 0, 1, 0]))
        eng.drain()
        eng.graph.compact()   # garbage collection: its first run would stall a live stream
        eng.apply(UpdateBatch.build([4], [UpdateOp.INSERT_EDGE], [1], [3], [0]))
        if not eng.graph.copy_on_write:   # the updater's two threads run in place only:
            # a batch with enough insertions for them, on pairs of 128 ids
            k = np.arange(HALVES_INSERTS)
            eng.apply(UpdateBatch.build(5 + k, np.zeros(len(k)), 1 + k % 128,
                                        2 + k % 128 + k // 128, np.zeros(len(k))))
    if backend == "gpu":   # the device pipeline and its garbage collection in stream order
        eng = Engine(backend, options=replace(base, graph_budget_bytes=0, device_graph=True))
        eng.load_graph([], [], [1, 2], [2, 3], [0, 0])
        eng.register(QuerySpec(tri, CountMode.SUBGRAPHS))
        eng.apply(UpdateBatch.build([0], [UpdateOp.INSERT_EDGE], [1], [3], [0]))
        eng.executor.graph.compact_in_stream().synchronize()  # type: ignore[attr-defined]
        eng.apply(UpdateBatch.build([1], [UpdateOp.DELETE_EDGE], [1], [3], [0]))
