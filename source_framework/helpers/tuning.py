"""The settings that trade speed against memory and risk: how far reading runs ahead of the API and of
its STATEs, and how checkpoints are grouped for a commit. One object, so that a value derived from
another is computed from it here, not written again elsewhere as a number (the figures behind
each value: bench/RESULTS.md, "Figures behind the settings in the code").

Here, in ``helpers``, because both the runtime and the destinations read it.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Tuning:
    # --- Reading slices at once (runtime/concurrency.py) ---
    #: Slices of a stream read at once when neither --concurrency nor the config says.
    concurrency: int = 4
    #: Items a worker hands over at once (fewer when the loop is waiting for them): one lock and one
    #: wake-up per chunk instead of per item.
    chunk: int = 256
    #: Items one slice read ahead may hold before its worker waits for the loop (give or take two
    #: chunks) while the process waits for the API: many pages, so the loop rarely waits.
    capacity: int = 20_000
    #: Chunks one slice read ahead may hold while the process keeps a core busy: about a page, as
    #: workers parsing further ahead only take the interpreter from the loop (``busy_capacity``).
    busy_chunks: int = 4
    #: The share of a core this process's threads use over ``pace_window`` seconds at or above which it
    #: counts as busy (workers read ``busy_capacity`` ahead), and at or below which (``idle``) as
    #: waiting for the API (``capacity``); between the two the judgement stands, so it does not flap.
    saturated: float = 0.85
    idle: float = 0.7
    pace_window: float = 0.5
    #: The first look comes sooner: until the process is seen busy, records cross threads.
    first_window: float = 0.1
    #: Seconds each stream gets to stop after Ctrl-C before the process goes without it.
    stop_timeout: float = 30

    # --- Checkpoints ahead of their STATEs (runtime/state_barrier.py) ---
    #: Checkpoints a stream may have asked for whose STATE is not printed yet; at the next one the
    #: reading waits for the oldest. Enough that queued checkpoints share commits where reading
    #: outpaces them; ``max_checkpoints_ahead`` lowers it to read less again after a crash.
    max_in_flight: int = 128

    # --- Checkpoints grouped for one commit (destinations/spark/buffer.py) ---
    #: A checkpoint is grouped only if the previous came at most this long before it: a stream
    #: reading a slow API groups none.
    fast_ms: int = 20
    #: Grouped checkpoints are handed over once the first of them is this old: what a STATE may wait
    #: beyond its commit. Why not ``fast_ms``: on a slower core that closed groups long before they were
    #: full, and every commit costs about the same whatever its size.
    group_ms: int = 100

    @property
    def busy_capacity(self) -> int:
        """Items one slice may hold read ahead while the process is busy: ``busy_chunks`` chunks."""
        return self.busy_chunks * self.chunk

    @property
    def full_wait(self) -> float:
        """How long a worker with a full slice waits before it looks again: a fifth of
        ``pace_window``, since the pace may have let it go on meanwhile."""
        return self.pace_window / 5

    @property
    def group_checkpoints(self) -> int:
        """The most fast checkpoints handed to the committer as one job: half of ``max_in_flight``,
        so that one job commits while the next is read."""
        return max(1, self.max_in_flight // 2)

    def group_size_for(self, max_checkpoints_ahead: int | None) -> int:
        """Checkpoints grouped for one job when reading may run ``max_checkpoints_ahead`` checkpoints
        ahead of its last STATE (None: ``max_in_flight``): half of them, as ``group_checkpoints`` is of
        ``max_in_flight``; never more than ``group_checkpoints``, never fewer than one."""
        if max_checkpoints_ahead is None:
            return self.group_checkpoints
        return min(self.group_checkpoints, max(1, max_checkpoints_ahead // 2))


#: The settings the framework runs with (tests swap in others with ``dataclasses.replace``).
TUNING = Tuning()
