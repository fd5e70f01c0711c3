#!/usr/bin/env bash
# Set up and run the demo: a generated power-law graph, six standing queries, a stream.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
exec .venv/bin/csm demo "$@"
