"""A real Prometheus scrapes a real `csm serve` fed by `csm demo --url --loop` traffic;
every dashboard query and variable is evaluated through Prometheus's HTTP API and must
return data, and every alert rule must evaluate without error.

Panels that read NVML only (GPU utilisation) have data only where the service runs on a
GPU: on other machines they are skipped with that reason, and evaluated on the GPU
machine (docs/testing.md has the command).
"""

from __future__ import annotations

import contextlib
import math
import os
import re
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml
from _deploy import PROM, ROOT, Target, dashboards, targets, tool

from service.client import CsmClient
from streams.broker import free_port

pytestmark = pytest.mark.kafka


class Stack:
    def __init__(self, tmp: Path) -> None:
        self.tmp = tmp
        self.procs: list[subprocess.Popen[bytes]] = []
        self.api_port, self.prom_port = free_port(), free_port()
        self.api = f"http://127.0.0.1:{self.api_port}"
        self.prom = httpx.Client(base_url=f"http://127.0.0.1:{self.prom_port}", timeout=30)

    def spawn(self, name: str, *args: str, env: dict[str, str] | None = None) -> None:
        with (self.tmp / f"{name}.log").open("wb") as log:
            self.procs.append(subprocess.Popen(list(args), cwd=ROOT, env=env,
                                               stdin=subprocess.DEVNULL, stdout=log,
                                               stderr=subprocess.STDOUT))

    def start(self) -> None:
        env = {k: v for k, v in os.environ.items() if not k.startswith("CSM_")}
        env.update(CSM_PORT=str(self.api_port), CSM_LOG_LEVEL="warning",
                   CSM_TOPIC_UPDATES="live.updates", CSM_TOPIC_MATCHES="live.matches",
                   CSM_STATE_DIR=str(self.tmp / "state"))   # the durable default, not ~
        self.spawn("csm", sys.executable, "-m", "service.cli", "serve", env=env)
        with CsmClient(self.api) as c:
            c.wait_ready(180)
        self.spawn("demo", sys.executable, "-m", "service.cli", "demo", "--url", self.api,
                   "--loop", "--rate", "3000", "--vertices", "3000", "--edges", "12000",
                   "--seed", "7", env=env)
        self.spawn("prometheus", tool("prometheus"), f"--config.file={self._config()}",
                   f"--web.listen-address=127.0.0.1:{self.prom_port}",
                   f"--storage.tsdb.path={self.tmp / 'tsdb'}")

    def _config(self) -> Path:
        """The deployed configuration, pointed at this service and scraping every second."""
        cfg = yaml.safe_load((PROM / "prometheus.yml").read_text())
        cfg["global"] = {"scrape_interval": "1s", "evaluation_interval": "1s"}
        cfg["rule_files"] = [str(PROM / r) for r in cfg["rule_files"]]
        for job in cfg["scrape_configs"]:
            if job["job_name"] == "csm":
                job["static_configs"] = [{"targets": [f"127.0.0.1:{self.api_port}"]}]
            else:
                job["static_configs"] = [{"targets": [f"127.0.0.1:{self.prom_port}"]}]
        path = self.tmp / "prometheus.yml"
        path.write_text(yaml.safe_dump(cfg))
        return path

    def query(self, promql: str) -> list[dict[str, Any]]:
        r = self.prom.get("/api/v1/query", params={"query": promql})
        body = r.json()
        assert body["status"] == "success", f"{promql}: {body}"
        return list(body["data"]["result"])

    def wait(self, what: str, cond: Callable[[], bool], timeout: float = 180) -> None:
        deadline = time.monotonic() + timeout
        while not cond():
            for p in self.procs:
                assert p.poll() is None, f"{p.args[0]} exited: {self.logs()}"
            if time.monotonic() > deadline:
                pytest.fail(f"timed out waiting for {what}: {self.logs()}")
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.procs[0].wait(0.2)   # the service exiting ends the wait at once

    def logs(self) -> str:
        return "\n".join(f"--- {f.name}\n{f.read_text(errors='replace')[-3000:]}"
                         for f in sorted(self.tmp.glob("*.log")))

    def stop(self) -> None:
        for p in reversed(self.procs):
            p.terminate()
        for p in self.procs:
            try:
                p.wait(30)
            except subprocess.TimeoutExpired:
                p.kill()
        self.prom.close()


def _ready(s: Stack) -> bool:
    try:
        # 20 scrapes of a service that has published deltas for every demo query
        return bool(s.query('count_over_time(up{job="csm"}[1m]) >= 20')
                    and s.query('sum(rate(csm_deltas_total[30s])) > 0')
                    and s.query('count(rate(csm_response_seconds_count[30s]) > 0)'))
    except (httpx.TransportError, ValueError):
        return False


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    tool("prometheus")
    s = Stack(tmp_path_factory.mktemp("live"))
    try:
        s.start()
        s.wait("20 scrapes with deltas flowing", lambda: _ready(s))
        yield s
    finally:
        s.stop()


@pytest.fixture(scope="module")
def backend(stack: Stack) -> str:
    (info,) = stack.query("csm_build_info")
    return str(info["metric"]["backend"])


@pytest.mark.parametrize("target", targets(), ids=lambda t: t.id)
def test_panel_query_returns_data(stack: Stack, backend: str, target: Target) -> None:
    if target.gpu_only and backend != "gpu":
        pytest.skip(f"NVML metrics exist only on a GPU host (this service runs {backend})")
    result = stack.query(target.promql)
    assert result, f"{target.promql} returned no data"
    values = [float(r["value"][1]) for r in result]
    assert any(math.isfinite(v) for v in values), f"{target.promql} gave only {values}"


def test_variables_have_values(stack: Stack) -> None:
    for d in dashboards().values():
        for v in d["templating"]["list"]:
            m = re.fullmatch(r"label_values\((.+),\s*(\w+)\)", v["query"])
            assert m, v["query"]
            sel = m.group(1).replace("$instance", ".*")
            r = stack.prom.get("/api/v1/series", params={"match[]": sel}).json()
            values = {s.get(m.group(2)) for s in r["data"]} - {None}
            assert values, f"variable {v['name']}: {sel} has no {m.group(2)} label values"


def test_alert_rules_evaluate(stack: Stack) -> None:
    def evaluated() -> bool:
        groups = stack.prom.get("/api/v1/rules").json()["data"]["groups"]
        return bool(groups) and all(r.get("lastEvaluation", "").startswith("2")
                                    and not r["lastEvaluation"].startswith("0001")
                                    for g in groups for r in g["rules"])

    stack.wait("every rule evaluated once", evaluated, timeout=60)
    groups = stack.prom.get("/api/v1/rules").json()["data"]["groups"]
    rules = [r for g in groups for r in g["rules"]]
    assert len(rules) == 6
    for r in rules:
        assert r["health"] == "ok", f"{r['name']}: {r.get('lastError')}"
    firing = [a["labels"]["alertname"] for a in
              stack.prom.get("/api/v1/alerts").json()["data"]["alerts"] if a["state"] == "firing"]
    assert "CsmDown" not in firing and "CsmDeadLetters" not in firing


def test_exposition_passes_promtool_lint(stack: Stack) -> None:
    text = httpx.get(f"{stack.api}/metrics", timeout=30).text
    r = subprocess.run([tool("promtool"), "check", "metrics"], input=text, capture_output=True,
                       text=True, timeout=60)
    assert r.returncode == 0, r.stdout + r.stderr
