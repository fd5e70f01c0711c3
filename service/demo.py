"""The demo: embedded broker, the service, a generated graph, standing queries, a stream
of updates over REST, the deltas read back from the matches topic, and a latency summary."""

from __future__ import annotations

import json
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np

from streams import GenConfig, generate
from streams.codec import SEQ_STRIDE, doc_from_query, docs_from_batch
from streams.formats import csm

from .client import ApiError, CsmClient, read_topic
from .serve import ServerThread
from .settings import Settings

__all__ = ["DemoReport", "drive", "run_demo"]


@dataclass(frozen=True, slots=True)
class DemoReport:
    backend: str
    kafka_bootstrap: str
    graph_vertices: int
    graph_edges: int
    queries: list[dict[str, Any]]
    updates: int
    seconds: float
    deltas: int
    positive: int
    negative: int
    latency_p50_ms: float
    latency_p99_ms: float

    def as_dict(self) -> dict[str, Any]:
        return {f: getattr(self, f) for f in self.__slots__}


def run_demo(gen: GenConfig, settings: Settings, batch_size: int = 100, rate: float = 1000.0,
             show: int = 10, echo: Callable[[str], None] = lambda _: None) -> DemoReport:
    """Start the service in this process and :func:`drive` it."""
    with ServerThread(settings) as srv, srv.client() as c:
        echo(f"service {srv.url}")
        return drive(c, gen, settings.topic_matches, batch_size, rate, show, echo)


def drive(c: CsmClient, gen: GenConfig, matches_topic: str = "csm.matches",
          batch_size: int = 100, rate: float = 1000.0, show: int = 10,
          echo: Callable[[str], None] = lambda _: None, rounds: int | None = 1) -> DemoReport:
    """Load the generated graph, register its queries and post its stream at ``rate``
    updates/s (0: as fast as the service takes it), ``rounds`` times (None: until stopped),
    each round a new stream of the same shape; then read the deltas back from Kafka.

    A service whose graph is already loaded (a restarted demo) keeps it and gets the
    streams all the same: updates to edges that exist or do not are simply ignored.
    """
    ds = generate(gen)
    info = c.wait_ready()
    echo(f"Kafka bootstrap {info['kafka_bootstrap']}, backend {info['backend']}")
    loaded = _load(c, ds.initial, echo)
    queries = []
    for shape, q in ds.queries:
        doc = doc_from_query(q, name=shape, list_matches=True, max_matches_per_update=3)
        queries.append(c.register(doc))
        echo(f"query {queries[-1]['id']} ({shape}): {q.n} vertices, {len(q.edges)} edges")
    t0 = time.perf_counter()
    posted = last = 0
    rnd = 0
    while rounds is None or rnd < rounds:
        stream = ds.stream if rnd == 0 else generate(replace(gen, seed=gen.seed + rnd)).stream
        last = _post(c, docs_from_batch(stream), batch_size, rate)
        posted += len(stream)
        rnd += 1
    while c.wait_ready()["offset"] * SEQ_STRIDE <= last:   # the runtime has caught up
        time.sleep(0.01)
    seconds = time.perf_counter() - t0
    ours = {q["id"] for q in queries}
    events = [e for e in (json.loads(r.value) for r in read_topic(info["kafka_bootstrap"],
                                                                  matches_topic))
              if e["query"] in ours]
    for e in events[:show]:
        m = f" e.g. {e['matches'][0]}" if e["matches"] else ""
        echo(f"  seq {e['seq']}: query {e['query']} {e['op']} ({e['src']}, {e['dst']}) "
             f"{'+' if e['sign'] > 0 else '-'}{e['count']}{m}")
    lat = np.array([e["published_at"] - e["arrived_at"] for e in events if e["op"] != "initial"])
    pct = (lambda p: float(np.percentile(lat, p) * 1e3)) if len(lat) else (lambda p: 0.0)
    return DemoReport(
        backend=info["backend"], kafka_bootstrap=info["kafka_bootstrap"],
        graph_vertices=loaded["vertices"], graph_edges=loaded["edges"], queries=queries,
        updates=posted, seconds=seconds, deltas=len(events),
        positive=sum(e["count"] for e in events if e["sign"] > 0),
        negative=sum(e["count"] for e in events if e["sign"] < 0),
        latency_p50_ms=pct(50), latency_p99_ms=pct(99))


def _load(c: CsmClient, graph: Any, echo: Callable[[str], None]) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="csm-demo-") as tmp:
        gfile = Path(tmp) / "initial.graph"
        with gfile.open("w") as f:
            csm.write_graph(f, graph)
        try:
            loaded = c.load_graph(gfile)
        except ApiError as exc:
            if exc.status != 409:
                raise
            g = c.graph()
            echo(f"graph already loaded: {g['vertices']:,} vertices, {g['edges']:,} edges")
            return g
    echo(f"graph: {loaded['vertices']:,} vertices, {loaded['edges']:,} edges")
    return dict(loaded)


def _post(c: CsmClient, docs: list[Any], batch_size: int, rate: float) -> int:
    """Post ``docs`` paced at ``rate``; the last sequence number."""
    t0 = time.perf_counter()
    last = -1
    for i in range(0, len(docs), batch_size):
        if rate > 0:
            time.sleep(max(0.0, t0 + i / rate - time.perf_counter()))
        last = c.post_updates(docs[i:i + batch_size])["last_seq"]
    return last
