"""Several instances on one log: each query's deltas are published by exactly one live
instance, and the matches topic is what a single instance would have published."""

from __future__ import annotations

import json
import subprocess
import uuid
from pathlib import Path
from typing import Any

import httpx
import pytest
from _fleet import Instance, assignment, fleet_env
from _support import expected_from_log, produce, published, query_doc, update_docs
from _wait import wait_until

from service.client import CsmClient, read_topic
from streams import GenConfig, generate
from streams.broker import EmbeddedBroker
from streams.formats import csm

pytestmark = [pytest.mark.kafka, pytest.mark.slow]
P = 6


def _proc(i: Instance) -> subprocess.Popen[bytes]:
    """The instance's process (the wait blocks on it between polls)."""
    assert i.p is not None
    return i.p


def _start(fleet: list[Instance], tmp: Path, seed: int) -> Any:
    """Start the instances, load a generated graph and register its 30 queries, spread
    over the instances (each registration goes through the log)."""
    ds = generate(GenConfig(vertices=400, edges=2000, labels=3, queries=30, min_query=3,
                            max_query=4, insert_ratio=0.4, delete_ratio=0.15, seed=seed))
    for i in fleet:
        i.start()
    for i in fleet:
        i.wait_ready()
    gfile = tmp / "g.graph"
    with gfile.open("w") as f:
        csm.write_graph(f, ds.initial)
    with CsmClient(fleet[0].url, timeout=60) as c:
        c.load_graph(gfile)
    for k, (_, q) in enumerate(ds.queries):
        with CsmClient(fleet[k % len(fleet)].url, timeout=60) as c:
            c.register(query_doc(q, list_matches=True, max_matches_per_update=100_000))
    return ds


def _per_partition(keys: list[tuple[object, ...]]) -> dict[int, list[tuple[object, ...]]]:
    out: dict[int, list[tuple[object, ...]]] = {p: [] for p in range(P)}
    for k in keys:
        out[int(k[0]) % P].append(k)   # type: ignore[call-overload]
    return out


def test_three_instances_publish_what_one_would(broker: EmbeddedBroker,
                                                tmp_path: Path) -> None:
    p = f"scale{uuid.uuid4().hex[:8]}"
    env = fleet_env(broker.bootstrap, p, P)
    fleet = [Instance(n, env, tmp_path / f"{n}.log") for n in ("a", "b", "c")]
    try:
        ds = _start(fleet, tmp_path, seed=19)
        clients = [CsmClient(i.url, timeout=60) for i in fleet]
        docs = update_docs(ds.stream)
        parts = _split(len(docs), 40)
        for k, idx in enumerate(parts[:10]):   # likely before the group has settled:
            clients[k % 3].post_updates([docs[j] for j in idx])   # taken over by catch-up
        wait_until(lambda: sorted(assignment(fleet).values()) == [2, 2, 2],
                   "every instance to own two of the six shards", _proc(fleet[0]))
        for k, idx in enumerate(parts[10:]):   # published live by their owners
            clients[k % 3].post_updates([docs[j] for j in idx])
        want = expected_from_log(broker.bootstrap, f"{p}.updates")
        got = published(broker.bootstrap, f"{p}.matches", len(want), timeout=120)
        assert len(got) == len(want)
        assert _per_partition(got) == _per_partition(want)
        owned = sum(int(i.metric("csm_owned_queries")) for i in fleet)
        assert owned == len(ds.queries)
        listed = [sorted(c.queries(), key=lambda q: q["id"]) for c in clients]
        assert listed[0] == listed[1] == listed[2]   # owners or not, the same description
        assert all(q["automorphisms"] >= 1 and q["plans"] >= 1 for q in listed[0])
        _non_owners_redirect(fleet, [int(q["id"]) for q in listed[0]])
        for c in clients:
            c.__exit__()
    finally:
        for i in fleet:
            i.stop()


def _non_owners_redirect(fleet: list[Instance], qids: list[int]) -> None:
    """GET /v1/matches and /v1/queries/{id}: the owner answers, every other instance
    sends the client there (307 with the owner's address), never an empty page."""
    for q in qids:
        answers = {}
        for i in fleet:
            for path in (f"/v1/matches?query={q}", f"/v1/queries/{q}"):
                r = httpx.get(i.url + path, timeout=30)
                answers[(i.name, path)] = r
        for path in (f"/v1/matches?query={q}", f"/v1/queries/{q}"):
            ok = [n for n in ("a", "b", "c") if answers[(n, path)].status_code == 200]
            assert len(ok) == 1, (q, path, {k: v.status_code for k, v in answers.items()})
            owner = next(i for i in fleet if i.name == ok[0])
            for n in ("a", "b", "c"):
                if n != ok[0]:
                    r = answers[(n, path)]
                    assert r.status_code == 307
                    assert r.headers["location"] == owner.url + path
                    assert r.json()["owner"] == owner.name
        page = answers[(ok[0], f"/v1/matches?query={q}")].json()
        assert page["query"] == q


def _split(n: int, parts: int) -> list[range]:
    step = -(-n // parts)
    return [range(s, min(s + step, n)) for s in range(0, n, step)]


@pytest.mark.parametrize("window", ["1000000", "30"], ids=["window", "rebuild"])
def test_kill_join_and_leave_move_shards_exactly_once(broker: EmbeddedBroker,
                                                      tmp_path: Path, window: str) -> None:
    """kill -9 of an owner mid-stream, a new instance later, a clean stop: after each,
    the new assignment shows in the metrics and every delta of the log so far is on the
    matches topic exactly once, in order. With a 30-update window every gap is older
    than the window: the new owners rebuild the versions from the log instead."""
    p = f"fail{uuid.uuid4().hex[:8]}"
    env = {**fleet_env(broker.bootstrap, p, P), "CSM_CATCHUP_WINDOW_UPDATES": window}
    fleet = [Instance(n, env, tmp_path / f"{n}.log") for n in ("a", "b", "c", "d")]
    live = fleet[:3]
    try:
        ds = _start(live, tmp_path, seed=23)
        wait_until(lambda: sorted(assignment(live).values()) == [2, 2, 2], "three owners",
                   _proc(live[0]))
        docs = update_docs(ds.stream)
        parts = _split(len(docs), 40)

        def post(batches: list[range]) -> None:
            for k, idx in enumerate(batches):
                with CsmClient(live[k % len(live)].url, timeout=60) as c:
                    c.post_updates([docs[j] for j in idx])

        def check(shares: list[int], what: str) -> None:
            wait_until(lambda: sorted(assignment(live).values()) == shares, what,
                       _proc(live[0]))
            want = expected_from_log(broker.bootstrap, f"{p}.updates")
            got = published(broker.bootstrap, f"{p}.matches", len(want), timeout=120)
            assert len(got) == len(want), what
            assert _per_partition(got) == _per_partition(want), what

        bad = []   # topic messages that do not decode: dead-lettered by shard 0's owner

        def post_bad() -> None:
            bad.extend(produce(broker.bootstrap, f"{p}.updates", [b'{"updates": 7}']))

        post(parts[:10])
        post_bad()
        victim = live.pop(0)
        victim.kill()                      # mid-stream: its last chunks may be in flight
        post(parts[10:20])
        check([3, 3], "the killed instance's shards on the other two")
        fleet[3].start().wait_ready()
        live.append(fleet[3])
        post_bad()
        post(parts[20:30])
        check([2, 2, 2], "the new instance taking two shards")
        assert fleet[3].metric("csm_rebalances_total") >= 1
        leaving = live.pop(0)
        post_bad()
        leaving.stop()                     # a clean leave
        post(parts[30:])
        check([3, 3], "the stopped instance's shards on the other two")
        dead = read_topic(broker.bootstrap, f"{p}.dead", until=lambda xs: len(xs) >= 3)
        assert sorted(json.loads(r.value)["offset"] for r in dead) == bad
        assert sum(int(i.metric("csm_owned_queries")) for i in live) == len(ds.queries)
    finally:
        for i in fleet:
            i.stop()
