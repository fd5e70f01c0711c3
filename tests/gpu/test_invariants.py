"""Whole-stream invariants on generated power-law data, memory bounds, truncation."""

from __future__ import annotations

import numpy as np
import pytest
from _cases import churn_engine

from gpu import CountMode, Engine, Query, QuerySpec, UpdateBatch, UpdateOp
from streams import GenConfig, GraphData, generate, iter_chunks


def _replay(initial: GraphData, stream: UpdateBatch) -> GraphData:
    """The final graph, by plain set operations (independent of the engine)."""
    edges = {}
    for a, b, lab in zip(initial.src.tolist(), initial.dst.tolist(), initial.label.tolist(),
                         strict=True):
        edges.setdefault((min(a, b), max(a, b)), lab)
    for op, a, b, lab in zip(stream.op.tolist(), stream.src.tolist(), stream.dst.tolist(),
                             stream.label.tolist(), strict=True):
        k = (min(a, b), max(a, b))
        if op == UpdateOp.INSERT_EDGE and a != b:
            edges.setdefault(k, lab)
        elif op == UpdateOp.DELETE_EDGE:
            edges.pop(k, None)
    ks = list(edges)
    return GraphData(initial.vertex_ids, initial.vertex_labels,
                     np.array([k[0] for k in ks], np.int64), np.array([k[1] for k in ks], np.int64),
                     np.array([edges[k] for k in ks], np.int32))


def _static(g: GraphData, q: Query, mode: CountMode) -> int:
    e = Engine("cpu")
    e.load_graph(g.vertex_ids, g.vertex_labels, g.src, g.dst, g.label)
    _, res = e.register(QuerySpec(q, mode), initial=True)
    assert res is not None
    return int(res.counts[0, 0])


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_sum_of_deltas_equals_static_difference(seed: int) -> None:
    ds = generate(GenConfig(vertices=2000, edges=8000, labels=6, queries=4, insert_ratio=0.2,
                            delete_ratio=0.1, max_query=5, seed=seed))
    # then churn: re-insert what was deleted and delete part of what was inserted
    s = ds.stream
    dels = s.op == UpdateOp.DELETE_EDGE
    ins = np.flatnonzero(s.op == UpdateOp.INSERT_EDGE)[::3]
    churn = UpdateBatch.build(
        np.arange(len(s), len(s) + int(dels.sum()) + len(ins)),
        np.concatenate([np.full(int(dels.sum()), UpdateOp.INSERT_EDGE),
                        np.full(len(ins), UpdateOp.DELETE_EDGE)]),
        np.concatenate([s.src[dels], s.dst[ins]]), np.concatenate([s.dst[dels], s.src[ins]]),
        np.concatenate([s.label[dels], s.label[ins]]))
    stream = UpdateBatch.concat([s, churn])
    final = _replay(ds.initial, stream)
    for mode in (CountMode.EMBEDDINGS, CountMode.SUBGRAPHS):
        eng = Engine("cpu")
        g = ds.initial
        eng.load_graph(g.vertex_ids, g.vertex_labels, g.src, g.dst, g.label)
        regs = [eng.register(QuerySpec(q, mode))[0] for _, q in ds.queries]
        total = np.zeros(len(regs), np.int64)
        for chunk in iter_chunks(stream, 257):
            total += eng.apply(chunk).counts.sum(axis=0)
        for j, (_, q) in enumerate(ds.queries):
            want = _static(final, q, mode) - _static(ds.initial, q, mode)
            assert total[j] == want, (seed, mode, j)
        if mode is CountMode.EMBEDDINGS:
            emb = total
        else:
            aut = np.array([r.automorphisms for r in regs])
            assert np.array_equal(emb, aut * total)


def test_batch_size_does_not_change_results() -> None:
    ds = generate(GenConfig(vertices=1500, edges=6000, queries=3, max_query=5,
                            delete_ratio=0.1, seed=11))
    results = []
    for bs in (1, 7, 64, 5000):
        eng = Engine("cpu")
        g = ds.initial
        eng.load_graph(g.vertex_ids, g.vertex_labels, g.src, g.dst, g.label)
        for _, q in ds.queries:
            eng.register(QuerySpec(q, CountMode.EMBEDDINGS))
        results.append(np.concatenate([eng.apply(c).counts for c in iter_chunks(ds.stream, bs)]))
    for r in results[1:]:
        assert np.array_equal(r, results[0])


def test_each_query_reads_its_own_column_of_a_batch() -> None:
    """``query_result`` is the batch's result for one standing query (its column, its
    matches in the stats, the rest of the result as it is); on the CPU engine every query
    is ready with the batch. A query not standing at submit is refused by name."""
    from gpu.exceptions import UnknownQueryError

    ds = generate(GenConfig(vertices=800, edges=3000, queries=3, max_query=4,
                            delete_ratio=0.1, seed=5))
    eng = Engine("cpu")
    g = ds.initial
    eng.load_graph(g.vertex_ids, g.vertex_labels, g.src, g.dst, g.label)
    qids = [eng.register(QuerySpec(q, CountMode.EMBEDDINGS))[0].id for _, q in ds.queries]
    for chunk in iter_chunks(ds.stream, 500):
        p = eng.submit(chunk)
        for j, q in reversed(list(enumerate(qids))):   # any order, before or after result
            assert p.query_ready(q) == p.ready
            r = p.query_result(q)
            col = p.result().counts[:, j]
            assert r.query_ids == (q,) and np.array_equal(r.counts[:, 0], col)
            assert r.stats.positive == int(col[col > 0].sum())
            assert r.stats.negative == int(-col[col < 0].sum())
            assert r.stats.applied == p.result().stats.applied
            assert np.array_equal(r.seq, p.result().seq)
    with pytest.raises(UnknownQueryError, match="query 999 was not standing"):
        p.query_result(999)


def test_memory_stays_bounded_on_endless_churn() -> None:
    eng, churn = churn_engine("cpu")
    live = eng.graph.num_edges
    peak = 0
    for rnd in range(60):
        churn(rnd)
        peak = max(peak, len(eng.graph.key))
    assert eng.graph.num_edges == live
    # the pool never grows past a small multiple of what one round can hold
    assert peak <= 16 * (2 * live + 2 * 300) + 4096


def test_listing_cap_truncates_but_counts_stay_exact() -> None:
    eng = Engine("cpu")
    # K5 minus edge (0,1): inserting (0,1) creates C(3,1)=3 triangles -> 18 embeddings
    edges = [(i, j) for i in range(5) for j in range(i + 1, 5) if (i, j) != (0, 1)]
    eng.load_graph([], [], [e[0] for e in edges], [e[1] for e in edges], np.zeros(len(edges)))
    tri = Query.build([(0, None), (1, None), (2, None)], [(0, 1, None), (1, 2, None),
                                                           (0, 2, None)])
    reg, _ = eng.register(QuerySpec(tri, CountMode.EMBEDDINGS, list_matches=True,
                                    max_matches_per_update=4))
    res = eng.apply(UpdateBatch.build([0], [UpdateOp.INSERT_EDGE], [0], [1], [0]))
    assert int(res.counts[0, 0]) == 18
    lst = res.listings[reg.id]
    assert lst.truncated.tolist() == [True]
    rows = lst.rows_of(0)
    assert len(rows) == 4
    for r in rows.tolist():
        assert {0, 1} <= set(r) and len(set(r)) == 3


def test_vertex_delete_expands_in_ascending_neighbour_order() -> None:
    eng = Engine("cpu")
    eng.load_graph([], [], [10, 10, 10], [30, 5, 20], [0, 0, 0])
    res = eng.apply(UpdateBatch.build([7], [UpdateOp.DELETE_VERTEX], [10], [-1], [0]))
    assert res.ops.dst.tolist() == [5, 20, 30, -1]
    assert res.sub.tolist() == [0, 1, 2, 3]
    assert res.seq.tolist() == [7, 7, 7, 7]
    assert eng.graph.num_edges == 0


@pytest.mark.parametrize("copy_on_write", [True, False], ids=["copy-on-write", "in-place"])
def test_compaction_keeps_every_edge_and_packs_the_pool(copy_on_write: bool) -> None:
    """Garbage collection between batches of inserts, deletes and new vertices (it packs
    versions in pool order without sorting them all): the alive edges equal a plain
    replay, and a collection leaves no gap in the pool. Both version modes: new versions
    per batch (GPU) and in-place inserts with purges (CPU)."""
    from gpu.graph._host import HostGraph

    rng = np.random.default_rng(4)
    g = HostGraph()
    g.copy_on_write = copy_on_write
    init_a = rng.integers(0, 300, 2000)
    init_b = (init_a + 1 + rng.integers(0, 299, 2000)) % 300      # no self-loops
    g.load(np.zeros(0, np.int64), np.zeros(0, np.int32), init_a, init_b, np.zeros(2000, np.int32))
    stream_parts = []
    for rnd in range(40):
        n = 200
        a = rng.integers(0, 300 + 10 * rnd, n)     # new vertices keep appearing
        b = rng.integers(0, 300 + 10 * rnd, n)
        op = (rng.random(n) < 0.35).astype(np.int8)   # 35% deletions
        batch = UpdateBatch.build(np.arange(n) + n * rnd, op, a, b, np.zeros(n))
        stream_parts.append(batch)
        g.set_watermark(g.tick)
        g.apply(batch)
        if rnd % 3 == 2:
            g.compact()
            n_v = g.num_vertices
            assert g.pool_used == int(g.seg_len[:n_v].sum())
            ends = g.seg_off[:n_v] + g.seg_len[:n_v]
            order = np.argsort(g.seg_off[:n_v], kind="stable")
            assert (g.seg_off[:n_v][order][1:] >= ends[order][:-1]).all()   # no overlaps
    a, b, _ = g.alive_edges()
    got = {(min(x, y), max(x, y)) for x, y in zip(g.vext[a].tolist(), g.vext[b].tolist(),
                                                   strict=True)}
    stream = UpdateBatch.build(np.concatenate([s.seq for s in stream_parts]),
                               np.concatenate([s.op for s in stream_parts]),
                               np.concatenate([s.src for s in stream_parts]),
                               np.concatenate([s.dst for s in stream_parts]),
                               np.concatenate([s.label for s in stream_parts]))
    want = _replay(GraphData(np.zeros(0, np.int64), np.zeros(0, np.int32), init_a, init_b,
                             np.zeros(2000, np.int32)), stream)
    assert got == set(zip(want.src.tolist(), want.dst.tolist(), strict=True))
