"""A stop of ``compare-checkpoints`` (Ctrl-C, or a scheduler's SIGTERM) never leaves a child sync running,
whenever it arrives: also while the child is being started."""

from __future__ import annotations

import os
import signal
import subprocess
import sys

import pytest

from source_framework.compare import runner
from source_framework.compare.command import _sigterm_as_interrupt
from source_framework.compare.runner import SyncRunner


def test_a_stop_arriving_as_the_child_sync_starts_stops_that_child(tmp_path, monkeypatch):
    started: list[subprocess.Popen] = []
    real_popen = subprocess.Popen

    def popen_then_stop(argv, **kwargs):
        child = real_popen([sys.executable, "-c", "import time; time.sleep(60)"], **kwargs)
        started.append(child)
        os.kill(os.getpid(), signal.SIGTERM)  # the stop lands before Popen has returned the child to the runner
        return child

    monkeypatch.setattr(runner.subprocess, "Popen", popen_then_stop)
    try:
        with _sigterm_as_interrupt(), pytest.raises(KeyboardInterrupt):
            SyncRunner(str(tmp_path), str(tmp_path / "main.py"), ["users"]).run_cdk("stopped", [])
        assert len(started) == 1
        assert started[0].poll() is not None, "the child sync was left running after the comparison stopped"
    finally:
        for child in started:
            child.kill()
            child.wait()
