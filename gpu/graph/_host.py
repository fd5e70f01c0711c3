"""The host multi-version graph (DCSM section 4.4 on the CPU).

Layout, all numpy:

* per internal vertex: ``vlabel``, ``vext`` (external id), ``valive``, ``vdeg`` (alive
  degree) and the current neighbour-array version ``seg_off/seg_len/seg_cap`` in the pool;
* the entry pool: ``key`` = (neighbour label << 32 | neighbour id), ``elab``, and the
  lifetime ``(ct, dt]`` in ticks. Each version is sorted by (key, ct).

A batch writes deletions in place (readers of older ticks still see the edge, since
their tick is <= dt) and gives each vertex that receives an insertion a new version
(copy-on-write, once per batch): readers in flight (GPU kernels) index the old one. The
old version becomes garbage; its space is reclaimed by :meth:`HostGraph.compact`, which
the engine runs only when no matching is in flight, and entries with ``dt <= watermark``
are dropped whenever a version is copied.

With ``copy_on_write`` off (an executor that never reads during an update: the CPU)
insertions go into the current version, which moves only when full, after its dead
entries are purged in place: no copy per batch and far less garbage. A batch's
insertions are first collected (``_pending``) and merged into each touched version
once (``_merge``), and loaded versions get 1/4 headroom, so a hub that receives k
insertions costs O(degree + k), not k shifts of its version. In place the graph also
keeps per-vertex label offsets (``loff``, see ``_labels``) beside these arrays.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor, wait
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from .._types import INF_TICK, WILDCARD, UpdateBatch, UpdateOp
from . import _kernels as K
from ._edgeset import EdgeSet
from ._idmap import IdMap
from ._idmap import intern_bulk as _intern_bulk
from ._labels import LABEL_COLUMNS, recount_all
from ._merge import merge_pending, select_and_merge
from ._pending import BASE, COUNT, DEFERRED, Pending
from ._split import Records, finish_counts, run_half

__all__ = ["HostGraph", "LoadStats", "OpTable", "ranges"]

_NO_LABELS = np.zeros(0, np.bool_)
_INSERT_VERTEX = int(UpdateOp.INSERT_VERTEX)
#: a batch's insertions (with its logged deletions) from which its merge and the caller's
#: ``beside`` run on two threads (a hand-over costs about 40 us; a b=64 batch merges in less)
BESIDE_EDGES = 2048
#: a batch (in place) with this many insertions or more has its edge updates resolved on
#: two threads, split by pair (``_split``): Enron's 18,383 insertions 3.0-3.7 -> 2.2-2.6
#: ms; its 18,383 deletions, cheaper a piece in the serial loop (no pending entry to
#: write), 1.4-2.3 -> 1.6-2.5, so a batch of mostly deletions stays serial
HALVES_INSERTS = 4096
_CORES = os.cpu_count() or 1


@functools.cache
def _side_pool() -> ThreadPoolExecutor:
    """The threads that run a batch's merge or its caller's set-up beside the other (one
    process-wide pool: the merge is compiled code that releases the GIL; graphs of several
    engines in one process use it at once)."""
    return ThreadPoolExecutor(os.cpu_count() or 1, thread_name_prefix="csm-merge")


@dataclass(frozen=True, slots=True)
class LoadStats:
    vertices: int
    edges: int
    self_loops: int
    duplicates: int


@dataclass(frozen=True, slots=True)
class OpTable:
    """Primitive updates of one batch in tick order (a vertex deletion expands to several)."""

    raw: npt.NDArray[np.int32]      # index into the raw batch
    op: npt.NDArray[np.int8]        # primitive op (UpdateOp)
    a: npt.NDArray[np.int32]        # internal ids (-1 where none)
    b: npt.NDArray[np.int32]
    src: npt.NDArray[np.int64]      # external ids
    dst: npt.NDArray[np.int64]
    label: npt.NDArray[np.int32]
    tick: npt.NDArray[np.int64]
    status: npt.NDArray[np.int8]
    reason: npt.NDArray[np.int8]

    def __len__(self) -> int:
        return len(self.raw)

    def applied_edges(self) -> npt.NDArray[np.int64]:
        """Indices of the applied edge updates (ops 0 and 1): the ones that are matched."""
        return K.applied_edges(np.ascontiguousarray(self.op, np.int8),
                               np.ascontiguousarray(self.status, np.int8))


class HostGraph:
    """Owns the arrays; numba kernels in ``_kernels`` mutate them in place."""

    def __init__(self, vertex_capacity: int = 1024, pool_capacity: int = 4096) -> None:
        self.ids = IdMap(vertex_capacity)
        self.meta = np.zeros(K.META_SIZE, np.int64)
        #: bumped whenever entries move or arrays are reallocated (device mirrors re-copy)
        self.layout = 0
        #: pool entries freed by compaction so far (garbage collection, for metrics)
        self.reclaimed = 0
        #: called before that happens, so readers in flight can finish first
        self.before_relayout: Callable[[], None] | None = None
        #: allocates the entry pool's zeroed arrays (the GPU executor's out-of-core mode
        #: swaps in pinned host memory its kernels can read)
        self.pool_alloc: Callable[[int, np.dtype], npt.NDArray] = np.zeros  # type: ignore[type-arg]
        #: the vertex order the pool was last packed in, and where that packing ended
        self._order = np.zeros(0, np.int32)
        self._packed_end = 0
        #: in place: the labels the standing queries read (a bool per label; None: all),
        #: and the pending edges kept across batches, whose ends' labels are not all read
        self._rel: npt.NDArray[np.bool_] | None = None
        self._store: Pending | None = None
        #: a store made at load whose memory a batch's new store takes while it fits
        #: (``_new_store``), when the graph's store does not use it
        self._spare: Pending | None = None
        #: the alive edges' pairs and labels (an insertion's or deletion's existence check)
        self.edges = EdgeSet()
        #: deletions of edges no standing query reads, still in their versions: ends and
        #: ticks, applied when the deferred edges are merged
        self._dlog = _log_arrays(0)
        self._dcount = np.zeros(1, np.int64)
        #: in place, the batch's deletions of edges in their versions, ended after its
        #: loop (``_end_logged``)
        self._llog = _log_arrays(0)
        self._lcount = np.zeros(1, np.int64)
        #: a batch's merge on the side thread (``apply``'s ``beside``) while it runs
        self._finishing: Future[None] | None = None
        #: the two threads' records of a batch resolved in halves (``_apply_halves``)
        self._records: tuple[Records, Records] | None = None
        self._alloc_vertices(vertex_capacity)
        self._alloc_pool(pool_capacity)

    # -- storage -------------------------------------------------------------
    def _alloc_vertices(self, cap: int) -> None:
        self.vlabel = np.zeros(cap, np.int32)
        self.vext = np.zeros(cap, np.int64)
        self.valive = np.zeros(cap, np.uint8)
        self.vdeg = np.zeros(cap, np.int32)
        self.seg_off = np.zeros(cap, np.int64)
        self.seg_len = np.zeros(cap, np.int32)
        self.seg_cap = np.zeros(cap, np.int32)
        self.seg_batch = np.full(cap, -1, np.int64)
        #: label offsets (``_labels``): no columns until ``_fit_labels`` gives them
        self.loff = np.zeros((cap, 0), np.int32)

    _POOL = ("key", "elab", "ct", "dt")

    def _alloc_pool(self, cap: int) -> None:
        self.key = self.pool_alloc(cap, np.dtype(np.int64))
        self.elab = self.pool_alloc(cap, np.dtype(np.int32))
        self.ct = self.pool_alloc(cap, np.dtype(np.int64))
        self.dt = self.pool_alloc(cap, np.dtype(np.int64))

    def use_pool_allocator(self, alloc: Callable[[int, np.dtype], npt.NDArray]) -> None:  # type: ignore[type-arg]
        """Move the entry pool into arrays from ``alloc`` (and allocate from it from now on)."""
        self._relayout()
        self.pool_alloc = alloc
        for name in self._POOL:
            old = getattr(self, name)
            new = alloc(len(old), old.dtype)
            new[:] = old
            setattr(self, name, new)

    def _relayout(self) -> None:
        if self.before_relayout is not None:
            self.before_relayout()
        self.layout += 1

    def _grow(self, names: tuple[str, ...], cap: int) -> None:
        self._relayout()
        for name in names:
            old = getattr(self, name)
            if name in self._POOL:   # the allocator takes a length (mapped_zeros)
                new = self.pool_alloc(cap, old.dtype)
            else:
                new = np.zeros((cap, *old.shape[1:]), old.dtype)
            new[: len(old)] = old
            setattr(self, name, new)

    def reserve_vertices(self, extra: int) -> None:
        need = int(self.meta[K.NV]) + extra
        if need > len(self.vlabel):
            self._grow(("vlabel", "vext", "valive", "vdeg", "seg_off", "seg_len", "seg_cap",
                        "seg_batch", "loff"), max(need, 2 * len(self.vlabel)))
        self.ids.count = int(self.meta[K.IDCOUNT])
        self.ids.reserve(extra)

    def _make_room(self) -> None:
        """Pool full: reclaim garbage, and grow the pool to three times what is left if
        that frees under half (each collection stalls a stream: make them rare)."""
        self.compact()
        if self.meta[K.POOL_USED] * 2 > len(self.key):
            self._grow(self._POOL, 3 * int(self.meta[K.POOL_USED]))

    def compact(self) -> None:
        self._relayout()
        before = self.pool_used
        self._order = K.compact(self.meta, self.num_vertices, self._order, self._packed_end,
                                self.seg_off, self.seg_len, self.seg_cap, self.key, self.elab,
                                self.ct, self.dt)
        self._packed_end = self.pool_used
        self.reclaimed += before - self.pool_used
        if self.loff.shape[1]:   # dead entries dropped: every row moves
            recount_all(self.num_vertices, self.seg_off, self.seg_len, self.key, self.loff)

    @property
    def copy_on_write(self) -> bool:
        return not self.meta[K.IN_PLACE]

    @copy_on_write.setter
    def copy_on_write(self, on: bool) -> None:
        self.merge_deferred()
        self.meta[K.IN_PLACE] = 0 if on else 1
        self._fit_labels()

    # -- deferred edges ----------------------------------------------------------
    #: deferred edges kept at most (or a quarter of the graph's edges, if more) before
    #: they are merged together
    DEFER_LIMIT = 1 << 16

    def set_relevant_labels(self, labels: frozenset[int] | None) -> None:
        """The vertex labels the standing queries read (None: any, e.g. a wildcard).
        In place, an inserted edge whose ends' labels are not both among them stays
        pending after its batch (no matching of those queries reads it; statuses, ticks
        and degrees are exact as for any edge) until something reads the whole graph, or
        the labels change: every deferred edge is merged here first."""
        self.merge_deferred()
        top = max(labels, default=-1) + 1 if labels is not None else 0
        if labels is None or min(labels, default=0) < 0 or top > (1 << 20):
            self._rel = None
            return
        rel = np.zeros(top, np.bool_)
        rel[list(labels)] = True
        self._rel = rel

    def merge_deferred(self) -> None:
        """Put every deferred edge into its version, and end the entries of the logged
        deletions (before a whole-graph read)."""
        self._settle_side()
        self._apply_log()
        if self._store is not None:
            self._merge(self._store, keep=False)
            self._store = None

    def _apply_log(self) -> None:
        """End the entries of the deferred edges' logged deletions."""
        self._end(self._dlog, self._dcount)

    def _settle_side(self) -> None:
        """Before an update: a merge left running on the side thread by an interrupted
        ``apply`` finished, and deletions logged by an interrupted batch ended."""
        if self._finishing is not None:
            wait([self._finishing])
            self._finishing = None
        self._end_logged()

    def _end_logged(self) -> None:
        """End the entries of the deletions the updater logged in this batch (in place)."""
        self._end(self._llog, self._lcount)

    def _end(self, log: tuple[npt.NDArray[np.generic], ...],
             count: npt.NDArray[np.int64]) -> None:
        n = int(count[0])
        if n:
            K.apply_deletion_log(*log, n, self.vlabel, self.seg_off, self.seg_len, self.loff,
                                 self.key, self.dt)
            count[0] = 0

    def _ended_room(self, deletions: int) -> tuple[npt.NDArray[np.generic], ...]:
        """The in-batch deletion log with room for ``deletions`` (in place only)."""
        if self.copy_on_write:
            return (*(x[:0] for x in self._llog), self._lcount)
        if len(self._llog[2]) < deletions:
            self._llog = (np.empty(deletions, np.int32), np.empty(deletions, np.int32),
                          np.empty(deletions, np.int64))
        return (*self._llog, self._lcount)

    @property
    def _deferring(self) -> bool:
        """In place with the standing queries' labels known: edges may be deferred."""
        return not self.copy_on_write and self._rel is not None

    def _too_many(self, n: int) -> bool:
        """More deferred edges or logged deletions than kept before merging them."""
        return n > max(self.DEFER_LIMIT, self.num_edges // 4)

    def _log_room(self, deletions: int) -> tuple[npt.NDArray[np.generic], ...]:
        """The deletion log with room for a batch's ``deletions`` (empty when nothing is
        deferred: the updater then ends every deletion in place)."""
        if not self._deferring:
            return (_NO_LABELS, *(x[:0] for x in self._dlog), self._dcount)
        n = int(self._dcount[0])
        if len(self._dlog[2]) < n + deletions:
            cap = 2 * (n + deletions)
            self._dlog = tuple(np.concatenate([x[:n], np.zeros(cap - n, x.dtype)])
                               for x in self._dlog)  # type: ignore[assignment]
        return (self._rel, *self._dlog, self._dcount)

    def _pending_for(self, inserts: int) -> Pending:
        """Where a batch's insertions wait: a store of their own, or (deferring) the
        graph's store, with room made (its deferred edges carried over, or all merged
        once there are too many)."""
        if self.copy_on_write:
            return Pending(0)
        if self._rel is None:
            return self._new_store(inserts)
        if self._too_many(int(self._dcount[0])):
            self.merge_deferred()   # the deletion log too has a bound
        st = self._store
        if st is None:
            return self._new_store(inserts)   # the next batches carry it over, doubling
        self._finish_merge(st)   # one an exception stopped: before anything is carried
        if st.room >= inserts:
            return st
        if self._too_many(st.deferred):
            self.merge_deferred()
            return self._new_store(inserts)
        return st.carried(inserts)

    def _new_store(self, inserts: int) -> Pending:
        """An empty store for ``inserts`` edges, in the spare's memory where it fits (the
        graph's store, if any, holds nothing any more or is being replaced)."""
        sp = self._spare
        if sp is None or not sp.fits(inserts) or (
                self._store is not None and self._store.backing is sp):
            return Pending(inserts)
        return Pending(inserts, within=sp)

    def _fit_labels(self) -> None:
        """Label offsets with one column per vertex label, recounted, where they can be
        kept (in place, every label in [0, LABEL_COLUMNS)); else none."""
        n = self.num_vertices
        labs = self.vlabel[:n]
        top = int(labs.max()) + 1 if n else 1
        keep = not self.copy_on_write and (n == 0 or int(labs.min()) >= 0) and top <= LABEL_COLUMNS
        self.loff = np.zeros((len(self.vlabel), top + 1 if keep else 0), np.int32)
        if keep:
            recount_all(n, self.seg_off, self.seg_len, self.key, self.loff)

    def _widen_labels(self, batch: UpdateBatch) -> None:
        """Columns for the labels a batch's vertex insertions bring (a new label has no
        entry yet: its columns start at each version's end), or none past LABEL_COLUMNS."""
        labs = batch.label[(batch.op == UpdateOp.INSERT_VERTEX) & (batch.label != WILDCARD)]
        cols = self.loff.shape[1]
        if not len(labs) or (int(labs.min()) >= 0 and int(labs.max()) < cols - 1):
            return
        top = int(labs.max()) + 1
        if int(labs.min()) < 0 or top > LABEL_COLUMNS:
            self.loff = np.zeros((len(self.vlabel), 0), np.int32)
            return
        new = np.empty((len(self.vlabel), top + 1), np.int32)
        new[:, :cols] = self.loff
        new[:, cols:] = self.seg_len[:, None]
        self.loff = new

    # -- facts ----------------------------------------------------------------
    @property
    def num_vertices(self) -> int:
        """Internal ids handed out (including retired ones)."""
        return int(self.meta[K.NV])

    @property
    def num_edges(self) -> int:
        return int(self.meta[K.NEDGES])

    @property
    def tick(self) -> int:
        return int(self.meta[K.TICK])

    @property
    def pool_used(self) -> int:
        return int(self.meta[K.POOL_USED])

    @property
    def garbage(self) -> int:
        return int(self.meta[K.GARBAGE])

    def max_degree_bound(self) -> int:
        """Longest version (alive + not yet reclaimed entries): sizes the search buffers."""
        n = self.num_vertices
        return int(self.seg_len[:n].max()) if n else 0

    @property
    def watermark(self) -> int:
        """Entries deleted at this tick or before may be reclaimed (unreadable)."""
        return int(self.meta[K.WATERMARK])

    def set_watermark(self, tick: int) -> None:
        """Every update with tick <= ``tick`` has finished matching."""
        self.meta[K.WATERMARK] = tick

    # -- updates --------------------------------------------------------------
    def apply(self, batch: UpdateBatch,
              beside: Callable[[OpTable], None] | None = None) -> OpTable:
        """Resolve and apply ``batch``; returns its primitive updates. ``beside(ops)``, if
        given, runs once they are resolved, while the batch's insertions are merged into
        their versions and its deletions' entries ended on another thread (a large batch
        in place): it must not read the versions (offsets, lengths, entries) or change the
        graph. It may read the vertex labels and degrees."""
        self._settle_side()
        n = len(batch)
        inserts, deletions, top = K.op_counts(batch.op)
        if self.loff.shape[1] and top >= _INSERT_VERTEX:
            self._widen_labels(batch)
        self.reserve_vertices(2)   # more when the kernel asks (NEED_VERTS): an edge stream
        # over known vertices reserves nothing and never looks its ids up twice
        self.meta[K.BATCH] += 1
        cap = n + 16
        out = _OutBuffers(cap)
        self.edges.reserve(inserts)
        log = self._log_room(deletions)
        ended = self._ended_room(deletions)
        pend = self._pending_for(inserts)
        if self._deferring:
            self._store = pend   # deferred edges stay the graph's whatever happens
        i, n_out, stuck = 0, 0, -1
        try:
            if inserts >= HALVES_INSERTS and _CORES > 1 and not self.copy_on_write:
                i, n_out = self._apply_halves(batch, out, pend, log, ended)
            while True:
                i, n_out, code = K.apply_batch(
                    i, n_out, batch.op, batch.src, batch.dst, batch.label,
                    self.ids.keys, self.ids.vals, self.ids.used, self.ids.direct, self.meta,
                    self.vlabel, self.vext, self.valive, self.vdeg,
                    self.seg_off, self.seg_len, self.seg_cap, self.seg_batch, self.loff,
                    self.key, self.elab, self.ct, self.dt, *out.arrays(), *pend.arrays(),
                    *self.edges.arrays(), *log, *ended)
                if code == K.DONE:
                    break
                if code == K.NEED_MERGE:   # a vertex deletion: every edge in its version
                    self._end_logged()
                    self._apply_log()
                    self._merge(pend, keep=False)
                elif code == K.NEED_VERTS:
                    self.reserve_vertices(64)   # the arrays double as they grow
                elif code == K.NEED_POOL:
                    stuck = self._pool_full(i, stuck)
                else:
                    out.grow(n_out + int(self.vdeg.max()) + 16)
        except BaseException:   # what the updater applied is ended, even if making room raised
            self._end_logged()
            raise
        keep = self._deferring
        self.ids.count = int(self.meta[K.IDCOUNT])
        ops = out.table(n_out)

        def finish() -> None:
            """The batch's logged deletions ended and its insertions merged."""
            self._end_logged()
            self._merge(pend, keep=keep)

        self._side_by_side(finish, beside, ops, int(pend.pst[COUNT] - pend.pst[BASE]))
        self._store = pend if keep and pend.deferred else None
        return ops

    def _apply_halves(self, batch: UpdateBatch, out: _OutBuffers, pend: Pending,
                      log: tuple[npt.NDArray[np.generic], ...],
                      ended: tuple[npt.NDArray[np.generic], ...]) -> tuple[int, int]:
        """The batch's edge updates up to the first the serial loop must do, resolved on
        two threads by pair (``_split``); returns where ``apply_batch`` goes on and the
        next output row."""
        n = len(batch)
        if self._records is None or not self._records[0].fits(n):
            self._records = (Records(n), Records(n))
        r0, r1 = self._records
        e_keys, e_vals, e_st = self.edges.arrays()
        rel, d_a, d_b, d_t, dlen = log
        l_a, l_b, l_t, llen = ended
        sync = np.zeros(6, np.int64)
        common = (0, int(pend.pst[COUNT]), batch.op, batch.src, batch.dst, batch.label,
                  self.ids.keys, self.ids.vals, self.ids.used, self.ids.direct, self.vlabel,
                  rel, len(d_t) > 0, e_keys, e_vals, pend.h_key, pend.h_val, pend.owner,
                  pend.key, pend.elab, pend.ct, pend.dt, pend.mrg, self.vdeg, *out.arrays(),
                  int(self.meta[K.TICK]), int(dlen[0]), d_a, d_b, d_t, int(llen[0]), l_a, l_b,
                  l_t, sync, *r0.arrays(), *r1.arrays())
        other = _side_pool().submit(run_half, 1, *common)
        try:
            stop = run_half(0, *common)
        finally:   # both halves are written before anything else reads the graph
            wait([other])
        other.result()
        finish_counts(r0, r1, sync, self.meta, K.TICK, K.NEDGES, e_st, pend.pst, COUNT,
                      pend.mrg, dlen, llen)
        return stop, stop

    def _side_by_side(self, finish: Callable[[], None],
                      beside: Callable[[OpTable], None] | None, ops: OpTable,
                      inserted: int) -> None:
        """``finish()`` (the batch's merge and ended deletions) and ``beside(ops)``: one
        after the other for a small batch, else on two threads. Many insertions merge
        here, where the updater left the pending entries in cache (q0: 0.1-0.3 ms less
        than on the other core), and the set-up goes aside; mostly deletions go aside
        themselves, the shorter part."""
        if beside is not None and inserted >= BESIDE_EDGES:
            aside = _side_pool().submit(beside, ops)
            try:
                finish()
            finally:
                wait([aside])
            aside.result()
        elif beside is not None and inserted + int(self._lcount[0]) >= BESIDE_EDGES:
            self._finishing = _side_pool().submit(finish)
            try:
                beside(ops)
            finally:
                self._finishing.result()
                self._finishing = None
        else:
            finish()
            if beside is not None:
                beside(ops)

    def _merge(self, pend: Pending, keep: bool) -> None:
        """Put the pending entries of an in-place batch into their versions: ``keep``,
        those whose ends' labels are both read (the rest stay deferred); else every
        unmerged one, deferred ones included."""
        self._finish_merge(pend)   # one an exception stopped
        pst = pend.pst
        lo, hi = (int(pst[BASE]) if keep else 0), int(pst[COUNT])
        rel = self._rel if keep and self._rel is not None else _NO_LABELS
        idx, kept, r, code = select_and_merge(
            lo, hi, self.vlabel, rel, keep, self.num_vertices, pend.owner, pend.key,
            pend.elab, pend.ct, pend.dt, pend.mrg, self.meta, self.seg_off, self.seg_len,
            self.seg_cap, self.seg_batch, self.loff, self.key, self.elab, self.ct, self.dt)
        pst[DEFERRED] = pst[DEFERRED] + kept if keep else 0
        pst[BASE] = hi
        if code != K.DONE:   # the pool is full: resumed where it stopped, after making room
            pend.inflight = (idx, int(r))
            self._finish_merge(pend)

    def _finish_merge(self, pend: Pending) -> None:
        """Merge the selected entries (flagged merged already), from where an exception
        in making pool room stopped an earlier merge: never lost, never merged twice."""
        if pend.inflight is None:
            return
        idx, r = pend.inflight
        stuck = -1
        while True:
            r, code = merge_pending(r, idx, pend.owner, pend.key, pend.elab, pend.ct, pend.dt,
                                    self.meta, self.seg_off, self.seg_len, self.seg_cap,
                                    self.seg_batch, self.loff, self.key, self.elab, self.ct,
                                    self.dt)
            if code == K.DONE:
                break
            pend.inflight = (idx, r)
            stuck = self._pool_full(r, stuck)
        pend.inflight = None

    def _pool_full(self, at: int, stuck: int) -> int:
        """Room in the pool for the work stopped at ``at``: collect, or grow when the last
        collection left it stuck at the same place (one huge version)."""
        if at == stuck:
            self._grow(self._POOL, 2 * len(self.key))
        else:
            self._make_room()
        return at

    def load(self, vertex_ids: npt.NDArray[np.int64], vertex_labels: npt.NDArray[np.int32],
             src: npt.NDArray[np.int64], dst: npt.NDArray[np.int64],
             label: npt.NDArray[np.int32]) -> LoadStats:
        """Bulk-build an empty graph as CSR; its edges have lifetime (0, inf].

        Vertices get internal ids in order of first appearance (declared ones first);
        self-loops are rejected and repeated edges ignored, as in :meth:`apply`.
        """
        if self.num_vertices or self.tick:
            raise RuntimeError("bulk load needs an empty graph")
        src = np.asarray(src, np.int64)
        dst = np.asarray(dst, np.int64)
        label = np.asarray(label, np.int32)
        ends = np.empty(2 * len(src), np.int64)
        ends[0::2], ends[1::2] = src, dst
        allids = np.concatenate([np.asarray(vertex_ids, np.int64), ends])
        uniq, first = np.unique(allids, return_index=True)
        order = np.argsort(first, kind="stable")
        ext = uniq[order]                      # internal id -> external id
        rank = np.empty(len(uniq), np.int64)
        rank[order] = np.arange(len(uniq))
        nv = len(ext)
        self.reserve_vertices(nv + max(1024, nv // 4))   # the first batches need no growth
        labels = np.zeros(nv, np.int32)
        if len(vertex_ids):
            labels[rank[np.searchsorted(uniq, vertex_ids)]] = vertex_labels
        self.vlabel[:nv], self.vext[:nv], self.valive[:nv] = labels, ext, 1
        _intern_bulk(self.ids.keys, self.ids.vals, self.ids.used, ext)
        self.meta[K.NV] = nv
        self.meta[K.IDCOUNT] = nv
        self.ids.count = nv
        self.ids.index_direct()
        a = rank[np.searchsorted(uniq, src)]
        b = rank[np.searchsorted(uniq, dst)]
        loops = a == b
        lo, hi = np.minimum(a, b)[~loops], np.maximum(a, b)[~loops]
        el = label[~loops]
        _, keep = np.unique((lo << 32) | hi, return_index=True)
        keep.sort()
        lo, hi, el = lo[keep], hi[keep], el[keep]
        owner = np.concatenate([lo, hi])
        nbr = np.concatenate([hi, lo])
        key = (self.vlabel[nbr].astype(np.int64) << 32) | nbr
        perm = np.lexsort((key, owner))
        deg = np.bincount(owner, minlength=nv).astype(np.int32)
        # in place, versions get headroom: the first batches insert without moving them
        cap = deg + (deg >> 2) + 2 if not self.copy_on_write else deg
        off = np.concatenate(([0], np.cumsum(cap, dtype=np.int64)[:-1]))
        m = int(cap.sum())
        if m > len(self.key):
            self._alloc_pool(max(3 * m, 4096))   # room for garbage: see _make_room
        self._relayout()
        pos = ranges(off, deg.astype(np.int64))
        self.key[pos] = key[perm]
        self.elab[pos] = np.concatenate([el, el])[perm]
        self.ct[pos] = 0
        self.dt[pos] = INF_TICK
        self.vdeg[:nv] = deg
        self.seg_len[:nv] = deg
        self.seg_cap[:nv] = cap
        self.seg_off[:nv] = off
        self.meta[K.POOL_USED] = m
        self._order, self._packed_end = np.arange(nv, dtype=np.int32), m
        self.meta[K.NEDGES] = len(lo)
        self.edges = EdgeSet.of((lo << 32) | hi, el)
        self._fit_labels()
        if not self.copy_on_write:   # a batch of up to a quarter of the graph's edges (at
            # most 2^18, some 26 MB) puts its insertions in memory already in place, and
            # its deletions in logs already in place (growing the deferred edges' log, a
            # new zeroed one, was 0.1 ms of an Enron one-batch deletion run's 3.5)
            k = min(max(len(lo) // 4, 1 << 12), 1 << 18)
            self._spare = Pending(k, touch=True)
            self._dlog = _log_arrays(k)
            self._llog = _log_arrays(k)
        return LoadStats(vertices=nv, edges=len(lo), self_loops=int(loops.sum()),
                         duplicates=int((~loops).sum()) - len(lo))

    # -- snapshots -------------------------------------------------------------------
    _VERTEX = ("vlabel", "vext", "valive", "vdeg", "seg_off", "seg_len", "seg_cap",
               "seg_batch")

    def dump(self) -> dict[str, npt.NDArray[np.generic]]:
        """The graph's exact state as arrays (views: copy or write them before the next
        update). :meth:`restore` of it gives back the same graph, ticks and ids included,
        so matching after a restart is the matching of a graph never stopped. Deferred
        edges are merged first (versions may move, the pool may grow)."""
        self.merge_deferred()
        n, m = self.num_vertices, self.pool_used
        out: dict[str, npt.NDArray[np.generic]] = {"meta": self.meta, "order": self._order,
                                                   "packed_end": np.int64(self._packed_end)}
        out.update({f"v_{k}": getattr(self, k)[:n] for k in self._VERTEX})
        out.update({f"p_{k}": getattr(self, k)[:m] for k in self._POOL})
        out.update(id_keys=self.ids.keys, id_vals=self.ids.vals, id_used=self.ids.used,
                   id_count=np.int64(self.ids.count))
        return out

    def restore(self, a: dict[str, npt.NDArray[np.generic]]) -> None:
        """Replace this (empty) graph with a :meth:`dump`."""
        if self.num_vertices or self.tick:
            raise RuntimeError("restoring a snapshot needs an empty graph")
        meta = np.asarray(a["meta"], np.int64)
        n, m = int(meta[K.NV]), int(meta[K.POOL_USED])
        self._relayout()
        self._alloc_vertices(max(n + max(1024, n // 4), 1024))
        for k in self._VERTEX:
            getattr(self, k)[:n] = a[f"v_{k}"]
        if 3 * m > len(self.key):
            self._alloc_pool(max(3 * m, 4096))
        for k in self._POOL:
            getattr(self, k)[:m] = a[f"p_{k}"]
        self.ids.keys = np.array(a["id_keys"], np.int64)
        self.ids.vals = np.array(a["id_vals"], np.int32)
        self.ids.used = np.array(a["id_used"], np.uint8)
        self.ids.count = int(a["id_count"])
        self.ids.index_direct()
        in_place = self.meta[K.IN_PLACE]
        self.meta[:] = meta
        self.meta[K.IN_PLACE] = in_place          # the executor's choice, not the dump's
        self._order = np.array(a["order"], np.int32)
        self._packed_end = int(a["packed_end"])
        self._fit_labels()
        x, y, lab = self.alive_edges()
        up = x < y
        self.edges = EdgeSet.of((x[up].astype(np.int64) << 32) | y[up], lab[up])

    # -- reads for checks and initial matching ------------------------------------
    def alive_edges(self, at: int | None = None) -> tuple[npt.NDArray[np.int32],
                                                          npt.NDArray[np.int32],
                                                          npt.NDArray[np.int32]]:
        """Directed (a, b, label) for every alive edge, both orientations: now, or as a
        reader of tick ``at`` sees them (``ct < at <= dt``; versions must be held).
        Deferred edges are merged first (versions may move, the pool may grow)."""
        self.merge_deferred()
        n = self.num_vertices
        return visible_edges(self.seg_off[:n], self.seg_len[:n], self.key, self.elab, self.ct,
                             self.dt, at)


def visible_edges(off: npt.NDArray[np.int64], ln: npt.NDArray[np.int32],
                  key: npt.NDArray[np.int64], elab: npt.NDArray[np.int32],
                  ct: npt.NDArray[np.int64], dt: npt.NDArray[np.int64],
                  at: int | None = None) -> tuple[npt.NDArray[np.int32], npt.NDArray[np.int32],
                                                  npt.NDArray[np.int32]]:
    """(owner, neighbour, label) of every entry of the current versions ``[off, off +
    ln)`` that is alive (``at`` None) or visible to a reader of tick ``at``; the host
    graph and the device graph's view share it."""
    lens = ln.astype(np.int64)
    owner = np.repeat(np.arange(len(off), dtype=np.int32), lens)
    idx = ranges(off, lens)
    alive = dt[idx] == INF_TICK if at is None else (ct[idx] < at) & (dt[idx] >= at)
    idx = idx[alive]
    return owner[alive], (key[idx] & 0xFFFFFFFF).astype(np.int32), elab[idx]


def ranges(off: npt.NDArray[np.int64], ln: npt.NDArray[np.int64]) -> npt.NDArray[np.int64]:
    """Concatenation of [off[i], off[i] + ln[i]) for every i (pool positions of versions)."""
    starts = np.cumsum(ln) - ln
    return np.repeat(off - starts, ln) + np.arange(int(ln.sum()), dtype=np.int64)


def _log_arrays(n: int) -> tuple[npt.NDArray[np.int32], npt.NDArray[np.int32],
                                  npt.NDArray[np.int64]]:
    """A deletion log's columns (ends, tick) with room for ``n``, their pages touched
    (``np.zeros`` of a large array maps pages that fault on their first write)."""
    cols = np.empty(n, np.int32), np.empty(n, np.int32), np.empty(n, np.int64)
    for c in cols:
        c.fill(0)
    return cols


class _OutBuffers:
    _spec = (("raw", np.int32), ("op", np.int8), ("a", np.int32), ("b", np.int32),
             ("src", np.int64), ("dst", np.int64), ("label", np.int32), ("tick", np.int64),
             ("status", np.int8), ("reason", np.int8))

    def __init__(self, cap: int) -> None:
        # uninitialised: apply_batch writes every column of a row before counting it,
        # and only counted rows are read (zeroing and copying 10 columns of a batch of
        # 18k updates cost 0.27 ms)
        self.cols = [np.empty(cap, dt) for _, dt in self._spec]

    def arrays(self) -> list[npt.NDArray[np.generic]]:
        return self.cols

    def grow(self, cap: int) -> None:
        cap = max(cap, 2 * len(self.cols[0]))
        new = []
        for c in self.cols:
            d = np.empty(cap, c.dtype)
            d[: len(c)] = c
            new.append(d)
        self.cols = new

    def table(self, n: int) -> OpTable:
        """The first n rows, as views: the buffers are the table's alone."""
        return OpTable(**{name: c[:n] for (name, _), c in zip(self._spec, self.cols,
                                                              strict=True)})
