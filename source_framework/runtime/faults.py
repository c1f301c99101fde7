"""Named pause points for fault tests: stop the process at an exact moment so a test can kill it.

The fault tests kill ``main.py read`` with real signals. Timing alone rarely lands a kill
between a commit and its STATE line, so the code marks such moments with ``fault_point(name)``.
With ``SOURCE_FRAMEWORK_PAUSE_AT=name:N`` in the environment, the N-th time that point is
reached the process writes ``paused at name:N`` to stderr and sleeps until it is killed.
Without the variable a fault point costs one dict lookup.

Points: ``commit.files_written`` (data files in place, not yet published), ``commit.record_written``
(checkpoint record written, log batch not yet), ``commit.done`` (published, STATE not yet
printed), ``state.printed`` (just after a STATE line), ``recovery.start`` (cleaning up a table).
"""

from __future__ import annotations

import os
import sys
import time
from typing import Dict, Optional, Tuple


def _target() -> Optional[Tuple[str, int]]:
    spec = os.environ.get("SOURCE_FRAMEWORK_PAUSE_AT", "")
    if ":" not in spec:
        return None
    name, _, count = spec.rpartition(":")
    return (name, int(count)) if count.isdigit() else None


_TARGET = _target()
_counts: Dict[str, int] = {}


def fault_point(name: str) -> None:
    if _TARGET is None or _TARGET[0] != name:
        return
    _counts[name] = _counts.get(name, 0) + 1
    if _counts[name] == _TARGET[1]:
        sys.stderr.write(f"paused at {name}:{_counts[name]}\n")
        sys.stderr.flush()
        while True:
            time.sleep(3600)
