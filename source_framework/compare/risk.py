"""Records read but not yet covered by a held STATE, sampled before each STATE arrives (the count only grows between them)."""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any


class ScheduleTracker:
    """STATE messages, repeated STATEs, and the largest number of records at risk, of one run."""

    def __init__(self) -> None:
        self.states = 0
        self.states_by_stream: dict[str, int] = {}
        self.max_checkpoints_ahead: int | None = None  # None: the checkpoints asked are not known (CDK)
        self.first_record_wall: float | None = None  # time.time() of the first RECORD line (CDK)
        self.repeated_states = 0
        self.max_at_risk = 0
        self.covered: dict[str, int] = {}
        self.record_lines: dict[str, int] = {}
        self.last_states: dict[str, dict[str, Any]] = {}
        self._last_value: dict[str, Any] = {}
        self.first_state_at: float | None = None  # time.perf_counter() when the first STATE arrived
        self.first_state_wall: float | None = None  # time.time() then (compared with the child's clock)
        self.first_state_walls: dict[str, float] = {}
        self.errors: list[str] = []

    def on_record(self, stream: str) -> None:
        if self.first_record_wall is None:
            self.first_record_wall = time.time()
        self.record_lines[stream] = self.record_lines.get(stream, 0) + 1

    def on_state(
        self,
        stream: str,
        state: Mapping[str, Any],
        record_count: float | None,
        reads: Mapping[str, int] | None = None,
        asked: Mapping[str, int] | None = None,
    ) -> None:
        """A STATE line arrived; ``reads``: records read per stream now (default: RECORD lines seen); ``asked``: checkpoints asked."""
        self.sample(reads)
        self.states_by_stream[stream] = self.states_by_stream.get(stream, 0) + 1
        if asked is not None:
            # This STATE answers one checkpoint; the ones asked after it wait for theirs.
            ahead = sum(max(0, count - self.states_by_stream.get(name, 0)) for name, count in asked.items())
            self.max_checkpoints_ahead = max(self.max_checkpoints_ahead or 0, ahead)
        if self.first_state_at is None:
            self.first_state_at, self.first_state_wall = time.perf_counter(), time.time()
        self.first_state_walls.setdefault(stream, time.time())
        self.states += 1
        value = (state.get("stream") or {}).get("stream_state")
        if stream in self._last_value and self._last_value[stream] == value:
            self.repeated_states += 1
        self._last_value[stream] = value
        self.last_states[stream] = dict(state)
        self.covered[stream] = self.covered.get(stream, 0) + int(record_count or 0)

    def on_complete(self, stream: str, reads: Mapping[str, int] | None = None) -> None:
        reads = self._reads(reads)
        self.sample(reads)
        self.covered[stream] = max(self.covered.get(stream, 0), reads.get(stream, 0))

    def at_risk(self, reads: Mapping[str, int] | None = None) -> int:
        reads = self._reads(reads)
        return sum(max(0, count - self.covered.get(stream, 0)) for stream, count in reads.items())

    def sample(self, reads: Mapping[str, int] | None = None) -> None:
        self.max_at_risk = max(self.max_at_risk, self.at_risk(reads))

    def _reads(self, reads: Mapping[str, int] | None) -> Mapping[str, int]:
        return self.record_lines if reads is None else reads
