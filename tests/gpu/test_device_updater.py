"""The graph updater on the device against the host updater, status by status.

Both resolve the same raw streams (full of duplicates, missing deletes, re-inserts,
relabels, vertex deletions of hubs, self-loops and reserved labels); every primitive
update (op, internal ids, external ids, label, tick, status, reason) must be equal, and
so must every vertex's version as a reader after the watermark sees it. Small starting
capacities force every resumable path (full pool, output and vertex arrays).
"""

from __future__ import annotations

import numpy as np
import pytest
from _batches import lagged_batches
from _batches import raw_stream as _stream

from gpu import HostGraph, UpdateBatch, UpdateOp
from streams import GenConfig, generate

pytestmark = pytest.mark.gpu


def _check(host: HostGraph, dev, host_ops, dev_ops) -> None:  # type: ignore[no-untyped-def]
    from gpu.cuda._updater import host_versions

    for name in ("raw", "op", "a", "b", "src", "dst", "label", "tick", "status", "reason"):
        h, d = getattr(host_ops, name), getattr(dev_ops, name)
        assert np.array_equal(h, d), f"op column {name!r} differs at {np.flatnonzero(h != d)[:5]}"
    st = dev.stats
    assert (st.num_vertices, st.tick, st.num_edges) == (host.num_vertices, host.tick,
                                                        host.num_edges)
    nv = host.num_vertices
    vs = dev.vertex_state()
    for name in ("vlabel", "vdeg", "valive", "vext"):
        assert np.array_equal(vs[name], getattr(host, name)[:nv]), name
    hv, dv = host_versions(host), dev.versions()
    bad = [v for v in range(nv) if not np.array_equal(hv[v], dv[v])]
    assert not bad, f"versions differ for internal ids {bad[:5]}"


def _run(initial, stream: UpdateBatch, sizes: list[int], *, vcap: int = 1024,  # type: ignore[no-untyped-def]
         pcap: int = 4096, lag: int = 1, parallel: bool = True, chunk: int = 128,
         build_tiles: int = 4) -> None:
    from gpu.cuda._updater import DeviceUpdater

    host = HostGraph()
    dev = DeviceUpdater(vertex_capacity=vcap, pool_capacity=pcap, parallel=parallel,
                        chunk=chunk, build_tiles=build_tiles)
    if initial is not None:
        g = initial
        host.load(g.vertex_ids, g.vertex_labels, g.src, g.dst, g.label)
        dev.load(g.vertex_ids, g.vertex_labels, g.src, g.dst, g.label)
    for chunk, w in lagged_batches(stream, sizes, lag, lambda: host.tick):
        host.set_watermark(w)
        dev.set_watermark(w)
        _check(host, dev, host.apply(chunk), dev.apply(chunk))


@pytest.mark.parametrize("parallel", [True, False], ids=["parallel", "one-warp"])
@pytest.mark.parametrize("b", [1, 7, 64, 4096])
def test_device_updater_equals_host_updater(b: int, parallel: bool) -> None:
    _run(None, _stream(seed=b, n=3000, ids=60, hub_every=5), [b], parallel=parallel)


@pytest.mark.parametrize("build_tiles", [1, 4], ids=["tile", "build"])
@pytest.mark.parametrize("b", [1, 7, 64, 1000, 4096])
def test_parallel_tiles_of_edge_updates(b: int, build_tiles: int) -> None:
    # no vertex operations: every tile takes the parallel path; a small id space makes
    # groups of one pair toggled many times within a tile
    _run(None, _stream(seed=10 + b, n=9000, ids=90, hub_every=4, vertex_ops=0.0), [b],
         build_tiles=build_tiles)


@pytest.mark.parametrize("sizes", [[4096], [4096, 3000, 2049]])
def test_pairs_named_again_in_later_tiles_of_a_build(sizes: list[int]) -> None:
    # 40 ids, 780 pairs, each named about 15 times a batch of 4,096: a pair inserted in
    # one tile is deleted, re-inserted, duplicated or missed in later tiles of the same
    # build (its state comes from the pair table, its entries are not built yet), and new
    # vertices of one tile are named again in the next; the lagged watermark keeps entries
    # the build ended
    _run(None, _stream(seed=41, n=20000, ids=40, vertex_ops=0.0), sizes, lag=2)


def test_a_vertex_crowded_with_new_entries_ends_its_build() -> None:
    # every update names one vertex: over 1,024 new entries for it end a build after two
    # tiles (its entries are ranked by one warp); the rest of the launch builds after
    rng = np.random.default_rng(12)
    n = 12000
    op = np.where(rng.random(n) < 0.8, UpdateOp.INSERT_EDGE, UpdateOp.DELETE_EDGE).astype(np.int8)
    src = np.full(n, 7, np.int64)
    dst = rng.integers(8, 6000, n).astype(np.int64)
    label = rng.integers(0, 3, n).astype(np.int32)
    stream = UpdateBatch.build(np.arange(n), op, src, dst, label)
    _run(None, stream, [4096], lag=2)


def test_builds_that_give_no_vertex_a_new_entry() -> None:
    # batches of nine tiles: deletions of loaded edges only, then insertions that are all
    # duplicates (ignored), then the deleted edges inserted again: the first two give no
    # vertex a new entry, so their builds end on block 0 without a grid round
    ds = generate(GenConfig(vertices=3000, edges=30000, labels=3, queries=1, seed=6))
    g = ds.initial
    rng = np.random.default_rng(6)
    k = 9000
    gone = rng.choice(len(g.src), k, replace=False)
    kept = np.setdiff1d(np.arange(len(g.src)), gone)[:k]

    def batch(at: int, op: UpdateOp, rows: np.ndarray) -> UpdateBatch:
        return UpdateBatch.build(np.arange(at, at + len(rows)), np.full(len(rows), op, np.int8),
                                 g.src[rows], g.dst[rows], g.label[rows])

    stream = UpdateBatch.concat([batch(0, UpdateOp.DELETE_EDGE, gone),
                                 batch(k, UpdateOp.INSERT_EDGE, kept),
                                 batch(2 * k, UpdateOp.INSERT_EDGE, gone)])
    _run(g, stream, [k], lag=2)


def test_parallel_and_sequential_tiles_mixed() -> None:
    # rare vertex operations: some tiles go to the sequential resolver, most do not
    ds = generate(GenConfig(vertices=3000, edges=20000, labels=3, queries=1,
                            insert_ratio=0.3, delete_ratio=0.1, seed=4))
    extra = _stream(4, 12000, ids=800, hub_every=9, vertex_ops=0.0003)
    _run(ds.initial, UpdateBatch.concat([ds.stream, extra]), [4096, 3000, 1], lag=2)


@pytest.mark.parametrize("chunk", [128, 384])
def test_hub_versions_built_by_many_warps(chunk: int) -> None:
    # a hub with thousands of neighbours: each of its versions spans many chunks (one warp
    # each), with entries the lagged watermark keeps after their deletion (equal keys on
    # both sides of chunk boundaries) and new entries in every chunk; 384 entries a chunk
    # give each warp three rounds of loads
    _run(None, _stream(seed=77, n=30000, ids=5000, hub_every=2, vertex_ops=0.0),
         [4096, 1, 64, 999], lag=2, chunk=chunk)


@pytest.mark.parametrize("seed", [1, 2])
def test_device_updater_on_a_loaded_power_law_graph(seed: int) -> None:
    ds = generate(GenConfig(vertices=2000, edges=12000, labels=4, queries=1,
                            insert_ratio=0.3, delete_ratio=0.1, seed=seed))
    extra = _stream(seed, 4000, ids=400, hub_every=7)
    stream = UpdateBatch.concat([ds.stream, extra])
    rng = np.random.default_rng(seed)
    _run(ds.initial, stream, [int(x) for x in rng.integers(1, 4097, 16)], lag=3)


def test_every_resumable_path_from_tiny_capacities() -> None:
    # 16 vertices, 16 pool entries, 1024 output rows: the pool fills at once, hub vertex
    # deletions overflow the output, and new ids overflow the vertex arrays
    _run(None, _stream(seed=5, n=6000, ids=300, hub_every=3), [1, 2500, 31, 4096],
         vcap=16, pcap=16, lag=2)


def test_hubs_are_packed_in_slices_by_every_warp_of_a_block() -> None:
    # two vertices of 2,500 and 4,000 neighbours in one compaction range (update.cu
    # COMPACT_HUB: the block's warps take a slice each), then every third of their edges
    # deleted and some re-inserted: full pools compact them at every stage, and every version
    # a reader after the watermark sees stays the host's
    rng = np.random.default_rng(11)
    ends = [(0, x) for x in range(10, 2510)] + [(1, x) for x in range(10, 4010)]
    a, b = (np.array(c, np.int64) for c in zip(*ends, strict=True))
    order = rng.permutation(len(a))
    ins = (a[order], b[order], np.full(len(a), UpdateOp.INSERT_EDGE, np.int8))
    gone = order[::3]
    dels = (a[gone], b[gone], np.full(len(gone), UpdateOp.DELETE_EDGE, np.int8))
    back = gone[::2]
    again = (a[back], b[back], np.full(len(back), UpdateOp.INSERT_EDGE, np.int8))
    src, dst, op = (np.concatenate(c) for c in zip(ins, dels, again, strict=True))
    stream = UpdateBatch.build(np.arange(len(op)), op, src, dst, np.zeros(len(op), np.int32))
    _run(None, stream, [1500, 7, 300, 1, 64], pcap=4096, lag=2)


def test_memory_stays_flat_on_an_endless_churn() -> None:
    from gpu.cuda._updater import DeviceUpdater

    dev = DeviceUpdater()
    rng = np.random.default_rng(9)
    a = rng.integers(0, 500, 2000).astype(np.int64)
    b = a + 1 + rng.integers(0, 400, 2000).astype(np.int64)
    caps = []
    for r in range(30):
        op = np.full(2000, UpdateOp.INSERT_EDGE if r % 2 == 0 else UpdateOp.DELETE_EDGE,
                     np.int8)
        dev.set_watermark(dev.stats.tick)   # everything before has finished matching
        dev.apply(UpdateBatch.build(np.arange(2000), op, a, b, np.zeros(2000, np.int32)))
        caps.append(dev._pcap)
    assert dev.compactions > 0
    assert caps[-1] == caps[len(caps) // 2], "the pool kept growing on a steady churn"
