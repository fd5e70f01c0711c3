"""What the deployment tests share: the repo's deploy files and the dashboard's queries."""

from __future__ import annotations

import json
import re
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
DEPLOY = ROOT / "deploy"
PROM = DEPLOY / "prometheus"
DASHBOARDS = DEPLOY / "grafana" / "dashboards"

#: what Grafana puts in place of the dashboard variables when "All" is selected
VARIABLES = {"$__rate_interval": "30s", "$instance": ".*", "$query": ".*"}


@dataclass(frozen=True)
class Target:
    dashboard: str
    panel: str
    ref: str
    expr: str

    @property
    def id(self) -> str:
        return f"{self.dashboard}:{self.panel}:{self.ref}"

    @property
    def promql(self) -> str:
        out = self.expr
        for k in sorted(VARIABLES, key=len, reverse=True):
            out = out.replace(k, VARIABLES[k])
        return out

    @property
    def gpu_only(self) -> bool:
        """Reads NVML metrics only, which exist only where the service sees a GPU."""
        names = set(re.findall(r"\b(csm_[a-z_]+)", self.expr))
        return bool(names) and all(n.startswith("csm_gpu_") for n in names)


def dashboards() -> dict[str, dict[str, Any]]:
    return {p.stem: json.loads(p.read_text()) for p in sorted(DASHBOARDS.glob("*.json"))}


def panels(d: dict[str, Any]) -> list[dict[str, Any]]:
    out = []
    for p in d["panels"]:
        if p["type"] == "row":
            out.extend(p.get("panels", []))
        else:
            out.append(p)
    return out


def targets() -> list[Target]:
    return [Target(name, p["title"], t["refId"], t["expr"])
            for name, d in dashboards().items() for p in panels(d) for t in p["targets"]]


def tool(name: str) -> str:
    path = shutil.which(name)
    if path is None:
        pytest.skip(f"{name} is not installed (.ci/run installs Debian's prometheus package)")
    return path
