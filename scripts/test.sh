#!/usr/bin/env bash
# Every test: unit tests, then integration tests against a real local Spark and the demo API.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/venv.sh
exec python -m pytest unit_tests integration_tests "$@"
