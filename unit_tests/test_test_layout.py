"""The test suite is found the ways a user runs it, not only through ``scripts/test.sh``."""

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_a_bare_pytest_from_the_repository_root_collects_every_test_file():
    """``pytest`` (the venv's script) differs from ``python -m pytest``: the current folder is not
    on ``sys.path``, so test files importing ``integration_tests.*`` failed to collect (33 files)."""
    env = {key: value for key, value in os.environ.items() if key != "PYTHONPATH"}
    collected = subprocess.run(
        [str(Path(sys.executable).parent / "pytest"), "--collect-only", "-q", "-n0", "unit_tests", "integration_tests"],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=300,
    )
    assert collected.returncode == 0, collected.stdout[-3000:] + collected.stderr[-2000:]
    assert "error" not in collected.stdout.splitlines()[-1], collected.stdout[-3000:]


def test_the_processes_tests_start_take_ctrl_c_even_when_the_test_run_was_started_in_the_background():
    """A run started by ``cmd &`` in a script has SIGINT ignored, inherited by every process it
    starts: the tests that press Ctrl-C then failed (``main.py`` ran on and exited 0, not 130) or hung
    (``test_worker_threads`` until its 50 s timeout). The root ``conftest.py`` restores the default."""
    code = "import signal; print(signal.getsignal(signal.SIGINT) is signal.default_int_handler)"
    assert subprocess.run([sys.executable, "-c", code], capture_output=True, text=True).stdout.strip() == "True"
