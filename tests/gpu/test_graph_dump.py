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
