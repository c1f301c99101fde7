"""The settings trading speed against memory and risk, read by runtime and destinations; figures in bench/RESULTS.md."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Tuning:
    concurrency: int = 4
    #: Items a worker hands over at once: one lock and one wake-up per chunk instead of per item.
    chunk: int = 256
    #: Items a slice may hold ahead while the process waits for the API: many pages, so the loop rarely waits.
    capacity: int = 20_000
    #: While a core is busy, workers parsing further ahead only take the interpreter from the loop.
    busy_chunks: int = 4
    #: Share of a core above which the process counts as busy, below ``idle`` as waiting; between, no change, so it does not flap.
    saturated: float = 0.85
    idle: float = 0.7
    pace_window: float = 0.5
    first_window: float = 0.1
    stop_timeout: float = 30

    #: Checkpoints whose STATE is not printed yet before reading waits for the oldest; enough that queued ones share commits.
    max_in_flight: int = 128

    fast_ms: int = 20
    #: What a STATE may wait beyond its commit; not ``fast_ms`` because every commit costs about the same whatever its size.
    group_ms: int = 100

    @property
    def busy_capacity(self) -> int:
        return self.busy_chunks * self.chunk

    @property
    def full_wait(self) -> float:
        """How long a worker with a full slice waits before looking again: the pace may have let it go on meanwhile."""
        return self.pace_window / 5

    @property
    def group_checkpoints(self) -> int:
        """The most fast checkpoints per commit job: half of ``max_in_flight``, so one job commits while the next is read."""
        return max(1, self.max_in_flight // 2)

    def group_size_for(self, max_checkpoints_ahead: int | None) -> int:
        """Checkpoints per job when reading may run ``max_checkpoints_ahead`` ahead: half of them, within ``[1, group_checkpoints]``."""
        if max_checkpoints_ahead is None:
            return self.group_checkpoints
        return min(self.group_checkpoints, max(1, max_checkpoints_ahead // 2))


TUNING = Tuning()
