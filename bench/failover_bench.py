"""Failover: kill -9 of a shard owner, to the first delta of its moved queries.

    python bench/failover_bench.py [--edges 1000000] [--updates 100000] [--rate 2000]

Two ``csm serve`` instances in one instance group on an in-memory broker started here,
four shards, eight standing queries (triangles and 2-paths) over a generated power-law
graph loaded through ``POST /v1/graph``. A feeder posts the stream to the survivor at a
steady rate; mid-stream the other instance is killed with SIGKILL. Failover is the kill
to the first delta of one of its queries published by the survivor (``published_at``
on the matches topic); catch-up is what the survivor reports for the take-over (updates
matched again, seconds). The 2-GPU scaling run needs a machine with two GPUs.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from aiokafka import AIOKafkaConsumer, TopicPartition  # noqa: E402

from bench._harness import write_section  # noqa: E402
from bench.recovery_bench import _dataset  # noqa: E402
from bench.service_bench import PATH, TRI, _machine  # noqa: E402
from service.client import CsmClient  # noqa: E402
from streams.broker import EmbeddedBroker, free_port  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
P = 4


def _serve(name: str, env: dict[str, str], log: Path) -> tuple[subprocess.Popen[bytes], str]:
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    e = {**env, "CSM_PORT": str(port), "CSM_INSTANCE_ID": name, "CSM_ADVERTISED_URL": url}
    with log.open("ab") as err:
        p = subprocess.Popen([sys.executable, "-m", "service.cli", "serve"], cwd=ROOT, env=e,
                             stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=err)
    return p, url


def _metric(url: str, name: str) -> float:
    for line in httpx.get(f"{url}/metrics", timeout=30).text.splitlines():
        if line.startswith(name + " "):
            return float(line.split()[1])
    return 0.0


def _wait(cond: Any, what: str, timeout: float = 600) -> None:
    deadline = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > deadline:
            raise TimeoutError(what)
        time.sleep(0.05)


class Watcher(threading.Thread):
    """Every matches record from now on: (partition, published_at, receipt time)."""

    def __init__(self, bootstrap: str, topic: str) -> None:
        super().__init__(daemon=True)
        self.bootstrap, self.topic = bootstrap, topic
        self.seen: list[tuple[int, float, float]] = []
        self.stop = threading.Event()
        self.started_ok = threading.Event()

    def run(self) -> None:
        asyncio.run(self._run())

    async def _run(self) -> None:
        c = AIOKafkaConsumer(bootstrap_servers=self.bootstrap, group_id=None,
                             fetch_max_wait_ms=5, auto_offset_reset="latest")
        await c.start()
        try:
            tps = [TopicPartition(self.topic, p) for p in range(P)]
            c.assign(tps)
            await c.seek_to_end(*tps)
            for tp in tps:
                await c.position(tp)
            self.started_ok.set()
            while not self.stop.is_set():
                for tp, recs in (await c.getmany(timeout_ms=50)).items():
                    now = time.time()
                    for r in recs:
                        self.seen.append((tp.partition, json.loads(r.value)["published_at"],
                                          now))
        finally:
            await c.stop()


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--edges", type=int, default=1_000_000)
    ap.add_argument("--updates", type=int, default=100_000)
    ap.add_argument("--rate", type=int, default=2000, help="updates per second posted")
    ap.add_argument("--post", type=int, default=500, help="updates per POST")
    ap.add_argument("--session-timeout-ms", type=int, default=3000)
    ap.add_argument("--backend", default="cpu")
    ap.add_argument("--out", type=Path, default=Path("docs/benchmarks.md"))
    a = ap.parse_args()
    _, work, gfile, docs = _dataset(a)   # the recovery benchmark's graph and stream
    with EmbeddedBroker() as broker:
        env = {**{k: v for k, v in os.environ.items() if not k.startswith("CSM_")},
               "CSM_KAFKA_BOOTSTRAP": broker.bootstrap, "CSM_BACKEND": a.backend,
               "CSM_LOG_LEVEL": "info", "CSM_INSTANCE_GROUP": "bench",
               "CSM_MATCHES_PARTITIONS": str(P), "CSM_TOPIC_SHARDS": "bench.shards",
               "CSM_GROUP_SESSION_TIMEOUT_MS": str(a.session_timeout_ms)}
        (pa, ua), (pb, ub) = (_serve(n, env, work / f"{n}.log") for n in ("a", "b"))
        for u in (ua, ub):
            with CsmClient(u) as c:
                c.wait_ready(600)
        with CsmClient(ua) as c:
            t0 = time.perf_counter()
            loaded = c.load_graph(gfile)
            load_s = time.perf_counter() - t0
            qids = [c.register(TRI if k % 2 else PATH)["id"] for k in range(2 * P)]
        _wait(lambda: _metric(ua, "csm_owned_shards") == _metric(ub, "csm_owned_shards") == 2,
              "two shards each")
        mine = [q for q in qids if httpx.get(f"{ua}/v1/queries/{q}", timeout=30)
                .status_code == 200]
        parts = {q % P for q in mine}
        watch = Watcher(broker.bootstrap, "csm.matches")
        watch.start()
        watch.started_ok.wait(60)
        done = threading.Event()

        def feed() -> None:
            with CsmClient(ub) as c:
                t = time.perf_counter()
                for k, i in enumerate(range(0, len(docs), a.post)):
                    c.post_updates(docs[i:i + a.post])
                    ahead = t + (k + 1) * a.post / a.rate - time.perf_counter()
                    if ahead > 0:
                        time.sleep(ahead)
            done.set()

        feeder = threading.Thread(target=feed, daemon=True)
        feeder.start()
        half = len(docs) // a.post // 2 * a.post / a.rate   # seconds into the stream
        time.sleep(half)                                    # a fixed point of the stream
        before = (_metric(ub, "csm_catchup_updates_total"),
                  _metric(ub, "csm_catchup_seconds_sum"))
        t_kill = time.time()
        os.kill(pa.pid, signal.SIGKILL)
        pa.wait(30)
        _wait(lambda: any(p in parts and pub > t_kill for p, pub, _ in watch.seen),
              "a delta of a moved query", 120)
        first = min(pub for p, pub, _ in watch.seen if p in parts and pub > t_kill)
        failover = first - t_kill
        _wait(lambda: _metric(ub, "csm_owned_shards") == P, "all shards on b")
        caught = _metric(ub, "csm_catchup_updates_total") - before[0]
        caught_s = _metric(ub, "csm_catchup_seconds_sum") - before[1]
        done.wait(600)
        watch.stop.set()
        pb.send_signal(signal.SIGTERM)
        pb.wait(60)
    took = re.findall(r"took shards .* (\d+) updates matched again from offset (\d+) in "
                      r"([0-9.]+) s \(progress and tails ([0-9.]+), registering ([0-9.]+), "
                      r"matching and sending ([0-9.]+), acks and commit ([0-9.]+)\)",
                      (work / "b.log").read_text())
    parts_s = took[-1][3:] if took else ("?",) * 4
    print(f"graph {loaded}, load {load_s:.1f} s, failover {failover:.2f} s, catch-up "
          f"{caught:.0f} updates in {caught_s:.3f} s, took {took}")
    rate = caught / caught_s if caught_s > 0 else 0.0
    write_section(a.out, "<!-- failover-bench:begin -->", "<!-- failover-bench:end -->", [
        "## Failover between instances",
        "",
        f"`python bench/failover_bench.py --edges {a.edges} --updates {a.updates} --rate "
        f"{a.rate} --post {a.post} --session-timeout-ms {a.session_timeout_ms} --backend "
        f"{a.backend}` on {_machine()} ({os.cpu_count()} cores, both instances and the "
        "broker on it).",
        "",
        f"Two instances in one group, {P} shards, {2 * P} standing queries (triangles and "
        "2-paths), the stream posted to one instance at a steady rate; mid-stream the other "
        "(owner of two shards) is killed with SIGKILL. Failover is the kill to the first "
        "delta of one of its queries published by the survivor; catch-up is the survivor's "
        "take-over (its log and `csm_catchup_*` metrics). Detection is the group session "
        "timeout: a dead member's partitions move only once it has missed its heartbeats "
        "for that long, and the embedded broker's rebalance adds about half of it.",
        "",
        "| graph | session timeout | failover (kill -9 to first moved delta) "
        "| catch-up updates | catch-up time | catch-up rate |",
        "|---|---|---|---|---|---|",
        f"| {loaded['vertices']:,} vertices, {loaded['edges']:,} edges "
        f"| {a.session_timeout_ms / 1000:.0f} s | {failover:.2f} s | {caught:,.0f} "
        f"| {caught_s:.3f} s | {rate:,.0f} updates/s |",
        "",
        f"The take-over's parts: shard progress and partition tails read {parts_s[0]} s, "
        f"queries registered {parts_s[1]} s, missed updates matched and their deltas sent "
        f"{parts_s[2]} s, acks and commit {parts_s[3]} s. The rest of the failover is the "
        "session timeout (detection) and the rebalance.",
        "",
        "The scaling run (two instances on two GPUs of one host against one) needs a "
        "two-GPU machine, which was not lent this session: not measured yet.",
    ])


if __name__ == "__main__":
    main()
