#!/usr/bin/env bash
# On the GPU machine (the device tool; no network there): install the service's and the
# tests' wheels carried in .local-data/wheels (see docs/testing.md). CuPy, numpy and numba
# are already installed there; `pip` there is another interpreter's, so python3 -m pip.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/gpu-packages.sh
python3 -m pip install -q --no-index --find-links .local-data/wheels "${gpu_packages[@]}" \
    2>/dev/null || python3 -m pip install -q --break-system-packages --no-index \
        --find-links .local-data/wheels "${gpu_packages[@]}"
