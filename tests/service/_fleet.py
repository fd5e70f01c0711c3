"""Several ``csm serve`` processes in one instance group on the session's broker."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import httpx

from service.client import CsmClient
from streams.broker import free_port

ROOT = Path(__file__).resolve().parents[2]


class Instance:
    def __init__(self, name: str, env: dict[str, str], log: Path) -> None:
        self.name, self.port = name, free_port()
        self.env = {**env, "CSM_PORT": str(self.port), "CSM_INSTANCE_ID": name,
                    "CSM_ADVERTISED_URL": f"http://127.0.0.1:{self.port}"}
        self.log = log
        self.p: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> Instance:
        with self.log.open("ab") as err:
            self.p = subprocess.Popen([sys.executable, "-m", "service.cli", "serve"],
                                      cwd=ROOT, env=self.env, stdin=subprocess.DEVNULL,
                                      stdout=subprocess.DEVNULL, stderr=err)
        return self

    def wait_ready(self) -> None:
        with CsmClient(self.url) as c:
            c.wait_ready(180)

    def metric(self, name: str) -> float:
        text = httpx.get(f"{self.url}/metrics", timeout=10).text
        for line in text.splitlines():
            if line.startswith(name + " "):
                return float(line.split()[1])
        raise KeyError(name)

    def kill(self) -> None:
        assert self.p is not None
        os.kill(self.p.pid, signal.SIGKILL)
        self.p.wait(30)

    def stop(self) -> None:
        if self.p is not None and self.p.poll() is None:
            self.p.terminate()
            self.p.wait(60)

    @property
    def alive(self) -> bool:
        return self.p is not None and self.p.poll() is None


def fleet_env(bootstrap: str, prefix: str, partitions: int) -> dict[str, str]:
    return {**{k: v for k, v in os.environ.items() if not k.startswith("CSM_")},
            "CSM_KAFKA_BOOTSTRAP": bootstrap, "CSM_BACKEND": "cpu", "CSM_LOG_LEVEL": "info",
            "CSM_TOPIC_UPDATES": f"{prefix}.updates", "CSM_TOPIC_MATCHES": f"{prefix}.matches",
            "CSM_TOPIC_QUERIES": f"{prefix}.queries", "CSM_TOPIC_DEADLETTER": f"{prefix}.dead",
            "CSM_TOPIC_SHARDS": f"{prefix}.shards", "CSM_INSTANCE_GROUP": f"{prefix}.group",
            "CSM_KAFKA_CONSUMER_GROUP": f"{prefix}.runtime", "PYTHONPATH": str(ROOT),
            "CSM_MATCHES_PARTITIONS": str(partitions), "CSM_GROUP_SESSION_TIMEOUT_MS": "3000",
            "CSM_MAX_POLL_RECORDS": "5"}


def assignment(instances: list[Instance]) -> dict[str, int]:
    out = {}
    for i in instances:
        try:
            out[i.name] = int(i.metric("csm_owned_shards"))
        except (httpx.HTTPError, KeyError):
            out[i.name] = -1
    return out
