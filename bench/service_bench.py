"""Streaming-service benchmark: ingest through REST and Kafka, response time against rate.

    python bench/service_bench.py [--backend cpu|gpu|auto] [--durable] [--out docs/benchmarks.md]

Everything runs on this machine: the embedded broker (in memory, shared by the runs; with
``--durable`` the default ``csm serve`` setup instead: each run's own state directory, Tansu
on our object server, every acknowledged write fsynced), the service (one process, one
engine), and the load generator. Response time is the service's own: arrival of an update
message at the service to the broker's ack of its delta (published_at - arrived_at in each
delta, the span csm_response_seconds measures).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import platform
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
from aiokafka import AIOKafkaProducer

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench._harness import write_section  # noqa: E402
from service.client import read_topic  # noqa: E402
from service.serve import ServerThread  # noqa: E402
from service.settings import Settings  # noqa: E402
from streams import GenConfig, generate  # noqa: E402
from streams.broker import EmbeddedBroker, free_port  # noqa: E402
from streams.codec import (  # noqa: E402
    SEQ_STRIDE,
    docs_from_batch,
    encode_updates,
    updates_from_docs,
)

TRI = {"vertices": [{"id": 0}, {"id": 1}, {"id": 2}],
       "edges": [{"src": 0, "dst": 1}, {"src": 1, "dst": 2}, {"src": 0, "dst": 2}]}
#: a 2-path: nearly every applied insertion or deletion has a delta, so nearly every update
#: is timed (the triangle alone leaves few samples at low rates)
PATH = {"vertices": [{"id": 0}, {"id": 1}, {"id": 2}],
        "edges": [{"src": 0, "dst": 1}, {"src": 1, "dst": 2}]}


def _stream(n: int, seed: int) -> list[dict]:  # type: ignore[type-arg]
    ds = generate(GenConfig(vertices=max(n // 4, 1000), edges=n, labels=4, queries=0,
                            insert_ratio=0.9, delete_ratio=0.05, seed=seed))
    return docs_from_batch(ds.stream)


def _service(broker: EmbeddedBroker | None, backend: str, tag: str) -> ServerThread:
    """On the shared in-memory broker, or (None) durable on a fresh state directory."""
    where: dict[str, object] = ({"kafka_bootstrap": broker.bootstrap} if broker else
                                {"state_dir": Path(tempfile.mkdtemp(prefix="csm-bench-"))})
    return ServerThread(Settings(
        backend=backend, port=free_port(),
        topic_updates=f"{tag}.u", topic_matches=f"{tag}.m", topic_queries=f"{tag}.q",
        topic_deadletter=f"{tag}.d", kafka_consumer_group=f"{tag}.g",
        log_level="warning", **where)).start()  # type: ignore[arg-type]


def _bootstrap(srv: ServerThread) -> str:
    with srv.client() as c:
        return str(c.wait_ready()["kafka_bootstrap"])


def _caught_up(srv: ServerThread, last_seq: int) -> None:
    with srv.client() as c:
        while c.wait_ready()["offset"] * SEQ_STRIDE <= last_seq:
            time.sleep(0.02)   # a tighter poll steals the service's CPU


def rest_ingest(broker: EmbeddedBroker | None, backend: str, docs: list[dict],  # type: ignore[type-arg]
                batch: int = 1000, clients: int = 4) -> tuple[float, float]:
    srv = _service(broker, backend, f"rest{time.time_ns()}")
    try:
        with srv.client() as c:
            c.register(TRI)
        chunks = [docs[i:i + batch] for i in range(0, len(docs), batch)]
        clis = [srv.client() for _ in range(clients)]
        t0 = time.perf_counter()
        with ThreadPoolExecutor(clients) as ex:
            lasts = list(ex.map(lambda k: clis[k % clients].post_updates(chunks[k])["last_seq"],
                                range(len(chunks))))
        accepted = time.perf_counter() - t0
        _caught_up(srv, max(lasts))
        done = time.perf_counter() - t0
        for c in clis:
            c.http.close()
        return len(docs) / accepted, len(docs) / done
    finally:
        srv.stop()


def kafka_ingest(broker: EmbeddedBroker | None, backend: str, docs: list[dict],  # type: ignore[type-arg]
                 per_message: int = 1000, form: str = "updates") -> tuple[float, float]:
    """``form``: the REST-like ``updates`` objects, or the ``columns`` fast path."""
    tag = f"kafka{time.time_ns()}"
    srv = _service(broker, backend, tag)
    try:
        with srv.client() as c:
            c.register(TRI)
        cuts = [docs[i:i + per_message] for i in range(0, len(docs), per_message)]
        values = ([json.dumps({"updates": c}).encode() for c in cuts] if form == "updates"
                  else [encode_updates(updates_from_docs(c)) for c in cuts])

        async def produce() -> int:
            p = AIOKafkaProducer(bootstrap_servers=_bootstrap(srv), acks="all", linger_ms=5,
                                 max_batch_size=4 << 20, max_request_size=8 << 20)
            await p.start()
            try:
                futs = [await p.send(f"{tag}.u", v, partition=0) for v in values]
                return max([(await f).offset for f in futs])
            finally:
                await p.stop()

        t0 = time.perf_counter()
        last = asyncio.run(produce())
        produced = time.perf_counter() - t0
        _caught_up(srv, last * SEQ_STRIDE)
        done = time.perf_counter() - t0
        return len(docs) / produced, len(docs) / done
    finally:
        srv.stop()


def response_time(broker: EmbeddedBroker | None, backend: str, docs: list[dict],  # type: ignore[type-arg]
                  rate: float, seconds: float = 6.0) -> tuple[float, float, int, float]:
    tag = f"lat{int(rate)}{time.time_ns()}"
    srv = _service(broker, backend, tag)
    try:
        with srv.client() as c:
            c.register(TRI)
            c.register(PATH)
            tick = 0.01 if rate >= 1000 else 1.0 / rate
            per = max(1, int(round(rate * tick)))
            n = min(len(docs), int(rate * seconds))
            t0 = time.perf_counter()
            last = -1
            for k, i in enumerate(range(0, n, per)):
                time.sleep(max(0.0, t0 + k * tick - time.perf_counter()))
                last = c.post_updates(docs[i:i + per])["last_seq"]
            achieved = n / (time.perf_counter() - t0)
        _caught_up(srv, last)
        ev = [json.loads(r.value) for r in read_topic(_bootstrap(srv), f"{tag}.m")]
        lat = np.array([e["published_at"] - e["arrived_at"] for e in ev]) * 1e3
        return float(np.percentile(lat, 50)), float(np.percentile(lat, 99)), len(lat), achieved
    finally:
        srv.stop()


def _machine() -> str:
    try:
        import cupy
        name = cupy.cuda.runtime.getDeviceProperties(0)["name"].decode()
        return f"{platform.node() or 'a machine'} with an {name}"
    except Exception:  # noqa: BLE001 - no CuPy or no device: a CPU-only machine
        return platform.node() or "this machine"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--backend", default="cpu")
    ap.add_argument("--updates", type=int, default=200_000)
    ap.add_argument("--durable", action="store_true",
                    help="the default csm serve setup: durable embedded broker per run")
    ap.add_argument("--out", type=Path, default=Path("docs/benchmarks.md"))
    args = ap.parse_args()
    docs = _stream(args.updates, 1)
    flag, kind = (" --durable", "durable embedded broker (the default: Tansu on our object "
                  "server, writes fsynced under a state directory)") if args.durable else \
        ("", "in-memory embedded Tansu broker (`--ephemeral`)")
    lines = [f"## Streaming service ({args.backend} backend{', durable' if args.durable else ''})",
             "", f"`python bench/service_bench.py --backend {args.backend}{flag}` on "
             f"{_machine()} ({os.cpu_count()} cores), {kind}, "
             "service and load generator on the same machine; one standing triangle "
             f"query; a generated power-law stream of {len(docs):,} updates (90% inserts).", "",
             "| path | accepted (updates/s) | processed (updates/s) |", "|---|---|---|"]
    with contextlib.nullcontext(None) if args.durable else EmbeddedBroker() as broker:
        a, d = rest_ingest(broker, args.backend, docs)
        lines.append(f"| REST, batches of 1,000, 4 clients | {a:,.0f} | {d:,.0f} |")
        print(lines[-1], flush=True)
        for form in ("updates", "columns"):
            a, d = kafka_ingest(broker, args.backend, docs, form=form)
            lines.append(f"| Kafka, 1,000 updates per message ({form} form) | {a:,.0f} | "
                         f"{d:,.0f} |")
            print(lines[-1], flush=True)
        lines += ["", "Response time, arrival to the broker's ack of the delta "
                  "(REST posts every 10 ms; a 2-path query added so that nearly every "
                  "update has a delta to time):", "",
                  "| offered rate | achieved | deltas timed | p50 | p99 |", "|---|---|---|---|---|"]
        for rate in (1000, 5000, 50000):
            p50, p99, n, got = response_time(broker, args.backend, docs, rate)
            lines.append(f"| {rate:,}/s | {got:,.0f}/s | {n:,} | {p50:.1f} ms | {p99:.1f} ms |")
            print(lines[-1], flush=True)
    mark = f"service-bench-{args.backend}{'-durable' if args.durable else ''}"
    write_section(args.out, f"<!-- {mark}:begin -->", f"<!-- {mark}:end -->", lines)


if __name__ == "__main__":
    main()
