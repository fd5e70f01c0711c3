"""A graph dumped and restored matches exactly like the graph it came from."""

from __future__ import annotations

import numpy as np
import pytest

from gpu import Engine, QuerySpec
from streams import GenConfig, generate, iter_chunks


def _deltas(eng: Engine, batch) -> list[tuple[int, ...]]:  # type: ignore[no-untyped-def]
    return sorted((d.query, d.seq, d.sub, d.sign, d.count) for d in eng.apply(batch).deltas())


@pytest.mark.parametrize("seed", [3, 21])
def test_restored_graph_matches_like_the_original(seed: int) -> None:
    ds = generate(GenConfig(vertices=300, edges=2000, labels=3, queries=2, min_query=3,
                            max_query=4, insert_ratio=0.4, delete_ratio=0.2, seed=seed))
    g = ds.initial
    a = Engine("cpu")
    a.load_graph(g.vertex_ids, g.vertex_labels, g.src, g.dst, g.label)
    first, rest = iter_chunks(ds.stream, len(ds.stream) // 2 + 1)
    a.apply(first)
    b = Engine("cpu")
    b.restore_graph({k: np.array(v) for k, v in a.graph.dump().items()})
    assert (b.graph.num_vertices, b.graph.num_edges, b.graph.tick) == \
        (a.graph.num_vertices, a.graph.num_edges, a.graph.tick)
    for i, (_, q) in enumerate(ds.queries):
        a.register(QuerySpec(q), query_id=i + 1)
        b.register(QuerySpec(q), query_id=i + 1)
    assert _deltas(a, rest) == _deltas(b, rest)
    ea, eb = a.graph.alive_edges(), b.graph.alive_edges()
    assert all(np.array_equal(x, y) for x, y in zip(ea, eb, strict=True))


def _edge_set(eng: Engine) -> np.ndarray:
    a, b, el = eng.graph.alive_edges()
    return np.unique(np.stack([a, b, el], axis=1), axis=0)


@pytest.mark.gpu
def test_snapshots_cross_the_device_owned_graph_both_ways() -> None:
    """A device-owned graph dumps as the host graph does (ids, ticks, versions), so a
    snapshot taken on either backend restores on either: after the first half of a raw
    stream (pipelined batches, vertex deletions and re-insertions among them), every
    restored engine has the reference's alive edges and gives its deltas on the rest."""
    from _batches import raw_stream, triangle

    from gpu import CountMode, ExecutorOptions

    def gpu() -> Engine:
        return Engine("gpu", options=ExecutorOptions(device_graph=True))

    def with_queries(eng: Engine) -> Engine:
        eng.register(QuerySpec(triangle(), CountMode.EMBEDDINGS), query_id=1)
        eng.register(QuerySpec(triangle(), list_matches=True), query_id=2)
        return eng

    stream = raw_stream(8, 6000, 300, hub_every=7)
    first, rest = stream.slice(0, 3000), stream.slice(3000, len(stream))
    ref, dev = Engine("cpu"), gpu()
    dev.register(QuerySpec(triangle(), CountMode.EMBEDDINGS), query_id=1)   # pipelined
    for eng in (ref, dev):
        for c in iter_chunks(first, 97):
            eng.apply(c)
    dev.unregister(1)
    ref_snap = {k: np.array(v) for k, v in ref.graph.dump().items()}
    for src, targets in ((dev, (Engine("cpu"), gpu())), (ref, (gpu(),))):
        snap = {k: np.array(v) for k, v in src.graph.dump().items()}
        for dst in targets:
            dst.restore_graph(snap)
            assert (dst.graph.num_vertices, dst.graph.num_edges, dst.graph.tick) == \
                (ref.graph.num_vertices, ref.graph.num_edges, ref.graph.tick)
            assert np.array_equal(_edge_set(dst), _edge_set(ref))
            want = Engine("cpu")
            want.restore_graph(ref_snap)
            with_queries(want)
            with_queries(dst)
            for c in iter_chunks(rest, 211):
                assert _deltas(want, c) == _deltas(dst, c)
