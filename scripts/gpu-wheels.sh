#!/usr/bin/env bash
# Here (with a network), before a device session: the service's and the tests' wheels for
# the GPU machine's Python 3.12 into .local-data/wheels (git-ignored; carry it), which
# scripts/gpu-machine.sh installs there without a network. numpy, numba and CuPy are
# installed there already, so their wheels need not travel (about 25 MB in all).
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/gpu-packages.sh
python3 -m pip download -q --only-binary=:all: --python-version 3.12 \
    --platform manylinux2014_x86_64 --platform manylinux_2_17_x86_64 --platform any \
    -d .local-data/wheels "${gpu_packages[@]}"
