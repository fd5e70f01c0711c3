"""The host graph's two version modes resolve every stream identically.

In place (the CPU) a batch's insertions are merged into their versions once per batch;
copy-on-write (the GPU) inserts each into a new version. On raw streams where every rule
fires (duplicates, missing deletes, re-inserts within a batch, relabels, hub vertex
deletions between insertions), every primitive update must be equal, and so must every
vertex's version as a reader after the watermark sees it. In place the graph's label
offsets (``loff``) must equal a recount of every version after each batch, compaction
and restore.
"""

from __future__ import annotations

import numpy as np
import pytest
from _batches import lagged_batches, raw_stream

from gpu import HostGraph, UpdateBatch, UpdateOp
from gpu.cuda._updater import host_versions
from gpu.graph._merge import order_pending
from streams import GenConfig, generate


def _graph(copy_on_write: bool, initial, vcap: int, pcap: int) -> HostGraph:  # type: ignore[no-untyped-def]
    g = HostGraph(vertex_capacity=vcap, pool_capacity=pcap)
    g.copy_on_write = copy_on_write
    if initial is not None:
        g.load(initial.vertex_ids, initial.vertex_labels, initial.src, initial.dst,
               initial.label)
    return g


def _labels_exact(g: HostGraph) -> None:
    """Each row of ``g.loff`` is where each label's range starts in the version."""
    nv, cols = g.num_vertices, g.loff.shape[1]
    if not cols:
        return
    assert int(g.vlabel[:nv].min(initial=0)) >= 0 and int(g.vlabel[:nv].max(initial=0)) < cols - 1
    for v in range(nv):
        labs = g.key[g.seg_off[v]:g.seg_off[v] + g.seg_len[v]] >> 32
        want = np.searchsorted(labs, np.arange(cols), side="left")
        assert np.array_equal(g.loff[v], want), f"label offsets of {v}: {g.loff[v]} != {want}"


def _run(initial, stream: UpdateBatch, sizes: list[int], *, vcap: int = 1024,  # type: ignore[no-untyped-def]
         pcap: int = 4096, lag: int = 1, relevant: frozenset[int] | None = None,
         defer_limit: int | None = None) -> None:
    """``relevant``: in place, edges with an end of another label stay pending across
    batches (deferred): their versions are compared after every fifth batch, once merged."""
    cow, inp = _graph(True, initial, vcap, pcap), _graph(False, initial, vcap, pcap)
    if relevant is not None:
        inp.set_relevant_labels(relevant)
    if defer_limit is not None:
        inp.DEFER_LIMIT = defer_limit
    for k, (chunk, w) in enumerate(lagged_batches(stream, sizes, lag, lambda: cow.tick), 1):
        cow.set_watermark(w)
        inp.set_watermark(w)
        a_ops, b_ops = cow.apply(chunk), inp.apply(chunk)
        for name in ("raw", "op", "a", "b", "src", "dst", "label", "tick", "status", "reason"):
            x, y = getattr(a_ops, name), getattr(b_ops, name)
            assert np.array_equal(x, y), f"{name} differs at {np.flatnonzero(x != y)[:5]}"
        nv = cow.num_vertices
        assert (nv, cow.tick, cow.num_edges) == (inp.num_vertices, inp.tick, inp.num_edges)
        for name in ("vlabel", "vdeg", "valive", "vext"):
            assert np.array_equal(getattr(cow, name)[:nv], getattr(inp, name)[:nv]), name
        _labels_exact(inp)
        if relevant is not None and k % 5:
            continue
        inp.merge_deferred()
        hv, iv = host_versions(cow), host_versions(inp)
        bad = [v for v in range(nv) if not np.array_equal(hv[v], iv[v])]
        assert not bad, f"versions differ for internal ids {bad[:5]}"
        _labels_exact(inp)
        if k % 7 == 0:   # a collection between batches, as the engine may run one
            inp.compact()
            _labels_exact(inp)
        if k % 11 == 0:   # a restored graph recounts them
            r = HostGraph()
            r.copy_on_write = False
            r.restore({key: np.array(v) for key, v in inp.dump().items()})
            _labels_exact(r)


@pytest.mark.parametrize("b", [1, 7, 64, 4096])
def test_in_place_equals_copy_on_write(b: int) -> None:
    _run(None, raw_stream(seed=b, n=3000, ids=60, hub_every=5), [b])


@pytest.mark.parametrize("b", [7, 64, 4096])
def test_in_place_edge_batches_equal_copy_on_write(b: int) -> None:
    """Edge updates only: the same pairs inserted, deleted and re-inserted many times
    within one batch (the pair table and pending list, no merge before a vertex op)."""
    s = raw_stream(seed=b + 1, n=6000, ids=40)
    edges = np.flatnonzero(s.op <= 1)
    s = UpdateBatch.build(np.arange(len(edges)), s.op[edges], s.src[edges], s.dst[edges],
                          s.label[edges])
    _run(None, s, [b])


@pytest.fixture
def halves(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every in-place batch resolved on two threads by pair (``gpu.graph._split``), however
    small and however many cores."""
    import gpu.graph._host as host

    monkeypatch.setattr(host, "HALVES_INSERTS", 1)
    monkeypatch.setattr(host, "_CORES", 2)


def _edges_only(s: UpdateBatch) -> UpdateBatch:
    e = np.flatnonzero(s.op <= 1)
    return UpdateBatch.build(np.arange(len(e)), s.op[e], s.src[e], s.dst[e], s.label[e])


@pytest.mark.parametrize("b", [1, 7, 64, 4096])
def test_batches_resolved_in_halves_equal_copy_on_write(halves: None, b: int) -> None:
    """Split by pair over two threads: pairs inserted, deleted and re-inserted many times
    within a batch (an insertion's entry ended in its own batch, an older pending one
    ended, a pair's last insertion holding the table), duplicates, missing deletes,
    self-loops and wildcards, in batches of 1 to 4096: every primitive update, tick,
    degree and version as the serial loop gives them."""
    _run(None, _edges_only(raw_stream(seed=b + 21, n=9000, ids=50)), [b])


@pytest.mark.parametrize("relevant", [frozenset({0}), frozenset({1, 3})])
def test_deferred_edges_resolved_in_halves(halves: None, relevant: frozenset[int]) -> None:
    """Deferred edges ended by later batches (an older pending entry), deletions logged
    in both logs (in order: the deferred edges' log is applied when they are merged), and
    vertex operations now and then, where both threads stop and the serial loop goes on."""
    rng = np.random.default_rng(7 + len(relevant))
    sizes = [int(x) for x in rng.integers(1, 3000, 12)]
    _run(None, raw_stream(seed=13, n=12000, ids=90, hub_every=9, vertex_ops=0.002), sizes,
         lag=2, relevant=relevant)


@pytest.mark.parametrize("seed", [1, 2])
def test_loaded_graph_resolved_in_halves(halves: None, seed: int) -> None:
    """Small dense ids (the direct array) and new vertices (an insertion naming one stops
    both threads) on a loaded power-law graph."""
    ds = generate(GenConfig(vertices=2000, edges=12000, labels=4, queries=1,
                            insert_ratio=0.3, delete_ratio=0.1, seed=seed))
    stream = UpdateBatch.concat([ds.stream, _edges_only(raw_stream(seed, 4000, ids=400))])
    _run(ds.initial, stream, [4096, 513, 2000], lag=3)


@pytest.mark.parametrize("seed", [1, 2])
def test_in_place_on_a_loaded_power_law_graph(seed: int) -> None:
    ds = generate(GenConfig(vertices=2000, edges=12000, labels=4, queries=1,
                            insert_ratio=0.3, delete_ratio=0.1, seed=seed))
    stream = UpdateBatch.concat([ds.stream, raw_stream(seed, 4000, ids=400, hub_every=7)])
    rng = np.random.default_rng(seed)
    _run(ds.initial, stream, [int(x) for x in rng.integers(1, 4097, 16)], lag=3)


@pytest.mark.parametrize("relevant", [frozenset({0}), frozenset({1, 3}), frozenset()])
def test_deferred_edges_resolve_as_copy_on_write(relevant: frozenset[int]) -> None:
    """Edges no standing query reads stay pending across batches: every status (their
    re-inserts, deletes and missing deletes in later batches), tick and degree as before,
    and every version once merged (vertex deletions merge them first; so do compaction
    and snapshots)."""
    rng = np.random.default_rng(len(relevant))
    sizes = [int(x) for x in rng.integers(1, 700, 24)]
    _run(None, raw_stream(seed=11, n=8000, ids=80, hub_every=9), sizes, lag=2,
         relevant=relevant)


def test_deferred_edges_merged_once_too_many() -> None:
    """Past the limit the deferred edges are merged together, also from tiny pools."""
    _run(None, raw_stream(seed=12, n=6000, ids=300, hub_every=11), [1, 300, 31, 2000],
         vcap=16, pcap=16, lag=2, relevant=frozenset({0}), defer_limit=64)


def test_in_place_from_tiny_capacities() -> None:
    # the pool fills during the merge (resumed after a collection or growth)
    _run(None, raw_stream(seed=5, n=6000, ids=300, hub_every=3), [1, 2500, 31, 4096],
         vcap=16, pcap=16, lag=2)


@pytest.mark.parametrize("copy_on_write", [False, True])
def test_direct_id_index_resolves_like_the_table_alone(copy_on_write: bool) -> None:
    """Small dense external ids are looked up in a direct array that mirrors the id
    table. On a loaded graph with ids 0..n-1 and a stream whose ids fall below, inside
    and past the array's end (and negative, and huge), with vertex deletions and
    re-creations, every primitive update and version equals the table's alone, and the
    array (a restored graph's too) holds what the table holds."""
    ds = generate(GenConfig(vertices=600, edges=3000, labels=3, queries=1,
                            insert_ratio=0.3, delete_ratio=0.1, seed=4))
    raw = raw_stream(seed=9, n=6000, ids=3000, hub_every=11)
    small = (raw.src - (1 << 40)) // 1_000_003, (raw.dst - (1 << 40)) // 1_000_003
    ends = []
    for x, big in zip(small, (raw.src, raw.dst), strict=True):
        e = x.copy()                        # 0..2999: the array covers about 0..1623
        e[x % 13 == 0] = big[x % 13 == 0]   # huge ids: the table only
        e[x % 17 == 0] = -x[x % 17 == 0] - 1
        ends.append(e)
    stream = UpdateBatch.build(raw.seq, raw.op, ends[0], ends[1], raw.label)
    g = ds.initial
    both = [_graph(copy_on_write, g, 1024, 4096) for _ in range(2)]
    assert len(both[0].ids.direct) > 600
    both[1].ids.direct = both[1].ids.direct[:0]
    for k, (chunk, w) in enumerate(lagged_batches(stream, [1, 97, 1000], 2,
                                                  lambda: both[0].tick), 1):
        ops = []
        for h in both:
            h.set_watermark(w)
            ops.append(h.apply(chunk))
        for name in ("raw", "op", "a", "b", "status", "reason", "tick"):
            assert np.array_equal(getattr(ops[0], name), getattr(ops[1], name)), name
        if k == 5:   # a restored graph builds its array from the table
            r = HostGraph()
            r.copy_on_write = copy_on_write
            r.restore({key: np.array(v) for key, v in both[0].dump().items()})
            both[0] = r
        for h in both:
            xs = np.arange(len(h.ids.direct), dtype=np.int64)
            assert np.array_equal(h.ids.direct, h.ids.lookup(xs))
    nv = both[0].num_vertices
    assert nv == both[1].num_vertices
    hv, tv = host_versions(both[0]), host_versions(both[1])
    assert all(np.array_equal(hv[v], tv[v]) for v in range(nv))


@pytest.mark.parametrize("top", [5, 40, -3])
def test_label_offsets_widen_or_stop_for_new_labels(top: int) -> None:
    """Vertex insertions with labels past the columns: up to LABEL_COLUMNS they widen the
    offsets (the new label's columns start at each version's end); past it, or negative,
    the graph keeps none and readers search. Either way it resolves like copy-on-write."""
    s = raw_stream(seed=3, n=3000, ids=60, hub_every=5)
    label = s.label.copy()
    ins_v = np.flatnonzero(s.op == UpdateOp.INSERT_VERTEX)
    label[ins_v[len(ins_v) // 2:][::4]] = top
    s = UpdateBatch.build(s.seq, s.op, s.src, s.dst, label)
    _run(None, s, [64])
    g = _graph(False, None, 1024, 4096)
    g.apply(s)
    assert g.loff.shape[1] == (top + 2 if 0 <= top < 16 else 0)   # labels 0..top, one more


def test_pool_allocator_gets_a_length() -> None:
    """The pool's allocator (the GPU's mapped_zeros) is called with a length when the pool
    grows, while the vertex arrays (two-dimensional label offsets among them) grow too."""
    def alloc(n, dtype):  # type: ignore[no-untyped-def]
        assert isinstance(n, int), n
        return np.zeros(n, dtype)

    g = _graph(False, None, 16, 16)
    g.use_pool_allocator(alloc)
    g.apply(raw_stream(seed=6, n=3000, ids=300, hub_every=3))
    assert g.pool_used <= len(g.key) and g.num_vertices <= len(g.loff)
    _labels_exact(g)


@pytest.mark.parametrize("fail_at", [1, 2, 3])
def test_a_merge_stopped_by_an_exception_loses_no_deferred_edge(fail_at: int) -> None:
    """Making pool room may raise (out of memory) in the middle of merging deferred edges:
    the next merge goes on from there, and the versions equal copy-on-write's."""
    rng = np.random.default_rng(fail_at)
    n = 400
    stream = UpdateBatch.build(np.arange(n), np.zeros(n, np.int8), rng.integers(0, 60, n),
                               rng.integers(0, 60, n), np.zeros(n, np.int32))
    cow, inp = _graph(True, None, 16, 16), _graph(False, None, 16, 16)
    inp.set_relevant_labels(frozenset())   # every edge deferred
    for lo in range(0, n, 50):
        cow.apply(stream.slice(lo, lo + 50))
        inp.apply(stream.slice(lo, lo + 50))
    calls, make_room = [0], inp._pool_full

    def flaky(at: int, stuck: int) -> int:
        calls[0] += 1
        if calls[0] == fail_at:
            raise MemoryError("no room (test)")
        return make_room(at, stuck)

    inp._pool_full = flaky   # type: ignore[method-assign]
    with pytest.raises(MemoryError):
        inp.merge_deferred()
    inp._pool_full = make_room   # type: ignore[method-assign]
    hv, iv = host_versions(cow), host_versions(inp)
    assert all(np.array_equal(hv[v], iv[v]) for v in range(cow.num_vertices))
    assert inp.num_edges == cow.num_edges


@pytest.mark.parametrize(("n", "nv"), [(40, 100), (500, 1000), (3000, 40000), (5000, 5_000_000)])
def test_pending_order_groups_by_owner_keeping_entry_order(n: int, nv: int) -> None:
    """The merge's grouping (a merge sort, a counting sort, radix sorts of one to three
    11-bit passes) equals a stable sort by owner."""
    rng = np.random.default_rng(n)
    owner = rng.integers(0, nv, 3 * n).astype(np.int32)
    owner[: n // 4] = nv - 1   # one long group, and owners up to the top id
    sel = np.sort(rng.choice(3 * n, n, replace=False)).astype(np.int64)
    got = order_pending(owner, sel, nv)
    assert np.array_equal(got, sel[np.argsort(owner[sel], kind="stable")])


@pytest.mark.parametrize("deferring", [False, True])
def test_batches_in_the_spare_stores_memory_resolve_as_in_fresh_ones(deferring: bool) -> None:
    """A batch's pending store takes the front of the graph's spare (made at load) while
    it fits: batches of growing and shrinking sizes, re-inserts and deletes of pending
    pairs, resolve exactly as with a new store each (the pair table of an earlier, larger
    batch is reset where it was written); deferring, the graph's store holds the spare
    across batches and a new store must not take it."""
    rng = np.random.default_rng(21)
    n, m = 60, 400
    src, dst = rng.integers(0, n, m), rng.integers(0, n, m)
    labels = rng.integers(0, 3, n).astype(np.int32)
    graphs = []
    for spare in (True, False):
        g = HostGraph()
        g.copy_on_write = False   # in place: the CPU's mode
        g.load(np.arange(n), labels, src, dst, np.zeros(m, np.int32))
        if deferring:
            g.set_relevant_labels(frozenset({0, 1}))
        if not spare:
            g._spare = None
        graphs.append(g)
    assert graphs[0]._spare is not None
    seq = 0
    for size in (3000, 40, 900, 5, 2500, 1, 4000):
        ops = rng.choice([UpdateOp.INSERT_EDGE, UpdateOp.DELETE_EDGE], size, p=[0.6, 0.4])
        batch = UpdateBatch.build(np.arange(seq, seq + size), ops, rng.integers(0, n, size),
                                  rng.integers(0, n, size), np.zeros(size, np.int32))
        seq += size
        got, want = (g.apply(batch) for g in graphs)
        for name in ("status", "tick", "a", "b"):
            assert np.array_equal(getattr(got, name), getattr(want, name)), (size, name)
    assert graphs[0].num_edges == graphs[1].num_edges
    for x, y in zip(*(host_versions(g) for g in graphs), strict=True):
        assert np.array_equal(x, y)
