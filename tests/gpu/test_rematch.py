"""Past updates matched again against their own ticks (a shard's new owner catching up):
exactly the deltas a query registered all along would have had."""

from __future__ import annotations

import numpy as np
import pytest

from gpu import BatchResult, Engine, EngineError, QuerySpec, UpdateBatch
from streams import GenConfig, generate

DS = generate(GenConfig(vertices=200, edges=800, labels=2, queries=3, min_query=3,
                        max_query=4, insert_ratio=0.4, delete_ratio=0.3, seed=5))


def _run(register: bool, hold: bool) -> tuple[Engine, list[BatchResult], list[int]]:
    e = Engine("cpu")
    g = DS.initial
    e.load_graph(g.vertex_ids, g.vertex_labels, g.src, g.dst, g.label)
    if hold:
        e.hold_versions(1)
    if register:
        for _, q in DS.queries:
            e.register(QuerySpec(q, list_matches=True))
    s, out, ticks = DS.stream, [], []
    for i in range(0, len(s), 50):
        sl = slice(i, i + 50)
        ticks.append(e.graph.tick + 1)
        out.append(e.apply(UpdateBatch(s.seq[sl], s.op[sl], s.src[sl], s.dst[sl],
                                       s.label[sl])))
    return e, out, ticks


def test_rematch_equals_live_matching() -> None:
    _, live, _ = _run(register=True, hold=False)
    late, past, _ = _run(register=False, hold=True)
    ids = tuple(late.register(QuerySpec(q, list_matches=True))[0].id for _, q in DS.queries)
    total = 0
    for a, b in zip(live, past, strict=True):
        c = late.rematch(b, ids)
        assert np.array_equal(a.counts, c.counts)
        total += int(np.abs(c.counts).sum())
        for q in ids:
            assert np.array_equal(a.listings[q].op_index, c.listings[q].op_index)
            assert np.array_equal(a.listings[q].tuples, c.listings[q].tuples)
    assert total > 0


def test_initial_at_a_past_tick() -> None:
    late, _, ticks = _run(register=False, hold=True)
    spec = QuerySpec(DS.queries[0][1])
    qid = late.register(spec)[0].id
    mid = ticks[len(ticks) // 2]
    got = late.initial_at(qid, mid)
    # the same query registered on a graph replayed up to that point
    ref = Engine("cpu")
    g = DS.initial
    ref.load_graph(g.vertex_ids, g.vertex_labels, g.src, g.dst, g.label)
    s = DS.stream
    for i in range(0, 50 * (len(ticks) // 2), 50):
        sl = slice(i, i + 50)
        ref.apply(UpdateBatch(s.seq[sl], s.op[sl], s.src[sl], s.dst[sl], s.label[sl]))
    _, want = ref.register(spec, initial=True)
    assert want is not None and int(got.counts[0, 0]) == int(want.counts[0, 0])


def test_reclaimed_versions_are_refused() -> None:
    e, past, _ = _run(register=False, hold=False)
    qid = e.register(QuerySpec(DS.queries[0][1]))[0].id
    e.apply(UpdateBatch.build([10**9], [0], [1], [2], [0]))   # moves the watermark on
    with pytest.raises(EngineError, match="reclaimed"):
        e.rematch(past[0], (qid,))


def test_describe_is_what_register_records() -> None:
    e, _, _ = _run(register=False, hold=False)
    spec = QuerySpec(DS.queries[1][1])
    described = e.describe(spec, 77)
    reg, _ = e.register(spec, query_id=77)
    assert described == reg
