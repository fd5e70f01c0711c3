"""The demo: embedded broker, the service, a generated graph, standing queries, a stream
of updates over REST, the deltas read back from the matches topic, and a latency summary."""

from __future__ import annotations

import json
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from streams import GenConfig, generate
from streams.codec import SEQ_STRIDE, doc_from_query, docs_from_batch
from streams.formats import csm

from .client import read_topic
from .serve import ServerThread
from .settings import Settings

__all__ = ["DemoReport", "run_demo"]


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
    """Post the stream at ``rate`` updates/s (0: as fast as the service takes it)."""
    ds = generate(gen)
    with ServerThread(settings) as srv, srv.client() as c, \
            tempfile.TemporaryDirectory(prefix="csm-demo-") as tmp:
        info = c.wait_ready()
        echo(f"service {srv.url}, Kafka bootstrap {info['kafka_bootstrap']}, "
             f"backend {info['backend']}")
        gfile = Path(tmp) / "initial.graph"
        with gfile.open("w") as f:
            csm.write_graph(f, ds.initial)
        loaded = c.load_graph(gfile)
        echo(f"graph: {loaded['vertices']:,} vertices, {loaded['edges']:,} edges")
        queries = []
        for shape, q in ds.queries:
            doc = doc_from_query(q, name=shape, list_matches=True, max_matches_per_update=3)
            queries.append(c.register(doc))
            echo(f"query {queries[-1]['id']} ({shape}): {q.n} vertices, {len(q.edges)} edges")
        docs = docs_from_batch(ds.stream)
        t0 = time.perf_counter()
        last = -1
        for i in range(0, len(docs), batch_size):
            if rate > 0:
                time.sleep(max(0.0, t0 + i / rate - time.perf_counter()))
            last = c.post_updates(docs[i:i + batch_size])["last_seq"]
        while c.wait_ready()["offset"] * SEQ_STRIDE <= last:   # the runtime has caught up
            time.sleep(0.01)
        seconds = time.perf_counter() - t0
        events = [json.loads(r.value) for r in read_topic(info["kafka_bootstrap"],
                                                          settings.topic_matches)]
    for e in events[:show]:
        m = f" e.g. {e['matches'][0]}" if e["matches"] else ""
        echo(f"  seq {e['seq']}: query {e['query']} {e['op']} ({e['src']}, {e['dst']}) "
             f"{'+' if e['sign'] > 0 else '-'}{e['count']}{m}")
    lat = np.array([e["published_at"] - e["arrived_at"] for e in events if e["op"] != "initial"])
    pct = (lambda p: float(np.percentile(lat, p) * 1e3)) if len(lat) else (lambda p: 0.0)
    return DemoReport(
        backend=info["backend"], kafka_bootstrap=info["kafka_bootstrap"],
        graph_vertices=loaded["vertices"], graph_edges=loaded["edges"], queries=queries,
        updates=len(docs), seconds=seconds, deltas=len(events),
        positive=sum(e["count"] for e in events if e["sign"] > 0),
        negative=sum(e["count"] for e in events if e["sign"] < 0),
        latency_p50_ms=pct(50), latency_p99_ms=pct(99))

