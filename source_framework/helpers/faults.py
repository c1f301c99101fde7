"""Named pause points (``SOURCE_FRAMEWORK_PAUSE_AT=name:N``) so fault tests can kill a process between a commit and its STATE."""

from __future__ import annotations

import os
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any


def _target() -> tuple[str, int] | None:
    spec = os.environ.get("SOURCE_FRAMEWORK_PAUSE_AT", "")
    if ":" not in spec:
        return None
    name, _, count = spec.rpartition(":")
    return (name, int(count)) if count.isdigit() else None


_TARGET = _target()
_LINGER = os.environ.get("SOURCE_FRAMEWORK_LINGER_SECONDS", "")
_counts: dict[str, int] = {}
_count_lock = threading.Lock()
_crash: tuple[str, int] | None = None
_crash_counts: dict[str, int] = {}
_crashed = threading.Event()


class SimulatedCrash(BaseException):
    """Stands in for SIGKILL at a fault point, in tests that run ``read`` in their own process."""

    #: what the run printed before it (a ``ReadOutput``), where ``testing.read`` ran it
    output: Any = None


@contextmanager
def crash_at(name: str, count: int = 1) -> Iterator[None]:
    """Within the block, the ``count``-th time point ``name`` is reached raises ``SimulatedCrash``, as does every point after it."""
    global _crash
    _crash, _crash_counts[name] = (name, count), 0
    _crashed.clear()
    try:
        yield
    finally:
        _crash = None
        _crashed.clear()


def fault_point(name: str, before: Callable[[], None] | None = None) -> None:
    """Pause or crash here if asked; ``before`` is called first when the point stops the process (to flush its output)."""
    due = reached_elsewhere(name)
    if due is None:
        return
    if before is not None:
        before()
    if due["how"] == "crash":
        _crashed.set()
        raise SimulatedCrash(f"simulated crash at {due['label']}")
    sys.stderr.write(f"paused at {due['label']}\n")
    sys.stderr.flush()
    while True:
        time.sleep(3600)


def reached_elsewhere(name: str) -> dict[str, str] | None:
    """Fault point ``name`` reached in another process (the page converter), counted here: what it must do there, or None."""
    if _crash is not None:
        if _crashed.is_set():
            raise SimulatedCrash(f"simulated crash: {name} reached after the crash")
        if _crash[0] == name:
            with _count_lock:
                _crash_counts[name] = _crash_counts.get(name, 0) + 1
                if _crash_counts[name] == _crash[1]:
                    return {"at": name, "how": "crash", "label": f"{name}:{_crash[1]}"}
    if _TARGET is None or _TARGET[0] != name:
        return None
    with _count_lock:
        _counts[name] = _counts.get(name, 0) + 1
        if _counts[name] == _TARGET[1]:
            due = {"at": name, "how": "pause", "label": f"{name}:{_counts[name]}"}
            return {**due, "how": "linger", "seconds": _LINGER} if _LINGER else due
    return None


def crashed_elsewhere(name: str) -> None:
    _crashed.set()
    raise SimulatedCrash(f"simulated crash at {name} (in the page converter)")
