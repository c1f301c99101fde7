"""Named pause points for fault tests: stop the process at an exact moment so a test can kill it.

The fault tests kill ``main.py read`` with real signals. Timing alone rarely lands a kill
between a commit and its STATE line, so the code marks such moments with ``fault_point(name)``.
With ``SOURCE_FRAMEWORK_PAUSE_AT=name:N`` in the environment, the N-th time that point is
reached the process writes ``paused at name:N`` to stderr and sleeps until it is killed.
Without the variable a fault point costs one dict lookup.

Points: ``commit.record_written`` (checkpoint record written, data files not yet in the table),
``commit.files_written`` (data files in place, not yet published), ``commit.done`` (published,
STATE not yet printed), ``state.printed`` (just after a STATE line), ``recovery.start`` (cleaning
up a table), ``state.reset.marked`` / ``state.reset.saved`` (``state reset``: tables marked /
state file saved, tables not yet deleted), ``state.set.truncated`` (``state set``: table
rewritten, state file not yet saved).

In-process tests (``crash_at``) make a point raise ``SimulatedCrash`` instead: a
``BaseException``, so it escapes the runtime's per-stream error handling as a kill would.
"""

from __future__ import annotations

import os
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager


def _target() -> tuple[str, int] | None:
    spec = os.environ.get("SOURCE_FRAMEWORK_PAUSE_AT", "")
    if ":" not in spec:
        return None
    name, _, count = spec.rpartition(":")
    return (name, int(count)) if count.isdigit() else None


_TARGET = _target()
_counts: dict[str, int] = {}
_count_lock = threading.Lock()
_crash: tuple[str, int] | None = None
_crash_counts: dict[str, int] = {}


class SimulatedCrash(BaseException):
    """Stands in for SIGKILL at a fault point, in tests that run ``read`` in their own process."""


@contextmanager
def crash_at(name: str, count: int = 1) -> Iterator[None]:
    """Within the block, the ``count``-th time fault point ``name`` is reached it raises
    ``SimulatedCrash``."""
    global _crash
    _crash, _crash_counts[name] = (name, count), 0
    try:
        yield
    finally:
        _crash = None


def fault_point(name: str) -> None:
    if _crash is not None and _crash[0] == name:
        with _count_lock:  # streams read in several threads pass the same points
            _crash_counts[name] = _crash_counts.get(name, 0) + 1
            reached = _crash_counts[name] == _crash[1]
        if reached:
            raise SimulatedCrash(f"simulated crash at {name}:{_crash[1]}")
    if _TARGET is None or _TARGET[0] != name:
        return
    with _count_lock:
        _counts[name] = _counts.get(name, 0) + 1
        reached = _counts[name] == _TARGET[1]
    if reached:
        sys.stderr.write(f"paused at {name}:{_counts[name]}\n")
        sys.stderr.flush()
        while True:
            time.sleep(3600)
