"""The device pipeline (gpu/cuda/_pipeline.py) equals the CPU engine, batch by batch, with many
batches in flight and results read in random order (needs a CUDA device)."""

from __future__ import annotations

import time

import numpy as np
import pytest
from _batches import raw_stream, triangle

from gpu import CountMode, Engine, ExecutorOptions, QuerySpec, UpdateBatch
from gpu._results import BatchResult
from gpu._types import UpdateStatus
from gpu.cuda._updater import M_WATERMARK
from streams import GenConfig, generate

pytestmark = pytest.mark.gpu

MODES = (CountMode.EMBEDDINGS, CountMode.SUBGRAPHS)


def _chunks(stream: UpdateBatch, rng: np.random.Generator, most: int) -> list[UpdateBatch]:
    out, i = [], 0
    while i < len(stream):
        n = int(rng.integers(1, most + 1))
        out.append(stream.slice(i, min(i + n, len(stream))))
        i += n
    return out


def _engines(ds, queries) -> tuple[Engine, Engine]:  # type: ignore[no-untyped-def]
    engines = (Engine("cpu"), Engine("gpu", options=ExecutorOptions(device_graph=True)))
    g = ds.initial
    for eng in engines:
        eng.load_graph(g.vertex_ids, g.vertex_labels, g.src, g.dst, g.label)
        for q, mode in queries:
            eng.register(QuerySpec(q, mode))
    return engines


def _hub_engines(rng: np.random.Generator, n_ids: int, n_edges: int,
                 modes: tuple[CountMode, ...]) -> tuple[Engine, Engine]:
    """CPU and GPU engines (device-owned graph) on random edges over raw_stream's first
    ``n_ids`` ids, a triangle standing in each of ``modes``."""
    ids = (np.arange(n_ids, dtype=np.int64) * 1_000_003) + (1 << 40)   # the stream's ids
    src, dst = rng.choice(ids, n_edges), rng.choice(ids, n_edges)
    keep = src != dst
    cpu, gpu = Engine("cpu"), Engine("gpu", options=ExecutorOptions(device_graph=True))
    for eng in (cpu, gpu):
        eng.load_graph(ids, np.zeros(n_ids, np.int32), src[keep], dst[keep],
                       np.zeros(int(keep.sum()), np.int32))
        for mode in modes:
            eng.register(QuerySpec(triangle(), mode))
    return cpu, gpu


def _same(cpu: BatchResult, gpu: BatchResult, where: object) -> None:
    assert np.array_equal(cpu.counts, gpu.counts), where
    for col in ("status", "tick", "a", "b", "label", "reason"):
        assert np.array_equal(getattr(cpu.ops, col), getattr(gpu.ops, col)), (where, col)
    assert np.array_equal(cpu.seq, gpu.seq), where


@pytest.mark.parametrize("seed", [1, 2])
def test_many_batches_in_flight_read_in_random_order(seed: int) -> None:
    ds = generate(GenConfig(vertices=3000, edges=15000, labels=4, queries=3, max_query=5,
                            insert_ratio=0.45, delete_ratio=0.05, seed=seed))
    queries = [(q, m) for _, q in ds.queries for m in MODES] + [(triangle(), MODES[1])]
    cpu, gpu = _engines(ds, queries)
    rng = np.random.default_rng(seed)
    chunks = _chunks(ds.stream, rng, 4096 if seed == 1 else 64)
    expected = [cpu.apply(c) for c in chunks]
    pending = []
    for k, c in enumerate(chunks):
        pending.append(gpu.submit(c))
        if k % 20 == 19:   # read a random earlier batch now and then: the rest stay in flight
            j = int(rng.integers(0, k + 1))
            _same(expected[j], pending[j].result(), j)
    for j in rng.permutation(len(chunks)):
        _same(expected[j], pending[j].result(), j)
    pipe = gpu.executor._pipeline   # type: ignore[attr-defined]
    assert pipe.launches > 0


def _deliver_per_query(cpu: Engine, gpu: Engine, chunks: list[UpdateBatch],
                       rng: np.random.Generator) -> int:
    """Submit every chunk, then take each standing query's results in seq order, the
    queries polled in random order (per-query delivery: a query's deltas once its own
    work is done); each equals the CPU engine's column. Returns how many were taken while
    their batch as a whole was not ready yet."""
    expected = [cpu.apply(c) for c in chunks]
    pending = [gpu.submit(c) for c in chunks]
    qids = list(pending[0].qids)
    head = dict.fromkeys(qids, 0)   # each query's next batch
    early = 0
    deadline = time.monotonic() + 120
    while any(k < len(chunks) for k in head.values()):
        assert time.monotonic() < deadline, f"per-query delivery stalled at {head}"
        for q in rng.permutation(qids).tolist():
            k = head[q]
            if k == len(chunks) or not pending[k].query_ready(q):
                continue
            whole = pending[k].ready
            got = pending[k].query_result(q)
            early += not whole
            j = qids.index(q)
            want = expected[k]
            assert got.query_ids == (q,) and got.counts.shape == (len(want.counts), 1)
            assert np.array_equal(want.counts[:, j], got.counts[:, 0]), (k, q)
            for col in ("status", "tick", "a", "b"):
                assert np.array_equal(getattr(want.ops, col), getattr(got.ops, col)), (k, col)
            col = want.counts[:, j]
            assert (got.stats.positive, got.stats.negative) == (int(col[col > 0].sum()),
                                                                 int(-col[col < 0].sum()))
            assert got.stats.applied == want.stats.applied, k
            head[q] = k + 1
    for k in rng.permutation(len(chunks)).tolist():   # and the whole results after
        _same(expected[k], pending[k].result(), k)
    return early


@pytest.mark.parametrize("seed", [1, 2])
def test_each_query_is_delivered_once_its_own_work_is_done(seed: int) -> None:
    """Queries of 3-5 vertices and a triangle over many batches in flight: each query's
    column of each batch, taken in seq order as soon as that query is ready, equals the
    CPU engine's, whatever the order the queries are polled in (design.md 2u)."""
    ds = generate(GenConfig(vertices=3000, edges=15000, labels=4, queries=4, max_query=5,
                            insert_ratio=0.45, delete_ratio=0.05, seed=seed))
    queries = [(q, MODES[seed % 2]) for _, q in ds.queries] + [(triangle(), MODES[0])]
    cpu, gpu = _engines(ds, queries)
    rng = np.random.default_rng(seed)
    _deliver_per_query(cpu, gpu, _chunks(ds.stream, rng, 4096 if seed == 1 else 64), rng)


def test_per_query_delivery_waits_for_a_launch_the_host_path_finishes() -> None:
    """A tiny pool: launches stop on it and the skipped ones behind them run again; their
    queries are not ready until the host path has finished them (their ready words were
    written by the stopped or skipped run, with nothing or too little counted), and then
    their columns are exact."""
    ds = generate(GenConfig(vertices=400, edges=600, labels=2, queries=2, max_query=4,
                            insert_ratio=0.8, delete_ratio=0.1, seed=7))
    queries = [(q, CountMode.SUBGRAPHS) for _, q in ds.queries] + [(triangle(), MODES[0])]
    cpu, gpu = _engines(ds, queries)
    gpu.executor._pipeline.collect_garbage = False   # type: ignore[attr-defined]
    rng = np.random.default_rng(7)
    _deliver_per_query(cpu, gpu, _chunks(ds.stream, rng, 200), rng)
    assert gpu.executor._pipeline.recoveries > 0   # type: ignore[attr-defined]


def test_a_split_batch_is_delivered_per_query_once_every_part_is() -> None:
    """A batch of three launches and the batches around it: each query's column comes
    once all its parts (and every launch before) have that query's counts."""
    from gpu.cuda._pipeline import LAUNCH_CAP

    stream = raw_stream(5, 3 * LAUNCH_CAP, 400, hub_every=3, vertex_ops=0.0)
    cpu, gpu = _hub_engines(np.random.default_rng(5), 400, 4000, MODES)
    cuts = [0, 1, 2 * LAUNCH_CAP + 2, 2 * LAUNCH_CAP + 9, len(stream)]
    chunks = [stream.slice(a, b) for a, b in zip(cuts, cuts[1:], strict=False)]
    _deliver_per_query(cpu, gpu, chunks, np.random.default_rng(5))


@pytest.mark.parametrize(("vertices", "edges", "most"), [(400, 600, 200), (2000, 12000, 3000)],
                         ids=["tiles", "launches-of-several-tiles"])
def test_a_full_pool_mid_flight_is_finished_on_the_host_path(vertices: int, edges: int,
                                                             most: int) -> None:
    """A tiny pool: batches stop on it while later ones are in flight; each is finished
    (compaction, growth, resumed resolve) and the skipped ones run again, exactly (with
    launches of several tiles, build_units' blocks meet the records of the skipped runs)."""
    ds = generate(GenConfig(vertices=vertices, edges=edges, labels=2, queries=2, max_query=4,
                            insert_ratio=0.8, delete_ratio=0.1, seed=7))
    queries = [(q, CountMode.SUBGRAPHS) for _, q in ds.queries] + [(triangle(), MODES[0])]
    cpu, gpu = _engines(ds, queries)
    gpu.executor._pipeline.collect_garbage = False   # type: ignore[attr-defined]
    chunks = _chunks(ds.stream, np.random.default_rng(7), most)
    pending = [gpu.submit(c) for c in chunks]
    for c, p in zip(chunks, pending, strict=True):
        _same(cpu.apply(c), p.result(), len(c))
    assert gpu.executor._pipeline.recoveries > 0   # type: ignore[attr-defined]


def test_garbage_is_collected_in_stream_order() -> None:
    """Once the pool is half full it is compacted on the updater's stream between two
    launches (the host does not wait; two pools alternate): results stay exact, no batch
    meets a full pool, and the pool stays within a few times what is live."""
    stream = raw_stream(11, 12_000, 300, hub_every=5, vertex_ops=0.0)
    rng = np.random.default_rng(11)
    cpu, gpu = _hub_engines(rng, 300, 3000, (CountMode.EMBEDDINGS,))
    chunks = _chunks(stream, rng, 16)
    expected = [cpu.apply(c) for c in chunks]
    pending = []
    for k, c in enumerate(chunks):   # up to 32 batches in flight
        pending.append(gpu.submit(c))
        if k >= 32:
            _same(expected[k - 32], pending[k - 32].result(), k - 32)
    for j in range(max(0, len(chunks) - 32), len(chunks)):
        _same(expected[j], pending[j].result(), j)
    pipe = gpu.executor._pipeline   # type: ignore[attr-defined]
    u = pipe.updater
    assert u.compactions >= 4 and pipe.recoveries == 0
    assert u.reclaimed > 0
    assert u.pool_capacity <= 16 * 2 * gpu.graph.num_edges


def test_a_hub_outgrowing_the_row_stride_captures_only_backs_again() -> None:
    """One batch gives a vertex more new edges than the row stride's headroom: the stride
    grows between the launch's front and its back, the backs are captured again for it and
    the fronts (which never read the stride) are kept; counts stay exact."""
    n = 600
    ids = np.arange(n, dtype=np.int64) + 10
    hub = np.zeros(100, np.int64) + 10
    src = np.r_[hub, ids[1:-1]]                 # a hub of 100, and a path through the rest
    dst = np.r_[ids[1:101], ids[2:]]
    cpu, gpu = Engine("cpu"), Engine("gpu", options=ExecutorOptions(device_graph=True))
    for eng in (cpu, gpu):
        eng.load_graph(ids, np.zeros(n, np.int32), src, dst, np.zeros(len(src), np.int32))
        eng.register(QuerySpec(triangle(), CountMode.EMBEDDINGS))
    pipe = gpu.executor._pipeline   # type: ignore[attr-defined]
    stride0, gen0 = pipe._stride, pipe.updater.generation
    fronts0 = [dict(b.fronts) for b in pipe._blocks]
    grow = ids[101:]                            # 499 new hub edges, then one more batch
    batch = UpdateBatch.build(np.arange(len(grow)), np.zeros(len(grow), np.int8),
                              np.full(len(grow), 10), grow, np.zeros(len(grow), np.int32))
    _same(cpu.apply(batch), gpu.submit(batch).result(), "growth")
    assert pipe._stride > stride0 + len(grow) // 2
    later = UpdateBatch.build([len(grow)], [0], [ids[5]], [ids[300]], [0])
    _same(cpu.apply(later), gpu.submit(later).result(), "after")
    assert pipe.updater.generation == gen0, "the device arrays grew: every graph anew"
    for b, before in zip(pipe._blocks, fronts0, strict=True):
        for key, fronts in before.items():   # the same captured fronts, not new ones
            assert b.fronts.get(key) is fronts
        assert len({k[3] for k in b.backs}) == 1   # one stride's backs (both pools')
    assert sum(k[3] == pipe._stride for b in pipe._blocks for k in b.backs) >= 2


def test_vertex_operations_take_the_host_path_between_pipelined_batches() -> None:
    stream = raw_stream(5, 6000, 300, hub_every=7, vertex_ops=0.01)
    cpu, gpu = (Engine("cpu"), Engine("gpu", options=ExecutorOptions(device_graph=True)))
    for eng in (cpu, gpu):
        eng.register(QuerySpec(triangle(), CountMode.SUBGRAPHS))
        eng.register(QuerySpec(triangle(), CountMode.EMBEDDINGS))
    chunks = _chunks(stream, np.random.default_rng(5), 100)
    pending = [gpu.submit(c) for c in chunks]
    for j, c in enumerate(chunks):
        _same(cpu.apply(c), pending[j].result(), j)
    pipe = gpu.executor._pipeline   # type: ignore[attr-defined]
    assert 0 < pipe.launches < len(chunks)


def test_the_watermark_keeps_what_every_match_lane_can_read() -> None:
    """Batch k resolves while the last batch of every other match lane may still be
    matching, so its watermark is the tick before the oldest of them (k - lanes + 1):
    entries those batches can see stay in the versions k builds."""
    stream = raw_stream(3, 1200, 400, vertex_ops=0.0)
    gpu = Engine("gpu", options=ExecutorOptions(device_graph=True))
    # a loaded graph apart from the stream's ids sizes the pool: no batch stops on it
    rng = np.random.default_rng(3)
    ids = np.arange(20_000, dtype=np.int64)
    gpu.load_graph(ids, np.zeros(len(ids), np.int32), rng.integers(0, 20_000, 100_000),
                   rng.integers(0, 20_000, 100_000), np.zeros(100_000, np.int32))
    gpu.register(QuerySpec(triangle(), CountMode.SUBGRAPHS))
    pipe = gpu.executor._pipeline   # type: ignore[attr-defined]
    pipe.busy_launches = 1 << 30   # one launch per batch, however busy the device is
    chunks = [stream.slice(i, i + 60) for i in range(0, len(stream), 60)]
    results = [p.result() for p in [gpu.submit(c) for c in chunks]]
    lanes = len(pipe._lanes)
    assert lanes > 1 and pipe.launches == len(chunks) and pipe.recoveries == 0
    tick0 = [int(r.ops.tick[r.ops.status == UpdateStatus.APPLIED].min()) - 1 for r in results]
    meta = gpu.executor.graph.meta   # type: ignore[attr-defined]
    assert int(meta[M_WATERMARK]) == tick0[len(chunks) - lanes]


@pytest.mark.parametrize("seed", [4, 5])
def test_batches_gathered_into_one_launch_keep_their_own_results(seed: int) -> None:
    """Batches submitted while the device is busy share a launch (group commit); each
    still gets exactly its own primitive updates and counts, read in any order. With
    ``busy_launches = 0`` they gather until a read or a full launch, so the test does not
    depend on the device's speed."""
    ds = generate(GenConfig(vertices=2000, edges=8000, labels=3, queries=2, max_query=4,
                            insert_ratio=0.5, delete_ratio=0.1, seed=seed))
    queries = [(q, m) for _, q in ds.queries for m in MODES] + [(triangle(), MODES[0])]
    cpu, gpu = _engines(ds, queries)
    pipe = gpu.executor._pipeline   # type: ignore[attr-defined]
    pipe.busy_launches = 0
    rng = np.random.default_rng(seed)
    chunks = _chunks(ds.stream.slice(0, 6000), rng, 40 if seed == 4 else 700)
    expected = [cpu.apply(c) for c in chunks]
    pending = []
    for k, c in enumerate(chunks):
        pending.append(gpu.submit(c))
        if k % 25 == 24:
            j = int(rng.integers(0, k + 1))
            _same(expected[j], pending[j].result(), j)
    for j in rng.permutation(len(chunks)):
        _same(expected[j], pending[j].result(), j)
    assert pipe.launches < len(chunks) // 2


def test_read_batches_are_freed_without_the_garbage_collector() -> None:
    """Nothing a pipelined batch leaves behind is cyclic: with the collector off, its
    ticket, launch and result columns go as soon as the caller lets go (a cycle between
    launch and ticket made the collector free hundreds of objects at once, 0.3-0.4 ms
    pauses in the response-time tail)."""
    import gc
    import weakref

    ds = generate(GenConfig(vertices=2000, edges=8000, labels=3, queries=1, min_query=3,
                            max_query=3, insert_ratio=0.5, delete_ratio=0.1, seed=6))
    _, gpu = _engines(ds, [(triangle(), MODES[0])])
    pipe = gpu.executor._pipeline   # type: ignore[attr-defined]
    pipe.busy_launches = 0   # batches gather: launches with several tickets
    chunks = [ds.stream.slice(i, i + 50) for i in range(0, 2000, 50)]
    gc.collect()
    gc.disable()
    try:
        pending = [gpu.submit(c) for c in chunks]
        refs = []
        for p in pending:
            r = p.result()
            t = p.ticket
            refs += [weakref.ref(t), weakref.ref(t.launch), weakref.ref(r.ops.tick)]
            del r, t
        assert pipe.launches < len(chunks)
        del pending, p
        for _ in range(pipe.depth + 1):   # the blocks keep their last launch: cycle them
            gpu.submit(ds.stream.slice(2000, 2001)).result()
        alive = sum(ref() is not None for ref in refs)
        assert alive == 0, f"{alive} of {len(refs)} objects wait for the collector"
    finally:
        gc.enable()


@pytest.mark.parametrize("busy", [2, 0])
def test_a_batch_larger_than_a_launch_goes_in_parts_read_as_one(busy: int) -> None:
    """Batches of up to three launches' capacity on a hub stream: each is cut into
    consecutive launches and read back (out of order) as one batch whose columns, counts
    and stats equal the CPU engine's; the pool grows ahead of the parts, so none takes
    the host path, also where each part but the last gathers until the next one starts it
    (busy 0; the last starts at once)."""
    from gpu.cuda._pipeline import LAUNCH_CAP, SplitTicket

    stream = raw_stream(5, 4 * LAUNCH_CAP, 400, hub_every=3, vertex_ops=0.0)
    cpu, gpu = _hub_engines(np.random.default_rng(5), 400, 4000, MODES)
    gpu.executor._pipeline.busy_launches = busy   # type: ignore[attr-defined]
    cuts = [0, 1, 2 * LAUNCH_CAP + 2, 2 * LAUNCH_CAP + 9, len(stream)]
    chunks = [stream.slice(a, b) for a, b in zip(cuts, cuts[1:], strict=False)]
    pending = [gpu.submit(c) for c in chunks]
    assert isinstance(pending[1].ticket, SplitTicket) and len(pending[1].ticket.parts) == 3
    got = {k: pending[k].result() for k in (3, 1, 0, 2)}
    for k, c in enumerate(chunks):
        want = cpu.apply(c)
        _same(want, got[k], k)
        assert np.array_equal(want.ops.raw, got[k].ops.raw), k
        assert np.array_equal(want.sub, got[k].sub), k
        for f in ("updates", "applied", "ignored", "rejected", "positive", "negative"):
            assert getattr(want.stats, f) == getattr(got[k].stats, f), (k, f)
    assert gpu.executor._pipeline.recoveries == 0   # type: ignore[attr-defined]


def test_a_launch_whose_region_never_comes_fails_instead_of_hanging(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The host places a launch's result region after launching its front, and apply_step
    waits for it at the end of its resolve: a host that fails in between (here: places
    nothing) leaves a launch that faults after the resolver's timeout, with a clear error
    for it and every later batch, not a device that spins for ever."""
    from gpu.cuda._pipeline import DevicePipeline
    from gpu.exceptions import BackendError

    gpu = Engine("gpu", options=ExecutorOptions(device_graph=True))
    gpu.executor.graph.barrier_timeout = 0.2   # type: ignore[attr-defined]
    gpu.register(QuerySpec(triangle(), CountMode.EMBEDDINGS))
    stream = raw_stream(7, 300, 200, vertex_ops=0.0)
    assert gpu.submit(stream.slice(0, 100)).result().stats.updates == 100
    monkeypatch.setattr(DevicePipeline, "_place", lambda self, g: None)
    lost = gpu.submit(stream.slice(100, 200))
    with pytest.raises(BackendError, match="result region"):
        lost.result()
    with pytest.raises(BackendError, match="result region"):
        gpu.submit(stream.slice(200, 300)).result()


def test_a_resolver_grid_that_cannot_all_run_fails_instead_of_hanging() -> None:
    """More resolver blocks than the GPU holds at once (as under an MPS share smaller than
    the GPU): their barrier times out, and the batch, every later one and the host path
    raise a clear error instead of waiting for ever."""
    from gpu.exceptions import BackendError

    gpu = Engine("gpu", options=ExecutorOptions(device_graph=True))
    updater = gpu.executor.graph   # type: ignore[attr-defined]
    updater.grid *= 8              # 8 blocks an SM; one of TILE threads fits
    updater.barrier_timeout = 0.2
    gpu.register(QuerySpec(triangle(), CountMode.EMBEDDINGS))   # captured with that grid
    stream = raw_stream(6, 3 * 4096, 3000, vertex_ops=0.0)
    first = gpu.submit(stream.slice(0, 4096))
    later = gpu.submit(stream.slice(4096, 8192))
    with pytest.raises(BackendError, match="cannot all run at once"):
        first.result()
    with pytest.raises(BackendError, match="cannot all run at once"):
        later.result()
    with pytest.raises(BackendError, match="cannot all run at once"):   # one block: the
        updater.apply(stream.slice(8192, 8195))                      # sticky flag still holds
