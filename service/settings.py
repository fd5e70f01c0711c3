"""Service settings: every field is a ``CSM_<NAME>`` environment variable.

Read once per process through :func:`get_settings` (cached, so tests and the CLI can build
their own ``Settings(...)`` instead of patching the environment).
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path
from typing import Literal

from pydantic import Field, SecretStr
from pydantic_settings import BaseSettings, SettingsConfigDict

__all__ = ["Settings", "get_settings"]

MiB = 1 << 20


class Settings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="CSM_", frozen=True, extra="ignore",
                                      env_ignore_empty=True)  # CSM_X= means unset

    # API
    host: str = "127.0.0.1"
    port: int = Field(8000, ge=0, le=65535)
    #: when set, every write endpoint needs ``Authorization: Bearer <token>``
    api_token: SecretStr | None = None
    max_body_bytes: int = Field(16 * MiB, ge=1024)
    max_graph_bytes: int = Field(1024 * MiB, ge=1024)
    max_batch_updates: int = Field(100_000, ge=1, le=1_000_000)
    recent_deltas_per_query: int = Field(10_000, ge=0)
    log_level: Literal["debug", "info", "warning", "error"] = "info"

    # matching runtime
    backend: Literal["auto", "cpu", "gpu"] = "auto"
    #: GPU: device bytes for the graph's neighbour arrays (0: no limit). A bigger graph
    #: stays in host memory, read through a per-batch device cache and PCIe (out-of-core)
    gpu_graph_budget_bytes: int = Field(0, ge=0)
    #: what that cache holds: estimated most-read arrays, highest degrees, or nothing
    gpu_cache: Literal["walk", "degree", "none"] = "walk"
    #: GPU: the device owns the graph and count-only batches of edge updates take the device
    #: pipeline (graph updates, matching and collection on the GPU). Off with a graph budget
    #: or an instance group (catching a shard up rematches held versions: host graph only)
    gpu_device_graph: bool = True
    #: GPU: SMs matching leaves free, so a small batch's graph update starts at once
    #: (0: matching on every SM; costs matching 8-9% of its peak, docs/design.md 2r)
    gpu_front_sms: int = Field(0, ge=0)
    #: topic messages taken per engine batch (each holds one or many updates)
    max_poll_records: int = Field(1000, ge=1)

    # durability: with no bootstrap the embedded broker keeps its log under state_dir
    #: broker data and snapshots (default: $XDG_DATA_HOME/csm or ~/.local/share/csm)
    state_dir: Path | None = None
    #: embedded broker in memory only: everything is lost when the service stops
    ephemeral: bool = False
    #: a snapshot after this many update-log records or this many updates, whichever
    #: comes first (where there is a state directory)
    snapshot_every: int = Field(1000, ge=1)
    snapshot_every_updates: int = Field(500_000, ge=1)

    # Kafka: no bootstrap starts the embedded broker on 127.0.0.1 and a free port
    kafka_bootstrap: str | None = None
    kafka_security_protocol: Literal["PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"] = \
        "PLAINTEXT"
    kafka_sasl_mechanism: Literal["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"] | None = None
    kafka_sasl_username: str | None = None
    kafka_sasl_password: SecretStr | None = None
    kafka_ssl_cafile: str | None = None
    kafka_ssl_certfile: str | None = None
    kafka_ssl_keyfile: str | None = None
    kafka_fetch_max_wait_ms: int = Field(5, ge=1, le=10_000)
    kafka_consumer_group: str = "csm-runtime"
    topic_updates: str = "csm.updates"
    topic_matches: str = "csm.matches"
    topic_queries: str = "csm.queries"
    topic_deadletter: str = "csm.deadletter"
    matches_partitions: int = Field(1, ge=1, le=1024)
    #: each query's deltas of a batch as soon as that query is matched, not when every
    #: query is: true always query by query, unset where the backend pipelines batches
    #: (the GPU's device pipeline) while a batch's queries are not all matched, false
    #: never; a partition then holds each query's deltas in order, not their interleaving
    per_query_delivery: bool | None = None

    # scale-out: several instances on one log, each publishing a shard of the queries
    #: the instance group (a Kafka consumer group); unset: one instance owns every query
    instance_group: str | None = None
    #: this instance's name in the group (default: host name and process id)
    instance_id: str | None = None
    #: where other instances and clients reach this one (default: http://host:port)
    advertised_url: str | None = None
    #: the assignment topic: one empty partition per shard (= per matches partition)
    topic_shards: str = "csm.shards"
    #: how soon the group moves a dead instance's shards (heartbeats every quarter)
    group_session_timeout_ms: int = Field(3000, ge=1000, le=300_000)
    #: primitive updates kept so a shard's new owner can match what its last owner
    #: did not publish (older gaps are rebuilt from snapshot and log)
    catchup_window_updates: int = Field(1_000_000, ge=0)


@lru_cache
def get_settings() -> Settings:
    return Settings()
