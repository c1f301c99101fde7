"""A fetch permit held by one owner at a time, given back when its ``with`` block ends.

The streams synced together share one semaphore; a permit never given back would starve every stream for the rest
of the sync, so whoever holds one gives it back by leaving a ``with`` block, whatever ends it.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from types import TracebackType


class Permit:
    """One permit of ``permits`` (None: no bound, every call does nothing), or none once given back or handed on."""

    def __init__(self, permits: threading.Semaphore | None, held: bool = True) -> None:
        self._permits = permits
        self.held = held and permits is not None
        self._lock = threading.Lock()  # (two threads may give back the same one: only one does)

    @classmethod
    def take(cls, permits: threading.Semaphore | None) -> Permit:
        if permits is not None:
            permits.acquire()
        return cls(permits)

    @classmethod
    def take_if_free(cls, permits: threading.Semaphore) -> Permit | None:
        return cls(permits) if permits.acquire(blocking=False) else None

    def __enter__(self) -> Permit:
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None, trace: TracebackType | None) -> None:
        self.give_back()

    def give_back(self) -> None:
        with self._lock:
            held, self.held = self.held, False
        if held and self._permits is not None:
            self._permits.release()

    def handed_on(self) -> Permit:
        """The permit, moved to a new object for its next owner, whose block gives it back instead of this one's."""
        with self._lock:
            held, self.held = self.held, False
        return Permit(self._permits, held)

    @contextmanager
    def lent(self) -> Iterator[None]:
        """Given back for the block (a worker waiting for the loop lets another slice fetch), then taken again."""
        if not self.held:
            yield
            return
        self.give_back()
        try:
            yield
        finally:
            assert self._permits is not None
            self._permits.acquire()
            self.held = True
