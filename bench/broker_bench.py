"""The embedded broker's storage: what one acknowledged produce and a produce-then-fetch
cost on memory, on our object server with fsync, and on it without fsync.

    python bench/broker_bench.py [--n 300] [--out docs/benchmarks.md]

One producer (acks=all, ``send_and_wait`` of 500-byte records, one at a time) and one
consumer (``fetch_max_wait_ms=5``, the runtime's setting) on a fresh broker each.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import numpy as np
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench._harness import write_section  # noqa: E402
from bench.service_bench import _machine  # noqa: E402
from streams.broker import EmbeddedBroker  # noqa: E402
from streams.durable import DurableBroker  # noqa: E402


@contextmanager
def _broker(kind: str) -> Iterator[str]:
    if kind == "memory":
        with EmbeddedBroker() as b:
            yield b.bootstrap
        return
    d = Path(tempfile.mkdtemp(prefix="csm-broker-bench-"))
    b = DurableBroker(d, unsynced="." if kind == "objstore, no fsync" else None).start()
    try:
        yield b.bootstrap
    finally:
        b.stop()


async def _measure(bootstrap: str, n: int) -> tuple[np.ndarray, np.ndarray]:  # type: ignore[type-arg]
    p = AIOKafkaProducer(bootstrap_servers=bootstrap, acks="all")
    await p.start()
    await p.send_and_wait("bench", b"x", partition=0)
    c = AIOKafkaConsumer(bootstrap_servers=bootstrap, group_id=None, fetch_max_wait_ms=5)
    await c.start()
    tp = TopicPartition("bench", 0)
    c.assign([tp])
    c.seek(tp, 1)
    produce, both = [], []
    try:
        for _ in range(n):
            t0 = time.perf_counter()
            await p.send_and_wait("bench", b"x" * 500, partition=0)
            t1 = time.perf_counter()
            while not await c.getmany(tp, timeout_ms=1000):
                pass
            produce.append(t1 - t0)
            both.append(time.perf_counter() - t0)
    finally:
        await p.stop()
        await c.stop()
    return np.array(produce) * 1e3, np.array(both) * 1e3


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=300)
    ap.add_argument("--out", type=Path, default=Path("docs/benchmarks.md"))
    a = ap.parse_args()
    lines = ["## Embedded broker storage", "",
             f"`python bench/broker_bench.py --n {a.n}` on {_machine()}: one producer "
             "(acks=all, one 500-byte record at a time) and one consumer "
             "(`fetch_max_wait_ms=5`) on a fresh broker.", "",
             "| storage | produce p50 | produce p99 | produce + fetch p50 | produce + fetch p99 |",
             "|---|---|---|---|---|"]
    for kind in ("memory", "objstore, fsync (the default)", "objstore, no fsync"):
        with _broker(kind) as boot:
            prod, both = asyncio.run(_measure(boot, a.n))
        lines.append(f"| {kind} | {np.percentile(prod, 50):.2f} ms | "
                     f"{np.percentile(prod, 99):.2f} ms | {np.percentile(both, 50):.2f} ms | "
                     f"{np.percentile(both, 99):.2f} ms |")
        print(lines[-1], flush=True)
    write_section(a.out, "<!-- broker-bench:begin -->", "<!-- broker-bench:end -->", lines)


if __name__ == "__main__":
    main()
