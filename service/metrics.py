"""Every metric the service exports, in one place (Prometheus naming: base units, _total).

One :class:`Metrics` per app, each with its own registry, so several apps can live in one
process (tests). Query ids are label values only while the query is registered: the
runtime drops a query's series when it is deleted, which bounds their number. Label sets
known in advance (operations, outcomes, rejection reasons) are exported at zero from the
start, so dashboards and alerts see a series before the first event, not a gap.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterable, Iterator
from importlib.metadata import PackageNotFoundError, version
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

__all__ = ["Metrics"]

_LATENCY = (0.0005, 0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1.0, 2.0, 5.0, 10.0)


def _version() -> str:
    try:
        return version("csm-service")
    except PackageNotFoundError:
        return "unknown"


class _Nvml(Collector):
    """GPU utilisation and memory through NVML, read at scrape time; nothing without a GPU."""

    def __init__(self) -> None:
        self._handles: list[Any] = []
        with contextlib.suppress(Exception):
            import pynvml
            pynvml.nvmlInit()
            self._nvml = pynvml
            self._handles = [pynvml.nvmlDeviceGetHandleByIndex(i)
                             for i in range(pynvml.nvmlDeviceGetCount())]

    def collect(self) -> Iterator[GaugeMetricFamily]:
        if not self._handles:
            return
        util = GaugeMetricFamily("csm_gpu_utilization_ratio",
                                 "Share of time a kernel ran on the GPU (NVML)", labels=["gpu"])
        used = GaugeMetricFamily("csm_gpu_memory_used_bytes", "GPU memory in use (NVML)",
                                 labels=["gpu"])
        total = GaugeMetricFamily("csm_gpu_memory_total_bytes", "GPU memory (NVML)",
                                  labels=["gpu"])
        for i, h in enumerate(self._handles):
            with contextlib.suppress(Exception):
                u = self._nvml.nvmlDeviceGetUtilizationRates(h)
                m = self._nvml.nvmlDeviceGetMemoryInfo(h)
                util.add_metric([str(i)], u.gpu / 100.0)
                used.add_metric([str(i)], float(m.used))
                total.add_metric([str(i)], float(m.total))
        yield from (util, used, total)


class Metrics:
    def __init__(self, *, backend: str = "cpu", ops: Iterable[str] = (),
                 statuses: Iterable[str] = (), reasons: Iterable[str] = ()) -> None:
        r = self.registry = CollectorRegistry()
        self.info = Gauge("csm_build_info", "Always 1: the version and the matching backend",
                          ["version", "backend"], registry=r)
        self.info.labels(_version(), backend).set(1)
        self.response = Histogram(
            "csm_response_seconds", "Arrival of an update message at the service to its "
            "deltas acknowledged by the broker", buckets=_LATENCY, registry=r)
        self.batch = Histogram("csm_batch_seconds", "Engine time per batch", buckets=_LATENCY,
                               registry=r)
        self.updates = Counter("csm_updates_total", "Updates by operation and outcome",
                               ["op", "status"], registry=r)
        self.deltas = Counter("csm_deltas_total", "Published (update, query) deltas",
                              ["query"], registry=r)
        self.matches = Counter("csm_matches_total", "Matches created or destroyed",
                               ["query", "sign"], registry=r)
        self.dead_letters = Counter("csm_dead_letters_total",
                                    "Update-log messages sent to the dead-letter topic",
                                    registry=r)
        self.rejected_requests = Counter("csm_rejected_requests_total",
                                         "API requests refused with a 4xx", ["reason"],
                                         registry=r)
        self.lag = Gauge("csm_consumer_lag_messages",
                         "Update-log messages not yet processed", registry=r)
        self.vertices = Gauge("csm_graph_vertices", "Vertices in the graph", registry=r)
        self.edges = Gauge("csm_graph_edges", "Alive edges in the graph", registry=r)
        self.versions = Gauge("csm_graph_version_entries",
                              "Adjacency entries held, old versions included", registry=r)
        self.garbage = Gauge("csm_graph_garbage_entries",
                             "Entries of dead versions not reclaimed yet", registry=r)
        self.reclaimed = Counter("csm_gc_reclaimed_entries_total",
                                 "Entries reclaimed by garbage collection", registry=r)
        self.queries = Gauge("csm_queries", "Registered queries", registry=r)
        self.ready = Gauge("csm_ready", "1 once the runtime has caught up after start",
                           registry=r)
        self.cache_hit = Gauge("csm_cache_hit_ratio",
                               "Device cache hit ratio in out-of-core mode (0 when unused)",
                               registry=r)
        self.host_bytes = Counter("csm_host_bytes_read_total",
                                  "Bytes read from host memory in out-of-core mode", registry=r)
        self.device_used = Gauge("csm_device_memory_used_bytes",
                                 "Device memory the engine holds (0 on the CPU backend)",
                                 registry=r)
        self.device_budget = Gauge("csm_device_memory_budget_bytes",
                                   "Device memory the engine may hold (0 on the CPU backend)",
                                   registry=r)
        # scale-out: what this instance owns of the group's shards, and moving them
        self.owned_shards = Gauge("csm_owned_shards",
                                  "Shards (assignment partitions) this instance publishes",
                                  registry=r)
        self.owned_queries = Gauge("csm_owned_queries",
                                   "Standing queries this instance matches and publishes",
                                   registry=r)
        self.rebalances = Counter("csm_rebalances_total",
                                  "Shard assignments received from the group coordinator",
                                  registry=r)
        self.catchup_updates = Counter(
            "csm_catchup_updates_total",
            "Updates matched again for shards taken over from another instance", registry=r)
        self.catchup = Histogram(
            "csm_catchup_seconds", "Taking over shards: progress read, missed updates "
            "matched and their deltas acknowledged", buckets=_LATENCY, registry=r)
        r.register(_Nvml())
        for op in ops:
            for st in statuses:
                self.updates.labels(op, st)
        for reason in reasons:
            self.rejected_requests.labels(reason)

    def drop_query(self, qid: int) -> None:
        """Forget a deleted query's series (keeps label values bounded)."""
        q = str(qid)
        for m, keys in ((self.deltas, [(q,)]), (self.matches, [(q, "+"), (q, "-")])):
            for k in keys:
                with contextlib.suppress(KeyError):
                    m.remove(*k)
