"""The boundary between the runtime and whatever stores records.

The runtime pulls records from streams and hands them to a ``StreamSink``; at each checkpoint
it calls ``commit(state)`` and gets a ``Future``. The runtime writes the STATE line only after
that future has completed, in the order the commits were asked for. A sink may commit at once
(and return a finished future) or in the background; either way the barrier holds::

    sink = destination.open_stream(target)
    for record in records:
        sink.write(record)
    future = sink.commit({"updatedAt": "2025-02-01T00:00:00Z"})
    receipt = future.result()     # committed: now the STATE may be printed...
    receipt.rows_through          # ...if the commits so far hold every record written before it

What the storage committed before this run (where to resume, a pending reset, records read again
that the table holds) the runtime asks of ``sink.earlier_commits``, an ``EarlierCommits``.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterable, Iterator, Mapping
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Any

from source_framework.destinations.checkpoint_record import CheckpointRecord, Notes
from source_framework.helpers.raw_pages import RawPages

#: destination sync modes from the configured catalog
APPEND, OVERWRITE, APPEND_DEDUP = "append", "overwrite", "append_dedup"


@dataclass
class StreamTarget:
    """What a destination needs to know about one configured stream."""

    name: str
    namespace: str | None
    json_schema: Mapping[str, Any]
    incremental: bool
    destination_sync_mode: str = APPEND
    primary_key: list[list[str]] = field(default_factory=list)
    cursor_field: list[str] = field(default_factory=list)
    #: the stream re-syncs from scratch (bad state and --on-bad-state resync): replace its table
    rebuild: bool = False
    #: the pages the stream's records come from, unchanged (``RecordsAtPath``), for a destination
    #: that converts them from the pages' bytes; None for any other stream
    pages: RawPages | None = None
    #: the state the sync was given for the stream (``--state``, ``--state-file``), None if none: a
    #: commit whose state it is happened, even where the table lost the commit's log entry
    state: Mapping[str, Any] | None = None


@dataclass(frozen=True)
class CommitReceipt:
    """What a sink's commit reached storage with, counted by the sink itself.

    ``rows_through``: rows this sink has committed in this run, up to and including this commit
    (a sink counts them where it can see them, e.g. in the files it published). The runtime
    prints a STATE only if this is at least the number of records it handed over before it.
    ``writes``: writes that reached storage so far (queued checkpoints may share one).
    """

    rows_through: int
    writes: int | None = None


def done(value: Any = None) -> Future[Any]:
    """A future that has already completed with ``value``."""
    future: Future[Any] = Future()
    future.set_result(value)
    return future


@dataclass
class ValuesNotKept:
    """What a sink's writes could not keep as given, for the end-of-run summary; all empty where a
    sink keeps every field and value (stdout). In the Spark tables each row names its own in ``_sf_meta``."""

    #: ``{field: records}``: fields records carried that the stream's schema does not declare (no column)
    undeclared_fields: dict[str, int] = field(default_factory=dict)
    #: how many records carried at least one of them
    records_with_undeclared_fields: int = 0
    #: ``{field: (values, first reason)}``: values that did not fit their column, stored as null
    mismatched_values: dict[str, tuple[int, str]] = field(default_factory=dict)


class EarlierCommits:
    """What a stream's storage already committed, as the runtime asks before and while reading:
    where to resume, a pending ``state reset``, records read again that the table holds. Apart
    from the sink because the table format answers these, not the writing. The answers here are
    the safe ones of a sink that knows nothing: nothing committed, no reset, nothing to look in,
    no rows committed ahead of their state."""

    def committed(self) -> Iterator[CheckpointRecord]:
        """Earlier runs' commits, newest first; none where a sink keeps no record."""
        return iter(())

    def passed_before(self, state: Mapping[str, Any]) -> bool:
        """Whether the table passed ``state`` in a commit whose record ``committed`` no longer
        yields (reclaimed: its states are kept apart, ``spark/passed_states.py``)."""
        return False

    def pending_reset(self) -> str | None:
        """The id of a ``state reset`` that asked this stream's next sync to replace its data."""
        return None

    def apply_reset(self, reset_id: str) -> None:
        """This sync starts over from the reset: its first commit replaces the data."""

    def discard_reset(self, reset_id: str) -> None:
        """The reset does not apply (this sync was given a state): forget it."""

    def may_commit_rows_ahead_of_state(self) -> bool:
        """Whether records may be committed under a state that does not cover them (those of a slice
        that failed while its stream read on): the next sync reads them again, and they must still
        end up once. True where ``already_in_table`` finds them again, or where there is no table to hold
        them twice (stdout prints what it is given, as airbyte-cdk does)."""
        return False

    def already_in_table(self, records: list[Mapping[str, Any]]) -> list[bool]:
        """For each of ``records``, whether the table already holds it as a row of its own (records
        a resumed sync read again below its state: a lookback window, a parent read again). Only
        a row equal in every column counts; each row answers for one record. None where the sink
        has no table to look in."""
        return [False] * len(records)


class StreamSink(ABC):
    """Receives one stream's records and commits them at checkpoints."""

    #: where the records land, for people reading the end-of-run summary: a table's path, "stdout"
    location: str = ""
    #: what the storage committed before (the answers of no table, unless the sink has one)
    earlier_commits: EarlierCommits = EarlierCommits()

    @abstractmethod
    def write(self, record: Mapping[str, Any]) -> None:
        """Take one record; it becomes visible only with the next commit."""

    @abstractmethod
    def commit(self, state: Mapping[str, Any] | None, notes: Notes | None = None) -> Future[CommitReceipt]:
        """Commit every record written so far, together with the state that covers them.

        ``notes`` (the boundary keys, the run's start state) are kept with the commit, so a
        later run can tell where to resume (``EarlierCommits.committed``). A sink that keeps them
        builds them (``checkpoint_record.built``) on the reading thread, before the next call.
        """

    @abstractmethod
    def finish(self, state: Mapping[str, Any] | None, notes: Notes | None = None) -> Future[CommitReceipt]:
        """The stream completed: commit what is left and publish (overwrite switches tables here)."""

    def abort(self) -> None:
        """The stream failed: drop what is not committed. Committed data stays."""

    def values_not_kept(self) -> ValuesNotKept:
        """What the writes so far could not keep as given (none where a sink keeps everything)."""
        return ValuesNotKept()


class Destination(ABC):
    """Opens one sink per stream; closed once at the end of ``read``."""

    def reserve(self, streams: Iterable[tuple[str | None, str, str]]) -> None:
        """Before any stream is read: take what the sync needs of each ``(namespace, stream,
        destination sync mode)`` (the Spark tables' locks), so that a sync that cannot run fails
        before reading."""

    @abstractmethod
    def open_stream(self, target: StreamTarget) -> StreamSink: ...

    def close(self) -> None:
        """Wait for outstanding work and release resources."""

    def describe(self) -> str:
        """A one-line description for logs, e.g. where the tables are."""
        return type(self).__name__
