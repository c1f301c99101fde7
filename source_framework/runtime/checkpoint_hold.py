"""Checkpoints that come fast, held back by the runtime and committed together.

At ``state_checkpoint_interval`` 100 against an API that answers at once, a stream asks for a
checkpoint every millisecond or two. Where its sink says that one commit may cover several of
them (``StreamSink.max_checkpoints_per_commit``: a Spark commit costs about the same whatever
its size), the runtime holds such checkpoints back and asks the sink for one commit covering
them all; each one's STATE is still printed after that commit, in order. A held checkpoint costs
the reading thread only its state's copy and checks: the resume notes (``runtime.boundary``) and
the sink's call are paid once per commit. (Until late on 2026-11-27 the Spark sink held them
itself, and the runtime computed every checkpoint's notes to have 63 of 64 dropped: 1,000,000 demo
orders at interval 100 spent 0.69-1.17 s (median 0.92) of the reading thread's time in
checkpoints, 0.45-0.51 s since.)

A hold ends at a checkpoint: the one that fills it, one that comes after a pause, one that comes
once the first held is ``HOLD_MS`` old, and the stream's last. Never between checkpoints: the
resume notes of a commit must describe exactly the records it holds, and they are computed when
it is asked for, before the next record moves the boundary::

    hold = CheckpointHold(limit=64)
    if not hold.holds(HeldCheckpoint(state, encoded, count=100, handed=1_000)):
        checkpoints = hold.take()   # commit them as one (the last asked, the one just given)
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

#: A checkpoint is held only if the previous came at most this long before it: a stream reading a
#: slow API holds none, and its STATEs leave as soon as their commits are done.
FAST_MS = 20

#: A hold ends at the first checkpoint that comes once the first held is this old (if it was not
#: filled first). It is what a STATE may wait beyond its commit. Why 100, not the 20 of ``FAST_MS``:
#: where reading is slower than on a fast core, 20 ms ended a hold long before its 64th
#: checkpoint, and every commit costs the page converter about the same whatever its size. On a
#: 2-core machine reading about 70,000 records/s, 1,000,000 demo orders at interval 100 took 430-620
#: commits with 20 against 158 with 100; in 8 alternated rounds of the whole process the sync took
#: a median 15.1 s against 18.1 s (faster in 6 of 8). On a machine reading 300,000 records/s, 64
#: checkpoints come within about 21 ms and the count ends the hold either way.
HOLD_MS = 100


@dataclass
class HeldCheckpoint:
    """A checkpoint asked for and not yet handed to the sink."""

    state: dict[str, Any]
    encoded: bytes | None  # the state's JSON where the runtime made it (``read.json_state``)
    count: int  # records handed to the sink since the checkpoint before it (its STATE's recordCount)
    handed: int  # records handed to the sink in all when it was asked for


class CheckpointHold:
    """One stream's checkpoints held back (reading thread only). ``limit``: how many one commit
    may cover (1: none is ever held). ``clock``: seconds, monotonic."""

    def __init__(self, limit: int, clock: Callable[[], float] | None = None) -> None:
        self.limit = max(1, limit)
        self.held: list[HeldCheckpoint] = []
        self._clock = clock or time.monotonic
        self._last: float | None = None  # when the last checkpoint came
        self._since = 0.0  # when the first held one came

    def holds(self, checkpoint: HeldCheckpoint, last: bool = False) -> bool:
        """Add ``checkpoint``; True if it stays held, False if the checkpoints held, it included,
        are to be committed now (``take``). ``last``: the stream's last checkpoint."""
        now = self._clock()
        fast = self._last is not None and 0 <= now - self._last <= FAST_MS / 1000
        self._last = now
        if not self.held:
            self._since = now
        self.held.append(checkpoint)
        return not last and fast and len(self.held) < self.limit and now - self._since < HOLD_MS / 1000

    def take(self) -> list[HeldCheckpoint]:
        """The checkpoints held, oldest first; the hold is empty after."""
        held, self.held = self.held, []
        return held
