#!/usr/bin/env bash
# The main job: a full sync, then an incremental sync, of the demo connector into ./warehouse.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/venv.sh
exec python -m source_framework.demo.walkthrough "$@"
