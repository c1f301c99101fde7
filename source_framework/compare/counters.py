"""Per-stream record counters in a memory-mapped file: the watcher reads them while the sync runs and after a SIGKILL."""

from __future__ import annotations

import mmap
import os
import time
from collections.abc import Sequence

SLOT_BYTES = 8


class ReadCounters:
    """One signed 64-bit counter per stream name, in the order the names were given."""

    def __init__(self, path: str, streams: Sequence[str], handle: mmap.mmap) -> None:
        self.path = path
        self.streams: list[str] = list(streams)
        self._slots: dict[str, int] = {name: index for index, name in enumerate(self.streams)}
        self._map = handle
        self._view = memoryview(handle).cast("q")
        self._local = [0] * len(self.streams)  # the writer's own copies: no read-modify-write on the map
        self._first_checkpoint = len(self.streams)
        self._first_checkpoint_slot = len(self.streams) + 1  # and its stream's slot + 1 (0: not counted)
        self._first_record = len(self.streams) + 2
        self._asked = len(self.streams) + 3
        self._asked_local = [0] * len(self.streams)
        self._marked = False
        self._record_marked = False

    @classmethod
    def create(cls, path: str, streams: Sequence[str]) -> ReadCounters:
        with open(path, "wb") as handle:
            handle.write(b"\0" * (SLOT_BYTES * _slots(streams)))
        return cls.open(path, streams)

    @classmethod
    def open(cls, path: str, streams: Sequence[str]) -> ReadCounters:
        fd = os.open(path, os.O_RDWR)
        try:
            handle = mmap.mmap(fd, SLOT_BYTES * _slots(streams))
        finally:
            os.close(fd)
        return cls(path, streams, handle)

    def slot(self, stream: str) -> int:
        """The slot of ``stream``; -1 when it was not announced (then nothing is counted)."""
        return self._slots.get(stream, -1)

    def add(self, slot: int, count: int = 1) -> None:
        if slot >= 0:
            value = self._local[slot] + count
            self._local[slot] = value
            self._view[slot] = value

    def mark_first_checkpoint(self, slot: int = -1) -> None:
        """Writer side: the stream in ``slot`` asks for a checkpoint; the first time only, note when."""
        if not self._marked:
            self._marked = True
            self._view[self._first_checkpoint_slot] = slot + 1 if slot >= 0 else 0
            self._view[self._first_checkpoint] = int(time.time() * 1_000_000)

    def mark_first_record(self) -> None:
        if not self._record_marked:
            self._record_marked = True
            self._view[self._first_record] = int(time.time() * 1_000_000)

    def first_record_at(self) -> float | None:
        value = int(self._view[self._first_record])
        return value / 1_000_000 if value else None

    def add_checkpoint(self, slot: int) -> None:
        if slot >= 0:
            self._asked_local[slot] += 1
            self._view[self._asked + slot] = self._asked_local[slot]

    def checkpoints_asked(self) -> dict[str, int]:
        return {name: int(self._view[self._asked + index]) for index, name in enumerate(self.streams)}

    def first_checkpoint_at(self) -> float | None:
        value = int(self._view[self._first_checkpoint])
        return value / 1_000_000 if value else None

    def first_checkpoint_stream(self) -> str | None:
        slot = int(self._view[self._first_checkpoint_slot]) - 1
        return self.streams[slot] if 0 <= slot < len(self.streams) else None

    def read(self, stream: str) -> int:
        slot = self.slot(stream)
        return int(self._view[slot]) if slot >= 0 else 0

    def snapshot(self) -> dict[str, int]:
        return {name: int(self._view[index]) for index, name in enumerate(self.streams)}

    def total(self) -> int:
        return sum(int(value) for value in self._view[: len(self.streams)])

    def close(self) -> None:
        self._view.release()
        self._map.close()


def _slots(streams: Sequence[str]) -> int:
    return 2 * len(streams) + 3
