"""REST and Kafka in, matches topic out, compared with the CPU engine update by update."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
from _support import (
    Running,
    expected_from_log,
    produce,
    published,
    query_doc,
    read_topic,
    update_docs,
)

from streams import GenConfig, generate
from streams.broker import EmbeddedBroker
from streams.formats import csm

pytestmark = pytest.mark.kafka


def _dataset(seed: int):  # type: ignore[no-untyped-def]
    return generate(GenConfig(vertices=400, edges=2400, labels=3, queries=3, min_query=3,
                              max_query=4, insert_ratio=0.3, delete_ratio=0.1, seed=seed))


@pytest.mark.parametrize("backend", ["cpu", pytest.param("gpu", marks=pytest.mark.gpu)])
def test_rest_and_kafka_updates_give_the_engines_deltas(
        service: Callable[..., Running], broker: EmbeddedBroker, tmp_path: Path,
        backend: str) -> None:
    """On the GPU the queries only count, so the edge batches take the device pipeline
    (the device owns the graph; vertex operations take its host path)."""
    ds = _dataset(5)
    svc = service(backend=backend)
    listing = backend == "cpu"
    s = svc.settings
    gfile = tmp_path / "g.graph"
    with gfile.open("w") as f:
        csm.write_graph(f, ds.initial)
    with svc.client() as c:
        loaded = c.load_graph(gfile)
        assert loaded["edges"] == ds.initial.num_edges
        qids = [c.register(query_doc(q, list_matches=listing, max_matches_per_update=100_000,
                                     count=mode))["id"]
                for (_, q), mode in zip(ds.queries, ["subgraphs", "embeddings", "subgraphs"],
                                   strict=True)]
        assert [q["id"] for q in c.queries()] == qids
        rng = np.random.default_rng(11)
        docs = update_docs(ds.stream)
        v = int(ds.initial.src[0])
        docs[len(docs) // 2:len(docs) // 2] = [
            {"op": "insert_vertex", "id": 10**12, "label": 1},
            {"op": "insert", "src": 10**12, "dst": v, "label": 0},
            {"op": "delete_vertex", "id": v}, {"op": "delete", "src": 5, "dst": 6}]
        i = 0
        while i < len(docs):   # REST in random batch sizes, every third one straight to Kafka
            n = int(rng.integers(1, 200))
            part = docs[i:i + n]
            if rng.random() < 0.3:
                produce(broker.bootstrap, s.topic_updates, [json.dumps({"updates": part}).encode()])
            else:
                got = c.post_updates(part)
                assert got["last_seq"] - got["first_seq"] == len(part) - 1
            i += n
    want = expected_from_log(broker.bootstrap, s.topic_updates)
    assert len(want) > 50
    got = published(broker.bootstrap, s.topic_matches, len(want))
    assert got == want                          # same deltas, same order, each once
    with svc.client() as c:                     # and the in-memory view agrees
        mine = [k for k in want if k[0] == qids[0]]
        recent = c.matches(qids[0], limit=10_000)
        assert [k[1] for k in mine] == [e["seq"] for e in recent]


def test_message_value_and_headers(service: Callable[..., Running],
                                   broker: EmbeddedBroker) -> None:
    svc = service()
    tri = {"vertices": [{"id": 0, "label": None}, {"id": 1}, {"id": 2}],
           "edges": [{"src": 0, "dst": 1}, {"src": 1, "dst": 2}, {"src": 0, "dst": 2}],
           "list_matches": True}
    with svc.client() as c:
        q = c.register(tri)
        acc = c.post_updates([{"op": "insert", "src": 1, "dst": 2},
                              {"op": "insert", "src": 2, "dst": 3},
                              {"op": "insert", "src": 3, "dst": 1}])
    recs = read_topic(broker.bootstrap, svc.settings.topic_matches, until=lambda r: len(r) >= 1)
    assert len(recs) == 1
    r = recs[0]
    v = json.loads(r.value)
    assert r.key == str(q["id"]).encode()
    assert dict(r.headers)["seq"] == str(acc["last_seq"]).encode()
    assert {k: v[k] for k in ("query", "seq", "sub", "op", "src", "dst", "sign", "count",
                              "matches", "truncated")} == {
        "query": q["id"], "seq": acc["last_seq"], "sub": 0, "op": "insert", "src": 3, "dst": 1,
        "sign": 1, "count": 1, "matches": [[1, 2, 3]], "truncated": False}
    assert v["arrived_at"] <= v["published_at"]


def test_emit_initial_and_delete_query(service: Callable[..., Running],
                                       broker: EmbeddedBroker) -> None:
    svc = service()
    edge = {"vertices": [{"id": 0, "label": 1}, {"id": 1, "label": 2}],
            "edges": [{"src": 0, "dst": 1}]}
    with svc.client() as c:
        c.post_updates([{"op": "insert_vertex", "id": 1, "label": 1},
                        {"op": "insert_vertex", "id": 2, "label": 2},
                        {"op": "insert_vertex", "id": 3, "label": 2},
                        {"op": "insert", "src": 1, "dst": 2}, {"op": "insert", "src": 1, "dst": 3}])
        q = c.register({**edge, "emit_initial": True, "list_matches": True})
        assert c.matches(q["id"])[0]["op"] == "initial"
        init = c.matches(q["id"])[0]
        assert (init["count"], sorted(init["matches"])) == (2, [[1, 2], [1, 3]])
        c.delete_query(q["id"])
        assert c.queries() == []
    want = expected_from_log(broker.bootstrap, svc.settings.topic_updates)
    assert published(broker.bootstrap, svc.settings.topic_matches, len(want)) == want
