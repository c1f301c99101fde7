"""A fetch permit held by one owner at a time, given back when its ``with`` block ends.

``runtime.concurrency`` bounds the slices and pages fetching at once with one semaphore the
streams synced together share; a permit taken and never given back would starve every stream
for the rest of the sync. So each one taken is a ``Permit``, and whoever holds it gives it back
by leaving a ``with`` block, whatever ends the block::

    with Permit.take(permits) as permit:   # waits for one
        ...
        handed = permit.handed_on()        # now another thread's, for its own ``with`` block
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from types import TracebackType


class Permit:
    """One permit of ``permits`` (None: no bound, every call does nothing), or none once given back
    or handed on."""

    def __init__(self, permits: threading.Semaphore | None, held: bool = True) -> None:
        self._permits = permits
        self.held = held and permits is not None
        self._lock = threading.Lock()  # (two threads may give back the same one: only one does)

    @classmethod
    def take(cls, permits: threading.Semaphore | None) -> Permit:
        """A permit, once one is free."""
        if permits is not None:
            permits.acquire()
        return cls(permits)

    @classmethod
    def take_if_free(cls, permits: threading.Semaphore) -> Permit | None:
        """A permit if one is free now, else None."""
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
        """The permit, moved to a new object for its next owner: this one's block no longer gives it
        back, the new owner's does."""
        with self._lock:
            held, self.held = self.held, False
        return Permit(self._permits, held)

    @contextmanager
    def lent(self) -> Iterator[None]:
        """Given back for the block (a worker waiting for the loop lets another slice fetch), taken
        again after it, however it ends."""
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
