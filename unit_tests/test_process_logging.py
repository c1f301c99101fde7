"""The command's logging set-up (``runtime.process.log_to_stderr``) writes to stderr as it is when
a line is logged. Bound to the stderr of the moment it was set up, it kept writing to a file a
test's capture had closed since, and py4j, logging from its garbage-collector thread after a JVM
died, printed a "--- Logging error ---" traceback into a passing test run (seen in CI's log)."""

from __future__ import annotations

import io
import logging
import sys

import pytest

from source_framework.runtime.process import log_to_stderr


@pytest.fixture
def root_logging_restored():
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    yield
    for handler in list(root.handlers):
        root.removeHandler(handler)
    for handler in handlers:
        root.addHandler(handler)
    root.setLevel(level)


def test_log_lines_go_to_the_stderr_of_the_moment_not_to_a_closed_one(monkeypatch, root_logging_restored):
    then, now = io.StringIO(), io.StringIO()
    monkeypatch.setattr(sys, "stderr", then)
    log_to_stderr()
    then.close()  # the stderr the set-up saw is gone (a test's capture ended)
    monkeypatch.setattr(sys, "stderr", now)
    logging.getLogger("source_framework.read").info("still heard")
    assert "still heard" in now.getvalue()
    assert "Logging error" not in now.getvalue()
