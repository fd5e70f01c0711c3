"""Crash recovery: how long a killed service takes to serve again on a large graph.

    python bench/recovery_bench.py [--edges 1000000] [--updates 200000] [--backend cpu]
    python bench/recovery_bench.py --durable [--kill-broker] ...

Without ``--durable`` the service runs on an in-memory broker started here (an "external
cluster" that survives the kill) and takes no snapshots: recovery replays the whole log.
With ``--durable`` it runs as ``csm serve`` does by default (its own durable embedded
broker under a fresh state directory, snapshots every ``--snapshot-every`` records) and
recovery restores the newest snapshot and replays the log after it; ``--kill-broker``
kills the broker processes too (a machine restart), so the restart also starts a new
broker on the same files.

A service subprocess gets an initial power-law graph through ``POST /v1/graph``, a
triangle query and a stream of updates through Kafka; once it has caught up it is
killed with SIGKILL and started again. Recovery is the time from the restart to
``/readyz`` answering ready (the graph and queries rebuilt from the topics), which the
issue bounds at one minute for a million-edge graph.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench._harness import write_section  # noqa: E402
from bench.service_bench import TRI, _machine  # noqa: E402
from service.client import CsmClient  # noqa: E402
from streams import GenConfig, generate  # noqa: E402
from streams.broker import EmbeddedBroker, free_port  # noqa: E402
from streams.codec import SEQ_STRIDE, docs_from_batch  # noqa: E402
from streams.formats import csm  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]


def _start(env: dict[str, str], log: Path) -> tuple[subprocess.Popen[bytes], float]:
    t0 = time.perf_counter()
    with log.open("ab") as err:
        p = subprocess.Popen([sys.executable, "-m", "service.cli", "serve"], cwd=ROOT, env=env,
                             stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=err)
    with CsmClient(f"http://127.0.0.1:{env['CSM_PORT']}") as c:
        c.wait_ready(600)
    return p, time.perf_counter() - t0


def _dataset(a: argparse.Namespace) -> tuple[Any, Path, Path, list[dict[str, Any]]]:
    """The generated graph (written as a CSM file in a fresh folder) and stream."""
    total = a.edges + a.updates
    ds = generate(GenConfig(vertices=total // 8, edges=total, labels=4, queries=0,
                            insert_ratio=a.updates / total * 0.9,
                            delete_ratio=a.updates / total * 0.1, seed=5))
    work = Path(tempfile.mkdtemp(prefix="csm-recovery-"))
    gfile = work / "graph.csm"
    with gfile.open("w") as f:
        csm.write_graph(f, ds.initial)
    return ds, work, gfile, docs_from_batch(ds.stream)


def _fill(env: dict[str, str], gfile: Path, docs: list[dict[str, Any]],
          post: int) -> tuple[float, dict[str, Any]]:
    """Load the graph, register the triangle, post the stream, wait until it is applied."""
    with CsmClient(f"http://127.0.0.1:{env['CSM_PORT']}") as c:
        t0 = time.perf_counter()
        c.load_graph(gfile)
        c.register(TRI)
        last = -1
        for i in range(0, len(docs), post):
            last = c.post_updates(docs[i:i + post])["last_seq"]
        while c.wait_ready()["offset"] * SEQ_STRIDE <= last:
            time.sleep(0.05)
        return time.perf_counter() - t0, c.graph()


def _crash_and_recover(p: subprocess.Popen[bytes], env: dict[str, str], log: Path,
                       size: dict[str, Any], also: Callable[[], None] | None = None) -> float:
    """kill -9 (and ``also``), start again: the seconds to ready; the graph must match."""
    os.kill(p.pid, signal.SIGKILL)
    p.wait(30)
    if also is not None:
        also()
    p, warm = _start(env, log)
    with CsmClient(f"http://127.0.0.1:{env['CSM_PORT']}") as c:
        after = c.graph()
    p.send_signal(signal.SIGTERM)
    p.wait(60)
    assert after == size, (after, size)
    return warm


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--edges", type=int, default=1_000_000)
    ap.add_argument("--updates", type=int, default=200_000)
    ap.add_argument("--post", type=int, default=1000, help="updates per POST")
    ap.add_argument("--backend", default="cpu")
    ap.add_argument("--out", type=Path, default=Path("docs/benchmarks.md"))
    ap.add_argument("--durable", action="store_true")
    ap.add_argument("--kill-broker", action="store_true")
    ap.add_argument("--snapshot-every", type=int, default=1000)
    a = ap.parse_args()
    if a.durable:
        return durable(a)
    ds, work, gfile, docs = _dataset(a)
    log = work / "service.log"
    with EmbeddedBroker() as broker:
        env = {**os.environ, "CSM_KAFKA_BOOTSTRAP": broker.bootstrap,
               "CSM_PORT": str(free_port()), "CSM_BACKEND": a.backend, "CSM_LOG_LEVEL": "info"}
        p, cold = _start(env, log)
        fill, size = _fill(env, gfile, docs, a.post)
        warm = _crash_and_recover(p, env, log, size)
    logged = len(ds.initial.src) + len(docs)
    text = log.read_text()
    replay = re.findall(r"replayed (\d+) records in ([0-9.]+) s", text)
    print(f"graph {size}, fill {fill:.1f} s, cold start {cold:.1f} s, "
          f"recovery {warm:.1f} s, replay {replay}")
    write_section(a.out, "<!-- recovery-bench:begin -->", "<!-- recovery-bench:end -->", [
        "## Crash recovery",
        "",
        f"`python bench/recovery_bench.py --edges {a.edges} --updates {a.updates} "
        f"--post {a.post} --backend {a.backend}` on {_machine()}.",
        "",
        "A service subprocess on the embedded broker loads a generated power-law graph "
        "through `POST /v1/graph`, registers a triangle query and takes a stream of updates "
        "(90% insertions, posted in batches); once it has caught up it is killed with "
        "SIGKILL and restarted. "
        "Recovery is restart to `/readyz` ready, the graph and queries rebuilt by replaying "
        "the updates log (target: under one minute for a million-edge graph).",
        "",
        "| graph after the stream | load + stream | cold start | recovery after kill -9 "
        "| of which log replay |",
        "|---|---|---|---|---|",
        f"| {size['vertices']:,} vertices, {size['edges']:,} edges | {fill:.1f} s "
        f"| {cold:.1f} s | {warm:.1f} s | {replay[-1][1] if replay else '?'} s "
        f"({int(replay[-1][0]) if replay else 0:,} records) |",
        "",
        f"The replay rebuilt the graph from {logged:,} logged edges and updates at "
        f"{logged / float(replay[-1][1]) if replay else 0:,.0f} per second, so recovery "
        "stays under a minute for logs of up to about "
        f"{60 * logged / float(replay[-1][1]) / 1e6 if replay else 0:.0f} million updates on "
        "this machine; the service takes no snapshots (a log that grows past that would "
        "need them, or a compacted initial-graph topic).",
    ])


def durable(a: argparse.Namespace) -> None:
    _, work, gfile, docs = _dataset(a)
    log, state = work / "service.log", work / "state"
    env = {k: v for k, v in os.environ.items() if not k.startswith("CSM_")}
    env.update(CSM_STATE_DIR=str(state), CSM_PORT=str(free_port()), CSM_BACKEND=a.backend,
               CSM_LOG_LEVEL="info", CSM_SNAPSHOT_EVERY=str(a.snapshot_every))
    p, cold = _start(env, log)
    fill, size = _fill(env, gfile, docs, a.post)

    def kill_broker() -> None:
        run = json.loads((state / "broker" / "broker.json").read_text())
        for pid in (run["tansu"]["pid"], run["objstore"]["pid"]):
            os.kill(pid, signal.SIGKILL)

    warm = _crash_and_recover(p, env, log, size, kill_broker if a.kill_broker else None)
    text = log.read_text()
    restored = re.findall(r"restored the snapshot at offset (\d+)", text)
    replayed = re.findall(r"replaying (\d+) update-log records", text)
    snaps = re.findall(r"snapshot at offset (\d+) in ([0-9.]+) s \((\d+) log batches", text)
    snap_mb = sum(f.stat().st_size for f in (state / "snapshots").rglob("*.npz")) / 2 ** 20 / \
        max(len(list((state / "snapshots").rglob("*.npz"))), 1)
    print(f"graph {size}, fill {fill:.1f} s, cold {cold:.1f} s, recovery {warm:.1f} s, "
          f"restored {restored[-1:]}, replayed {replayed[-1:]}, snapshots {snaps}")
    how = "the service and its broker processes (a machine restart)" if a.kill_broker \
        else "the service (its broker processes keep running and are reattached)"
    mark = "recovery-bench-durable" + ("-broker" if a.kill_broker else "")
    write_section(a.out, f"<!-- {mark}:begin -->", f"<!-- {mark}:end -->", [
        f"## Crash recovery, durable default{', broker killed too' if a.kill_broker else ''}",
        "",
        f"`python bench/recovery_bench.py --durable{' --kill-broker' if a.kill_broker else ''}"
        f" --edges {a.edges} --updates {a.updates} --post {a.post} --backend {a.backend}` on "
        f"{_machine()} ({os.cpu_count()} cores).",
        "",
        "`csm serve` with no Kafka settings (durable embedded broker, snapshots every "
        f"{a.snapshot_every:,} update-log records or 500,000 updates) loads the graph "
        "through `POST /v1/graph`, "
        "registers a triangle query and takes the stream; once caught up, kill -9 of "
        f"{how}, then `csm serve` again. Recovery is restart to `/readyz` ready; "
        "graph and queries are checked equal.",
        "",
        "| graph after the stream | load + stream | recovery after kill -9 | snapshot restored "
        "| log records replayed | snapshot write (size) |",
        "|---|---|---|---|---|---|",
        f"| {size['vertices']:,} vertices, {size['edges']:,} edges | {fill:.1f} s "
        f"| {warm:.1f} s | offset {restored[-1] if restored else 'none'} "
        f"| {replayed[-1] if replayed else '?'} "
        f"| {snaps[-1][1] if snaps else '?'} s ({snap_mb:.0f} MiB) |",
    ])


if __name__ == "__main__":
    main()
