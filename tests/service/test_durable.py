"""The default ``csm serve`` (no Kafka settings): acknowledged writes survive kill -9 at
each crash point, with or without the broker processes killed too, and snapshots with
the update log truncated behind them; a locked or damaged state directory exits 2 and
is left as it was."""

from __future__ import annotations

import asyncio
import hashlib
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import pytest
from _serve import ROOT, Service, serve_env
from _support import expected_from_items, published, query_doc, update_docs
from _wait import wait_until
from aiokafka import AIOKafkaConsumer, TopicPartition

from service.client import ApiError, CsmClient
from service.state import StateDir
from streams import GenConfig, generate
from streams.broker import free_port
from streams.codec import SEQ_STRIDE, QueryDoc, Register, updates_from_docs

pytestmark = [pytest.mark.kafka, pytest.mark.slow]
POINTS = ("append", "publish", "commit")


@pytest.fixture
def services() -> Iterator[list[Service]]:
    made: list[Service] = []
    yield made
    for s in made:
        s.kill(broker_too=True)


def _wait_processed(c: CsmClient, offset: int, svc: Service) -> None:
    """Until the runtime has committed ``offset`` (a refused connection, once the service
    died at a crash point, reaches the caller)."""
    assert svc.p is not None
    wait_until(lambda: c.graph()["offset"] > offset, f"offset {offset} processed", svc.p,
               every=0.01)


@pytest.mark.parametrize("broker_too", [False, True], ids=["service", "machine"])
def test_kill_9_at_every_point_loses_and_repeats_nothing(services: list[Service],
                                                         tmp_path: Path,
                                                         broker_too: bool) -> None:
    ds = generate(GenConfig(vertices=300, edges=1500, labels=3, queries=2, min_query=3,
                            max_query=4, insert_ratio=0.3, delete_ratio=0.1, seed=18))
    rng = np.random.default_rng(18 + broker_too)
    # seeded occurrences; snapshots every 4 records, so the log is truncated under us
    crashes = [f"{p}:{int(rng.integers(2, 5))}" for p in POINTS]
    svc = Service(tmp_path / "state", tmp_path / "serve.log", CSM_SNAPSHOT_EVERY="4",
                  CSM_MAX_POLL_RECORDS="2")
    services.append(svc)
    svc.start(crashes.pop(0))
    items: list[tuple[int, Any]] = []
    g = ds.initial
    graph_docs = [{"op": "insert_vertex", "id": int(v), "label": int(lab)}
                  for v, lab in zip(g.vertex_ids, g.vertex_labels, strict=True)] + \
        [{"op": "insert", "src": int(a), "dst": int(b), "label": int(lab)}
         for a, b, lab in zip(g.src, g.dst, g.label, strict=True)]
    stream = update_docs(ds.stream)
    batches = [graph_docs[i:i + 400] for i in range(0, len(graph_docs), 400)] + \
        [stream[i:i + 25] for i in range(0, len(stream), 25)]
    queries = [query_doc(q, list_matches=True, max_matches_per_update=100_000)
               for _, q in ds.queries]
    kills = 0

    def restart() -> None:
        nonlocal kills
        svc.wait_killed()
        kills += 1
        svc.kill(broker_too)
        svc.start(crashes.pop(0) if crashes else None)

    with CsmClient(svc.url, timeout=60) as c:
        todo: list[tuple[str, Any]] = [("batch", b) for b in batches[:3]] + \
            [("query", q) for q in queries] + [("batch", b) for b in batches[3:]]
        i = 0
        while i < len(todo):
            kind, body = todo[i]
            item = Register(QueryDoc.model_validate(body)) if kind == "query" else \
                updates_from_docs(body)
            nxt = items[-1][0] + 1 if items else 0
            try:
                if kind == "query":
                    off = c.register(body)["id"]
                else:
                    off = c.post_updates(body)["first_seq"] // SEQ_STRIDE
                assert off == nxt
                items.append((off, item))
                i += 1
                _wait_processed(c, off, svc)
            except (httpx.TransportError, ApiError):
                restart()
                end = _log_end(svc.bootstrap())
                if end > (items[-1][0] + 1 if items else 0):
                    # killed between the append and the answer: the record is in the log
                    assert end == nxt + 1 and (not items or items[-1][0] < nxt)
                    items.append((nxt, item))
                    i += 1
        assert not crashes and kills == len(POINTS)
        svc.kill(broker_too)                 # and once more after the last record
        svc.start()
        _wait_processed(c, items[-1][0], svc)
        assert c.graph()["offset"] == items[-1][0] + 1
        assert sorted(q["id"] for q in c.queries()) == [o for o, x in items
                                                      if isinstance(x, Register)]
    want = expected_from_items(items)
    got = published(svc.bootstrap(), "csm.matches", len(want), timeout=120)
    assert got == want
    snaps = sorted((svc.state / "snapshots" / "csm.updates").iterdir())
    assert snaps, "no snapshot was taken"
    records = (svc.state / "broker" / "objects" / "tansu" / "clusters" / "tansu_cluster" /
               "topics" / "csm.updates" / "partitions" / "0000000000" / "records")
    assert f"{0:020d}.batch.obj" not in os.listdir(records), "the log was not truncated"


def _log_end(bootstrap: str) -> int:
    async def run() -> int:
        c = AIOKafkaConsumer(bootstrap_servers=bootstrap, group_id=None)
        await c.start()
        try:
            tp = TopicPartition("csm.updates", 0)
            return int((await c.end_offsets([tp]))[tp])
        finally:
            await c.stop()
    return asyncio.run(run())


# -- a state directory that cannot be used ------------------------------------------------
def _serve_fails(state: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "service.cli", "serve"], cwd=ROOT,
                          env=serve_env(state, free_port()), capture_output=True, text=True,
                          timeout=120)


def _digest(folder: Path) -> dict[str, str]:
    return {str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(folder.rglob("*")) if p.is_file()}


def test_a_locked_state_directory_exits_2(tmp_path: Path) -> None:
    state = tmp_path / "state"
    with StateDir(state):                      # another instance holds it
        before = _digest(state)
        r = _serve_fails(state)
        assert r.returncode == 2, r.stderr
        assert f"state directory {state} is in use by another csm serve (pid {os.getpid()})" \
            in r.stderr
        assert _digest(state) == before


@pytest.mark.parametrize("damage", ["foreign", "marker", "snapshot"])
def test_a_damaged_state_directory_exits_2_and_is_left_alone(tmp_path: Path,
                                                            damage: str) -> None:
    state = tmp_path / "state"
    if damage == "foreign":
        state.mkdir()
        (state / "notes.txt").write_text("not ours")
        want = "has data but no csm-state.json"
    else:
        StateDir(state).open().close()
        if damage == "marker":
            (state / "csm-state.json").write_text("{trunc")
            want = "csm-state.json cannot be read"
        else:
            snaps = state / "snapshots" / "csm.updates"
            snaps.mkdir(parents=True)
            (snaps / f"snapshot-{7:020d}.npz").write_bytes(b"PK\x03\x04 torn")
            want = "is damaged"
    before = _digest(state)
    r = _serve_fails(state)
    assert r.returncode == 2, r.stderr
    assert "csm: error: " in r.stderr and want in r.stderr, r.stderr
    assert _digest(state) == before


def test_ephemeral_says_so_once_and_writes_no_state(tmp_path: Path) -> None:
    svc = Service(tmp_path / "state", tmp_path / "serve.log", "--ephemeral")
    svc.start()
    svc.stop()
    warnings = [line for line in svc.log.read_text().splitlines() if " WARNING " in line]
    assert len(warnings) == 1 and "--ephemeral" in warnings[0] and "lost" in warnings[0], \
        warnings
    assert not svc.state.exists()


def test_broker_processes_killed_under_a_running_service_come_back(services: list[Service],
                                                                    tmp_path: Path) -> None:
    """The watchdog starts them again on the same files and ports; nothing is lost."""
    svc = Service(tmp_path / "state", tmp_path / "serve.log")
    services.append(svc)
    svc.start()
    with CsmClient(svc.url, timeout=60) as c:
        q = c.register(query_doc(generate(GenConfig(vertices=50, edges=100, queries=1, seed=4)
                                          ).queries[0][1]))
        first = c.post_updates([{"op": "insert", "src": 1, "dst": 2}])
        old = svc.broker_pids()
        for pid in old:
            os.kill(pid, signal.SIGKILL)
        assert svc.p is not None
        wait_until(lambda: not set(svc.broker_pids()) & set(old)
                   and len(svc.broker_pids()) == 2, "broker.json to name the new pair", svc.p)
        second = c.post_updates([{"op": "insert", "src": 2, "dst": 3}])
        _wait_processed(c, second["first_seq"] // SEQ_STRIDE, svc)
        assert second["first_seq"] // SEQ_STRIDE == first["first_seq"] // SEQ_STRIDE + 1
        assert [x["id"] for x in c.queries()] == [q["id"]]
        assert c.graph()["edges"] == 2
