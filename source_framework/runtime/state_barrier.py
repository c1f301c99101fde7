"""The STATE barrier: a stream's STATE lines are printed in order, each only after the commit of every record before it."""

from __future__ import annotations

from collections import deque
from typing import Any

from source_framework.destinations.base import CommitReceipt
from source_framework.helpers.faults import fault_point
from source_framework.helpers.tuning import TUNING
from source_framework.runtime.output import ProtocolOutput
from source_framework.runtime.results import StreamResult


class RowsMissing(Exception):
    """The sink committed fewer rows than the records handed to it: the STATE is not printed."""


class StateBarrier:
    """A stream's checkpoints awaiting their commits, and the printing of their STATEs in order."""

    def __init__(self, stream: str, namespace: str | None, output: ProtocolOutput, result: StreamResult,
                 max_ahead: int = TUNING.max_in_flight) -> None:
        self.name = stream
        self.namespace = namespace
        self.output = output
        #: where the commits' rows and the STATEs printed are counted; ``handed`` is the reader's
        self.result = result
        #: checkpoints asked whose STATE may be unprinted while reading goes on
        self.max_ahead = max(1, max_ahead)
        # (future, state to print or None, records handed since the one before, records handed at the commit)
        self._queue: deque[tuple[Any, dict[str, Any] | None, int, int]] = deque()
        self._handed_before = 0

    def __len__(self) -> int:
        return len(self._queue)

    def enqueue(self, future: Any, state: dict[str, Any] | None) -> None:
        """Queue ``state`` (None: a commit with no STATE of its own) behind the commit ``future``."""
        handed = self.result.handed
        self._queue.append((future, state, handed - self._handed_before, handed))
        self._handed_before = handed

    def unconfirmed(self) -> int:
        """The queued commits not known to be done (commits complete in order, so the done ones come first)."""
        confirmed = 0
        for future, *_ in self._queue:
            if not (future.done() and not future.cancelled() and future.exception() is None):
                break
            confirmed += 1
        return len(self._queue) - confirmed

    def bound(self) -> None:
        """Wait for the oldest commits until at most ``max_ahead`` are in flight, bounding what a crash can cost."""
        while len(self._queue) > self.max_ahead:
            self.print_next()

    def print_ready(self, wait: bool) -> None:
        """Print the STATEs whose commits are done (``wait``: all), in order, with one flush after them all."""
        if not self._queue or not (wait or self._queue[0][0].done()):
            return
        try:
            while self._queue:
                if not self._queue[0][0].done():
                    if not wait:
                        break
                    self.output.flush()  # before waiting for the next commit, the STATEs ready are out
                self.print_next(flush=False)
        finally:
            self.output.flush()

    def print_committed(self) -> None:
        """The stream failed: print the STATEs of the commits that completed anyway, so the next run starts from the table."""
        while self._queue:
            try:
                self.print_next()
            except Exception:
                return

    def print_next(self, flush: bool = True) -> None:
        future, state, count, handed = self._queue.popleft()
        receipt: CommitReceipt = future.result()  # a failed commit raises here: no STATE
        self.result.committed = max(self.result.committed, receipt.rows_through)
        self.result.commits = receipt.writes
        if receipt.rows_through < handed:
            raise RowsMissing(
                f"stream '{self.name}': {handed:,} records were handed to the destination before this checkpoint "
                f"but its commit holds {receipt.rows_through:,} rows; the STATE was not printed"
            )
        if state is None:
            return
        self.output.state(self.name, self.namespace, state, count, flush=flush)
        fault_point("state.printed", before=self.output.flush)  # (a kill there finds the line out)
        self.result.states += 1
        self.result.final_state = state
