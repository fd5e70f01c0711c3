"""The OpenAPI contract: ``schemathesis run URL/openapi.json --checks all`` against a
default ``csm serve`` finds nothing (schemathesis.toml says which 422s are expected)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from _serve import ROOT, Service

pytestmark = pytest.mark.kafka


def test_schemathesis_checks_all_find_no_mismatch(tmp_path: Path) -> None:
    svc = Service(tmp_path / "state", tmp_path / "serve.log")
    svc.start()
    try:
        cli = Path(sys.executable).parent / "schemathesis"
        r = subprocess.run([str(cli), "run", f"{svc.url}/openapi.json", "--checks", "all",
                            "--seed", "18"], cwd=ROOT, capture_output=True, text=True,
                           timeout=600)
    finally:
        svc.stop()
    assert r.returncode == 0, r.stdout[-6000:]
    summary = r.stdout.strip().splitlines()[-1]
    assert "failure" not in summary and "error" not in summary, r.stdout[-6000:]
    assert not (svc.state / "broker" / "broker.json").exists(), "the broker outlived a stop"
