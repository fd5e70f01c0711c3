"""kill -9 at random points of a stream: after restarts the matches topic holds every
delta of the log exactly once, in order."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import uuid
from pathlib import Path

import httpx
import numpy as np
import pytest
from _support import expected_from_log, published, query_doc, update_docs

from service.client import ApiError, CsmClient
from streams import GenConfig, generate
from streams.broker import EmbeddedBroker, free_port
from streams.formats import csm

pytestmark = [pytest.mark.kafka, pytest.mark.slow]
ROOT = Path(__file__).resolve().parents[2]


class Proc:
    def __init__(self, env: dict[str, str], port: int, log: Path) -> None:
        self.env, self.port, self.log = env, port, log
        self.p: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        with self.log.open("ab") as err:
            self.p = subprocess.Popen([sys.executable, "-m", "service.cli", "serve"], cwd=ROOT,
                                      env=self.env, stdin=subprocess.DEVNULL,
                                      stdout=subprocess.DEVNULL, stderr=err)
        with CsmClient(f"http://127.0.0.1:{self.port}") as c:
            c.wait_ready(180)

    def kill(self) -> None:
        assert self.p is not None
        os.kill(self.p.pid, signal.SIGKILL)

    def wait_dead(self) -> None:
        assert self.p is not None
        self.p.wait(30)
        assert self.p.returncode == -signal.SIGKILL, self.log.read_text()[-3000:]


@pytest.mark.parametrize(("partitions", "per_query"), [(1, False), (3, False), (1, True)],
                         ids=["one-partition", "three-partitions", "per-query-delivery"])
def test_kill_9_anywhere_loses_and_repeats_nothing(broker: EmbeddedBroker, tmp_path: Path,
                                                   partitions: int, per_query: bool) -> None:
    """With several matches partitions each one is a prefix of its queries' deltas; with
    per-query delivery (each query's deltas of a run handed on one query at a time, as on
    the device pipeline) each query's deltas are in order, whatever their interleaving."""
    ds = generate(GenConfig(vertices=500, edges=3000, labels=3, queries=2, min_query=3,
                            max_query=4, insert_ratio=0.3, delete_ratio=0.1, seed=21))
    p = f"crash{uuid.uuid4().hex[:8]}"
    port = free_port()
    env = {**os.environ, "CSM_KAFKA_BOOTSTRAP": broker.bootstrap, "CSM_PORT": str(port),
           "CSM_BACKEND": "cpu", "CSM_LOG_LEVEL": "info", "CSM_MAX_POLL_RECORDS": "7",
           "CSM_TOPIC_UPDATES": f"{p}.updates", "CSM_TOPIC_MATCHES": f"{p}.matches",
           "CSM_TOPIC_QUERIES": f"{p}.queries", "CSM_TOPIC_DEADLETTER": f"{p}.dead",
           "CSM_KAFKA_CONSUMER_GROUP": f"{p}.runtime", "PYTHONPATH": str(ROOT),
           "CSM_MATCHES_PARTITIONS": str(partitions),
           "CSM_PER_QUERY_DELIVERY": "1" if per_query else "0"}
    proc = Proc(env, port, tmp_path / "serve.log")
    proc.start()
    gfile = tmp_path / "g.graph"
    with gfile.open("w") as f:
        csm.write_graph(f, ds.initial)
    rng = np.random.default_rng(3)
    docs = update_docs(ds.stream)
    batches = np.array_split(np.arange(len(docs)), 60)
    kills = 0
    with CsmClient(f"http://127.0.0.1:{port}", timeout=30) as c:
        c.load_graph(gfile)
        for _, q in ds.queries:
            c.register(query_doc(q, list_matches=True, max_matches_per_update=100_000))
        # kills are tied to batches, not to wall time, so a fast machine cannot finish the
        # stream before they fire; each one lands while its batch is in flight or just after
        kill_at = set(rng.choice(np.arange(3, len(batches)), size=4, replace=False).tolist())
        timer: threading.Timer | None = None

        def reap_late_kill() -> int:
            """A timer that fired after its batch was accepted: restart before going on."""
            if timer is not None:
                timer.join()
            if proc.p is not None and proc.p.poll() is not None:
                proc.wait_dead()
                proc.start()
                return 1
            return 0

        i = 0
        while i < len(batches):
            if i in kill_at:
                kill_at.discard(i)
                kills += reap_late_kill()
                timer = threading.Timer(float(rng.uniform(0.0, 0.01)), proc.kill)
                timer.start()
            try:
                c.post_updates([docs[j] for j in batches[i]])
                i += 1
            except (httpx.TransportError, ApiError):
                # died before or after appending: either way, post again (the oracle reads
                # the log, so a repeated batch is just more updates)
                proc.wait_dead()
                kills += 1
                proc.start()
        kills += reap_late_kill()
        proc.kill()                     # one more, after the last append
        proc.wait_dead()
        kills += 1
        proc.start()
    assert kills == 5
    want = expected_from_log(broker.bootstrap, f"{p}.updates")
    got = published(broker.bootstrap, f"{p}.matches", len(want), timeout=120)
    assert len(got) == len(want)
    if per_query:   # each query's own deltas in order
        assert sorted(got) == sorted(want)
        for q in {k[0] for k in want}:
            assert [k for k in got if k[0] == q] == [k for k in want if k[0] == q]
    elif partitions == 1:
        assert got == want
    else:   # a query's deltas stay in its partition, in order
        for part in range(partitions):
            assert [k for k in got if k[0] % partitions == part] == \
                [k for k in want if k[0] % partitions == part]
    proc.kill()
    proc.wait_dead()
