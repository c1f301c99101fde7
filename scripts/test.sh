#!/usr/bin/env bash
# Every check: style (ruff) and types (mypy, settings in mypy.ini), then the unit tests and the
# integration tests against a real local Spark and the demo API. Arguments go to pytest, e.g.
# `bash scripts/test.sh -m "not slow"` for the quick tier (no fault injection, cluster, compare).
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/venv.sh
python -m ruff check .
python -m mypy
exec python -m pytest unit_tests integration_tests "$@"
