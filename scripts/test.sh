#!/usr/bin/env bash
# Set up and run the whole test suite (GPU tests skip with a reason where there is no GPU).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
scripts/system-deps.sh
exec .venv/bin/python -m pytest "$@"
