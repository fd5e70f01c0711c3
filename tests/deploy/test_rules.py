"""Prometheus configuration, alert rules and their unit tests, checked by promtool; every
dashboard expression parses as PromQL."""

from __future__ import annotations

import subprocess
from pathlib import Path

import yaml
from _deploy import PROM, targets, tool


def _promtool(*args: str) -> str:
    r = subprocess.run([tool("promtool"), *args], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, f"promtool {' '.join(args)}:\n{r.stdout}\n{r.stderr}"
    return r.stdout + r.stderr


def test_config_is_valid() -> None:
    out = _promtool("check", "config", str(PROM / "prometheus.yml"))
    assert "1 rule files found" in out


def test_rules_are_valid() -> None:
    for f in sorted((PROM / "rules").glob("*.yml")):
        _promtool("check", "rules", str(f))


def test_every_alert_has_a_unit_test() -> None:
    alerts = {r["alert"] for f in (PROM / "rules").glob("*.yml")
              for g in yaml.safe_load(f.read_text())["groups"] for r in g["rules"]
              if "alert" in r}
    tested = {t["alertname"] for f in (PROM / "tests").glob("*.yml")
              for case in yaml.safe_load(f.read_text())["tests"]
              for t in case.get("alert_rule_test", []) if t.get("exp_alerts")}
    assert alerts == {"CsmDown", "CsmNotReady", "CsmResponseTimeHigh", "CsmConsumerLagGrowing",
                      "CsmGpuMemoryNearBudget", "CsmDeadLetters"}
    assert alerts <= tested, f"alerts never shown firing in a unit test: {alerts - tested}"


def test_alert_unit_tests_pass() -> None:
    files = sorted((PROM / "tests").glob("*.yml"))
    assert files
    out = _promtool("test", "rules", *map(str, files))
    assert "FAILED" not in out


def test_every_dashboard_expression_parses(tmp_path: Path) -> None:
    ts = targets()
    assert len(ts) >= 20
    rules = {"groups": [{"name": "panels", "rules": [
        {"record": f"panel_{i}", "expr": t.promql} for i, t in enumerate(ts)]}]}
    f = tmp_path / "panels.yml"
    f.write_text(yaml.safe_dump(rules))
    out = _promtool("check", "rules", str(f))
    assert f"SUCCESS: {len(ts)} rules found" in out
