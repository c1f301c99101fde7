#!/usr/bin/env bash
# Every check: style (ruff), types (mypy, settings in mypy.ini), the docs site (mkdocs), then the
# unit tests and the integration tests against a real local Spark and the demo API. Arguments go
# to pytest, e.g. `bash scripts/test.sh -m "not slow"` for the quick tier (no fault injection,
# cluster or many-sync files), or `bash scripts/test.sh unit_tests/test_boundary.py` for the tests named
# (paths from the repository's root), instead of every test.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/venv.sh
# Bytecode cached in the environment, not beside the sources: where PYTHONDONTWRITEBYTECODE is set (as on our
# machines), each of the hundreds of processes the tests start compiled our modules again, and each test worker
# rewrote the asserts of every test file (4 of its 8 s of collection).
export PYTHONPYCACHEPREFIX="$PWD/$VENV/pycache"
unset PYTHONDONTWRITEBYTECODE
# Each process the tests start finds classes' source lines with one parse per module (scripts/test_startup/sitecustomize.py):
# on Python 3.11 airbyte-cdk's import parsed its protocol module once per class, 0.45 s of a 2 s main.py start.
export PYTHONPATH="$PWD/scripts/test_startup${PYTHONPATH:+:$PYTHONPATH}"
python -m ruff check .
python -m mypy
# The docs site (mkdocs.yml): strict, so a broken link or anchor, or a page not in the nav, fails here.
# It goes to ./site (ignored by git); unit_tests/test_docs_examples.py checks the pages' examples.
python -m mkdocs build --strict --quiet --site-dir site
targets=(unit_tests integration_tests)
for arg in "$@"; do
    if [[ "$arg" != -* && -e "${arg%%::*}" ]]; then  # a test file, folder or test id: only those
        targets=()
        break
    fi
done
exec python -m pytest "${targets[@]}" "$@"
