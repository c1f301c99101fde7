# Sourced by the other scripts: create or refresh ./.venv from setup.py.
# Needs Python 3.11+ and Java 17 on the machine; everything else comes from PyPI.
set -euo pipefail
VENV="${VENV:-.venv}"
PYTHON="${PYTHON:-$(command -v python3.11 || command -v python3)}"
if [ ! -x "$VENV/bin/python" ]; then
  echo "creating $VENV with $PYTHON" >&2
  "$PYTHON" -m venv "$VENV"
fi
"$VENV/bin/python" -m pip install --quiet --disable-pip-version-check --upgrade pip >&2
"$VENV/bin/python" -m pip install --quiet --disable-pip-version-check -e '.[tests]' >&2
export PATH="$PWD/$VENV/bin:$PATH"
