#!/usr/bin/env bash
# Every check: style (ruff) and types (mypy, settings in mypy.ini), then the unit tests and the
# integration tests against a real local Spark and the demo API. Arguments go to pytest, e.g.
# `bash scripts/test.sh -m "not slow"` for the quick tier (no fault injection, cluster, compare),
# or `bash scripts/test.sh unit_tests/test_boundary.py` for the tests named (paths from the
# repository's root), instead of every test.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/venv.sh
python -m ruff check .
python -m mypy
targets=(unit_tests integration_tests)
for arg in "$@"; do
    if [[ "$arg" != -* && -e "${arg%%::*}" ]]; then  # a test file, folder or test id: only those
        targets=()
        break
    fi
done
exec python -m pytest "${targets[@]}" "$@"
