"""Named pause points for fault tests: stop the process at an exact moment so a test can kill it.

The fault tests kill ``main.py read`` with real signals. Timing alone rarely lands a kill
between a commit and its STATE line, so the code marks such moments with ``fault_point(name)``.
With ``SOURCE_FRAMEWORK_PAUSE_AT=name:N`` in the environment, the N-th time that point is
reached the process writes ``paused at name:N`` to stderr and sleeps until it is killed.
Without the variable a fault point costs one dict lookup.

Points: ``commit.start`` (a commit begins, nothing written yet), ``commit.record_written``
(checkpoint record written, data files not yet in the table), ``commit.files_written`` (data
files in place, not yet published), ``commit.done`` (published, STATE not yet printed),
``state.printed`` (just after a STATE line), ``recovery.start`` (cleaning up a table),
``recovery.removing`` (after each file of an interrupted commit is deleted, before its record),
``state.reset.marked`` / ``state.reset.saved`` (``state reset``: tables marked / state file
saved, tables not yet deleted), ``state.reset.deleting`` (``--tables``: after the table was moved
aside, and after each of its files is deleted), ``state.set.committed`` (``state set``: the
table's rewrite committed, a pending reset not yet cleared), ``state.set.truncated`` (``state
set``: table rewritten, state file not yet saved).

The page converter's process carries out some commits' file work (``destinations/spark/table.py``):
there ``commit.record_written`` and ``commit.files_written`` are counted in this process
(``reached_elsewhere``) and the pause, or the stop, happens in that one, at the same step, with
the same message; paused, it waits for this process to be killed, then exits. With
``SOURCE_FRAMEWORK_LINGER_SECONDS=S`` as well, it carries on that many seconds after the kill
instead, as a step already begun when the sync died would (a slow disk): what the next run's
clean-up must wait for.

In-process tests (``crash_at``) make a point raise ``SimulatedCrash`` instead: a
``BaseException``, so it escapes the runtime's per-stream error handling as a kill would. As after
a kill, nothing runs on: from then on until the block ends, every fault point any thread reaches
raises it too, so the commits still queued die at ``commit.start`` with nothing written, and one
in progress dies at its next point, leaving what a kill there would leave.
"""

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
#: seconds a page converter paused at a point carries on after the sync's process is gone
_LINGER = os.environ.get("SOURCE_FRAMEWORK_LINGER_SECONDS", "")
_counts: dict[str, int] = {}
_count_lock = threading.Lock()
_crash: tuple[str, int] | None = None
_crash_counts: dict[str, int] = {}
#: a simulated crash happened in the current ``crash_at`` block: the "process" is dead
_crashed = threading.Event()


class SimulatedCrash(BaseException):
    """Stands in for SIGKILL at a fault point, in tests that run ``read`` in their own process."""

    #: what the run printed before it, where ``source_framework.testing.read`` ran it (a ``ReadOutput``)
    output: Any = None


@contextmanager
def crash_at(name: str, count: int = 1) -> Iterator[None]:
    """Within the block, the ``count``-th time fault point ``name`` is reached it raises
    ``SimulatedCrash``, and so does every fault point reached after it."""
    global _crash
    _crash, _crash_counts[name] = (name, count), 0
    _crashed.clear()
    try:
        yield
    finally:
        _crash = None
        _crashed.clear()


def fault_point(name: str, before: Callable[[], None] | None = None) -> None:
    """Pause or crash here if asked (see the module's docstring); ``before`` is called first when
    the point stops the process (to flush what the process wrote up to this point)."""
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
    """Fault point ``name`` reached, counted here, and what must happen there, or None: what
    ``fault_point`` does itself, or what another process reaching the point for this one must do
    (the page converter carrying out a commit). ``{"at": name, "how": "pause", "label":
    "name:N"}``: print ``paused at name:N`` and stop until this process is killed (``"linger"``,
    with ``"seconds"``: the other process then carries on, see the module's docstring); ``"how":
    "crash"``: stop and report it, and this process calls :func:`crashed_elsewhere`."""
    if _crash is not None:
        if _crashed.is_set():
            raise SimulatedCrash(f"simulated crash: {name} reached after the crash")
        if _crash[0] == name:
            with _count_lock:  # streams read in several threads pass the same points
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
    """The other process stopped at ``name`` as a simulated crash asked: this one is dead too."""
    _crashed.set()
    raise SimulatedCrash(f"simulated crash at {name} (in the page converter)")
