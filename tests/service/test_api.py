"""Bad input, auth and the query resource over real HTTP; nothing bad reaches the log."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from _support import Running, expected_from_log, produce, published, read_topic

from streams.broker import EmbeddedBroker

pytestmark = pytest.mark.kafka

TRI = {"vertices": [{"id": 0}, {"id": 1}, {"id": 2}],
       "edges": [{"src": 0, "dst": 1}, {"src": 1, "dst": 2}, {"src": 0, "dst": 2}]}
INS = {"op": "insert", "src": 1, "dst": 2}


def _log_size(broker: EmbeddedBroker, svc: Running) -> int:
    return len(read_topic(broker.bootstrap, svc.settings.topic_updates))


BAD_UPDATES: list[tuple[Any, int, str]] = [
    (b"{not json", 422, "JSON"),
    (b"[1, 2]", 422, "object"),
    ({"updates": [{"op": "upsert", "src": 1, "dst": 2}]}, 422, "upsert"),
    ({"updates": [{"op": "insert", "src": "1", "dst": 2}]}, 422, "updates.0.insert.src"),
    ({"updates": [{"op": "insert", "src": 1.5, "dst": 2}]}, 422, "valid integer"),
    ({"updates": [{"op": "insert", "src": True, "dst": 2}]}, 422, "valid integer"),
    ({"updates": [{"op": "insert", "src": 2**63, "dst": 2}]}, 422, "less than or equal"),
    ({"updates": [INS, {"op": "insert", "src": 7, "dst": 7}]}, 422, "updates.1: self-loop"),
    ({"updates": [{"op": "insert", "src": 1, "dst": 2, "label": -2**31}]}, 422, "label"),
    ({"updates": [{"op": "insert_vertex", "src": 1}]}, 422, "id"),
    ({"updates": [{**INS, "colour": "red"}]}, 422, "colour"),
    ({"updates": []}, 422, "at least 1"),
    ({"upd": [INS]}, 422, "updates"),
    ({"updates": [INS] * 101}, 413, "bound is 100"),
    ({"updates": [INS] * 3000}, 413, "over 65536 bytes"),
]


@pytest.mark.parametrize(("body", "code", "needle"), BAD_UPDATES,
                         ids=[f"{i}-{c}" for i, (_, c, _) in enumerate(BAD_UPDATES)])
def test_bad_updates_are_refused_and_nothing_is_appended(
        service: Callable[..., Running], broker: EmbeddedBroker, body: Any, code: int,
        needle: str) -> None:
    svc = service(max_batch_updates=100, max_body_bytes=65536)
    with svc.client() as c:
        kw = {"content": body, "headers": {"content-type": "application/json"}} \
            if isinstance(body, bytes) else {"json": body}
        r = c.http.post("/v1/updates", **kw)
        assert r.status_code == code, r.text
        assert needle in r.json()["detail"]
        assert _log_size(broker, svc) == 0
        assert c.post_updates([INS])["count"] == 1      # and it keeps serving
    assert _log_size(broker, svc) == 1


BAD_QUERIES: list[tuple[Any, str]] = [
    ({"vertices": [{"id": 0}, {"id": 1}, {"id": 2}], "edges": [{"src": 0, "dst": 1}]},
     "not connected"),
    ({"vertices": [{"id": i} for i in range(13)],
      "edges": [{"src": i, "dst": i + 1} for i in range(12)]}, "at most 12"),
    ({"vertices": [{"id": 0}, {"id": 1}], "edges": []}, "at least 1"),
    ({"vertices": [{"id": 0}, {"id": 1}], "edges": [{"src": 0, "dst": 0}]}, "self-loop"),
    ({"vertices": [{"id": 0}, {"id": 1}], "edges": [{"src": 0, "dst": 5}]}, "undeclared"),
    ({"vertices": [{"id": 0}, {"id": 1}], "edges": [{"src": 0, "dst": 1}], "count": "all"},
     "count"),
    ({**TRI, "max_matches_per_update": -1}, "max_matches_per_update"),
]


@pytest.mark.parametrize(("body", "needle"), BAD_QUERIES, ids=[n for _, n in BAD_QUERIES])
def test_bad_queries_are_refused(service: Callable[..., Running], broker: EmbeddedBroker,
                                 body: Any, needle: str) -> None:
    svc = service()
    with svc.client() as c:
        r = c.http.post("/v1/queries", json=body)
        assert r.status_code == 422, r.text
        assert needle in r.json()["detail"]
        assert c.queries() == []
    assert _log_size(broker, svc) == 0


def test_query_resource(service: Callable[..., Running]) -> None:
    svc = service()
    with svc.client() as c:
        q = c.register({**TRI, "name": "triangle", "count": "embeddings"})
        assert (q["name"], q["count"], q["automorphisms"]) == ("triangle", "embeddings", 6)
        assert c.http.get(f"/v1/queries/{q['id']}").json() == q
        assert c.queries() == [q]
        assert c.http.get("/v1/queries/999").status_code == 404
        assert c.http.delete(f"/v1/queries/{q['id']}").status_code == 204
        assert c.http.delete(f"/v1/queries/{q['id']}").status_code == 404
        assert c.http.get(f"/v1/matches?query={q['id']}").status_code == 404
        assert c.queries() == []


def test_auth_guards_every_write(service: Callable[..., Running]) -> None:
    svc = service(api_token="s3cret")
    with svc.client() as anon, svc.client(token="wrong") as bad, \
            svc.client(token="s3cret") as ok:
        for c in (anon, bad):
            for method, path, kw in [("POST", "/v1/updates", {"json": {"updates": [INS]}}),
                                     ("POST", "/v1/queries", {"json": TRI}),
                                     ("DELETE", "/v1/queries/1", {}),
                                     ("POST", "/v1/graph", {"content": b"v 1 0\n"})]:
                r = c.http.request(method, path, **kw)
                assert r.status_code == 401, (method, path, r.text)
                assert "Bearer" in r.json()["detail"]
        q = ok.register(TRI)
        assert ok.post_updates([INS])["count"] == 1
        assert anon.queries()[0]["id"] == q["id"]      # reads stay open
        assert anon.http.get("/metrics").status_code == 200


def test_graph_upload_once(service: Callable[..., Running], tmp_path: Path) -> None:
    svc = service()
    bad = tmp_path / "bad.graph"
    bad.write_text("v 1 0\ne 1 x 0\n")
    good = tmp_path / "g.graph"
    good.write_text("v 1 0\nv 2 0\nv 3 0\ne 1 2 0\ne 2 3 0\n")
    with svc.client() as c:
        assert c.graph() == {"vertices": 0, "edges": 0, "offset": 0}
        r = c.http.post("/v1/graph", content=bad.read_bytes())
        assert r.status_code == 422 and "line 2" in r.json()["detail"]
        assert c.load_graph(good)["edges"] == 2
        assert c.graph() == {"vertices": 3, "edges": 2, "offset": 1}
        r = c.http.post("/v1/graph", content=good.read_bytes())
        assert r.status_code == 409 and "not empty" in r.json()["detail"]
        snap = c.http.post("/v1/graph?format=snap", content=b"1 2\n")
        assert snap.status_code == 409


def test_malformed_log_messages_are_dead_lettered(service: Callable[..., Running],
                                                  broker: EmbeddedBroker) -> None:
    svc = service()
    s = svc.settings
    with svc.client() as c:
        q = c.register(TRI)
        offs = produce(broker.bootstrap, s.topic_updates, [
            b"\xff\xfe", b'{"updates": [{"op": "insert", "src": 1}]}',
            json.dumps({"updates": [{"op": "insert", "src": 1, "dst": 2},
                                    {"op": "insert", "src": 2, "dst": 3},
                                    {"op": "insert", "src": 1, "dst": 3}]}).encode()])
    dead = read_topic(broker.bootstrap, s.topic_deadletter, until=lambda r: len(r) >= 2)
    bodies = [json.loads(r.value) for r in dead]
    assert [b["offset"] for b in bodies] == offs[:2]
    assert "not JSON" in bodies[0]["reason"] and "dst" in bodies[1]["reason"]
    want = expected_from_log(broker.bootstrap, s.topic_updates)
    assert len(want) == 1 and want[0][0] == q["id"]
    assert published(broker.bootstrap, s.topic_matches, 1) == want


def _samples(c: Any) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    from prometheus_client.parser import text_string_to_metric_families
    out = {}
    for fam in text_string_to_metric_families(c.http.get("/metrics").text):
        for s in fam.samples:
            out[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return out


def test_metrics_count_what_happened(service: Callable[..., Running]) -> None:
    svc = service()
    with svc.client() as c:
        q = c.register(TRI)
        c.post_updates([INS, {"op": "insert", "src": 2, "dst": 3},
                        {"op": "insert", "src": 1, "dst": 3}, INS,
                        {"op": "delete", "src": 8, "dst": 9}])
        # a control record is answered only once every record before it is committed
        # and counted: register and drop a second query as a barrier
        c.delete_query(c.register({**TRI, "name": "barrier"})["id"])
        m = _samples(c)
        qid = str(q["id"])
        assert m[("csm_updates_total", (("op", "insert"), ("status", "ignored")))] == 1
        assert m[("csm_updates_total", (("op", "delete"), ("status", "ignored")))] == 1
        assert m[("csm_matches_total", (("query", qid), ("sign", "+")))] == 1
        assert m[("csm_deltas_total", (("query", qid),))] == 1
        assert m[("csm_graph_edges", ())] == 3
        assert m[("csm_queries", ())] == 1
        assert m[("csm_ready", ())] == 1
        assert m[("csm_response_seconds_count", ())] == 1
        c.delete_query(q["id"])
        assert ("csm_deltas_total", (("query", qid),)) not in _samples(c)
