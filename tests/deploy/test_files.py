"""The compose file, the Dockerfile and the Grafana files, checked without Docker (which
cannot run on our build machines): structure, references, and every mounted path."""

from __future__ import annotations

import re
import subprocess
import sys
from typing import Any

import yaml
from _deploy import DASHBOARDS, DEPLOY, ROOT, dashboards, panels

COMPOSE = yaml.safe_load((ROOT / "docker-compose.yml").read_text())
DOCKERFILE = (ROOT / "Dockerfile").read_text()


def _stages() -> dict[str, str]:
    """Stage name -> its instructions."""
    parts = re.split(r"^FROM\s+\S+\s+AS\s+(\S+)\s*$", DOCKERFILE, flags=re.M | re.I)
    return dict(zip(parts[1::2], parts[2::2], strict=True))


def test_compose_names_its_services_and_volumes() -> None:
    s = COMPOSE["services"]
    assert set(s) == {"kafka", "csm", "csm-cpu", "csm-1", "csm-2", "csm-3", "demo",
                      "prometheus", "grafana"}
    declared = set(COMPOSE["volumes"])
    for name, svc in s.items():
        for v in svc.get("volumes", []):
            src = v.split(":")[0]
            if src.startswith("."):
                assert (ROOT / src).exists(), f"{name} mounts {src}, which is not in the repo"
            else:
                assert src in declared, f"{name} uses volume {src}, not declared"


def test_compose_kafka_is_kraft() -> None:
    k = COMPOSE["services"]["kafka"]
    assert k["image"].startswith("apache/kafka:")
    env = k["environment"]
    assert env["KAFKA_PROCESS_ROLES"] == "broker,controller"
    assert "zookeeper" not in str(k).lower()
    assert "healthcheck" in k


def test_compose_service_variants() -> None:
    s = COMPOSE["services"]
    stages = _stages()
    gpu, cpu = s["csm"], s["csm-cpu"]
    assert gpu["profiles"] == ["gpu"] and cpu["profiles"] == ["cpu"]
    dev = gpu["deploy"]["resources"]["reservations"]["devices"][0]
    assert dev["driver"] == "nvidia" and "gpu" in dev["capabilities"]
    assert "deploy" not in cpu
    assert gpu["build"]["args"]["FLAVOR"] == "gpu"
    for svc in (cpu, s["demo"]):
        assert svc["build"]["args"]["FLAVOR"] == "cpu"
    for svc in (gpu, cpu, s["demo"]):
        assert f"{svc['build']['args']['FLAVOR']}-base" in stages
    for svc in (gpu, cpu):
        assert svc["environment"]["CSM_KAFKA_BOOTSTRAP"] == "kafka:9092"
        assert svc["depends_on"]["kafka"]["condition"] == "service_healthy"
        assert svc["networks"]["default"]["aliases"] == ["csm"]
    # `docker compose up` with no flags picks the GPU profile from .env
    assert "COMPOSE_PROFILES=gpu" in (ROOT / ".env").read_text().splitlines()


def test_compose_scale_profile() -> None:
    """Three CPU instances in one group, each with its own id, port and address."""
    s = COMPOSE["services"]
    scaled = [s[f"csm-{i}"] for i in (1, 2, 3)]
    ids, ports = set(), set()
    for i, svc in enumerate(scaled, 1):
        env = svc["environment"]
        assert svc["profiles"] == ["scale"] and svc["build"]["args"]["FLAVOR"] == "cpu"
        assert env["CSM_KAFKA_BOOTSTRAP"] == "kafka:9092" and env["CSM_INSTANCE_GROUP"] == "csm"
        assert int(env["CSM_MATCHES_PARTITIONS"]) >= 3
        assert env["CSM_ADVERTISED_URL"] == f"http://localhost:800{i}"
        assert svc["ports"] == [f"800{i}:8000"]
        assert svc["networks"]["default"]["aliases"] == ["csm-scale"]
        ids.add(env["CSM_INSTANCE_ID"])
        ports.add(svc["ports"][0])
    assert len(ids) == len(ports) == 3
    cfg = yaml.safe_load((DEPLOY / "prometheus" / "prometheus.yml").read_text())
    (job,) = [j for j in cfg["scrape_configs"] if j["job_name"] == "csm"]
    assert job["dns_sd_configs"][0]["names"] == ["csm-scale"]


def test_prometheus_and_grafana_mounts() -> None:
    s = COMPOSE["services"]
    prom = " ".join(s["prometheus"]["volumes"])
    assert "./deploy/prometheus:/etc/prometheus" in prom
    assert "--config.file=/etc/prometheus/prometheus.yml" in s["prometheus"]["command"]
    cfg = yaml.safe_load((DEPLOY / "prometheus" / "prometheus.yml").read_text())
    targets = [t for j in cfg["scrape_configs"] if j["job_name"] == "csm"
               for sc in j["static_configs"] for t in sc["targets"]]
    assert targets == ["csm:8000"]
    graf = " ".join(s["grafana"]["volumes"])
    assert "./deploy/grafana/provisioning:/etc/grafana/provisioning" in graf
    assert "./deploy/grafana/dashboards:/var/lib/grafana/dashboards" in graf
    prov = DEPLOY / "grafana" / "provisioning"
    ds = yaml.safe_load((prov / "datasources" / "prometheus.yml").read_text())["datasources"]
    assert [(d["uid"], d["url"]) for d in ds] == [("prometheus", "http://prometheus:9090")]
    dash = yaml.safe_load((prov / "dashboards" / "csm.yml").read_text())["providers"]
    assert dash[0]["options"]["path"] == "/var/lib/grafana/dashboards"


def test_dockerfile() -> None:
    stages = _stages()
    assert list(stages) == ["wheel", "cpu-base", "gpu-base", "final"]
    assert re.search(r"^ARG FLAVOR=gpu$", DOCKERFILE, re.M), "plain `docker build .` is GPU"
    assert re.search(r"^FROM \$\{FLAVOR\}-base AS final$", DOCKERFILE, re.M)
    assert re.search(r"^ARG CUDA_IMAGE=nvidia/cuda:13[.\d]*-runtime-", DOCKERFILE, re.M)
    assert 'CSM_EXTRA="[gpu]"' in stages["gpu-base"] and "CSM_BACKEND=gpu" in stages["gpu-base"]
    assert "CSM_BACKEND=cpu" in stages["cpu-base"]
    final = stages["final"]
    assert re.search(r"^USER csm$", final, re.M), "not a non-root user"
    assert "/readyz" in final and "HEALTHCHECK" in final
    assert "CUPY_CACHE_DIR=/var/cache/csm/cupy" in final
    assert 'VOLUME ["/var/cache/csm"]' in final
    assert "${CSM_EXTRA}" in final
    for src in re.findall(r"^COPY (?!--from)(.+) \S+$", DOCKERFILE, re.M):
        for p in src.split():
            assert (ROOT / p).exists(), f"Dockerfile copies {p}, which is not in the repo"


def test_dashboard_json_is_generated_from_code() -> None:
    r = subprocess.run([sys.executable, str(DEPLOY / "grafana" / "build.py"), "--check"],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr


def _exprs(d: dict[str, Any]) -> str:
    return " ".join(t["expr"] for p in panels(d) for t in p["targets"])


def test_dashboard_covers_what_users_watch() -> None:
    d = dashboards()["csm"]
    assert sorted(p.name for p in DASHBOARDS.glob("*.json")) == ["csm.json"]
    assert [v["name"] for v in d["templating"]["list"]] == ["instance", "query"]
    kinds = {p["type"] for p in panels(d)}
    assert {"timeseries", "heatmap", "stat"} <= kinds
    exprs = _exprs(d)
    for q in ("0.5", "0.95", "0.99"):
        assert f"histogram_quantile({q}, sum by (le) (rate(csm_response_seconds_bucket" in exprs
    for metric in ("csm_updates_total", "csm_deltas_total", "csm_matches_total",
                   "csm_consumer_lag_messages", "csm_gpu_utilization_ratio",
                   "csm_device_memory_used_bytes", "csm_device_memory_budget_bytes",
                   "csm_graph_vertices", "csm_graph_edges", "csm_graph_version_entries",
                   "csm_gc_reclaimed_entries_total", "csm_cache_hit_ratio",
                   "csm_host_bytes_read_total", "csm_rejected_requests_total",
                   "csm_dead_letters_total", "up{"):
        assert metric in exprs, f"no panel shows {metric}"
    for p in panels(d):
        assert p["datasource"] == {"type": "prometheus", "uid": "prometheus"}
        assert p.get("description"), f"panel {p['title']!r} has no description"
        for t in p["targets"]:
            assert 'instance=~"$instance"' in t["expr"], (p["title"], t["expr"])
    heat = next(p for p in panels(d) if p["type"] == "heatmap")
    assert heat["targets"][0]["format"] == "heatmap"
