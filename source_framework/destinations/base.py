"""The boundary between the runtime and whatever stores records.

The runtime hands a stream's records to a ``StreamSink`` and at each checkpoint calls ``commit(state)``; it prints the
STATE only after the returned future completes, in the order the commits were asked for, so a killed sync resumes without loss."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterable, Iterator, Mapping
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Any

from source_framework.destinations.checkpoint_record import CheckpointRecord, Notes
from source_framework.helpers.raw_pages import RawPages

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
    #: the stream's pages, for a destination that converts records from their bytes (``RecordsAtPath``); else None
    pages: RawPages | None = None
    #: the state the sync was given for the stream: a commit of it happened, even where the table lost its log entry
    state: Mapping[str, Any] | None = None


@dataclass(frozen=True)
class CommitReceipt:
    """What a sink's commit reached storage with: the runtime prints a STATE only if ``rows_through`` covers every record before it."""

    rows_through: int
    writes: int | None = None


def done(value: Any = None) -> Future[Any]:
    future: Future[Any] = Future()
    future.set_result(value)
    return future


@dataclass
class ValuesNotKept:
    """What a sink's writes could not keep as given, for the end-of-run summary."""

    #: ``{field: records}``: fields records carried that the stream's schema does not declare (no column)
    undeclared_fields: dict[str, int] = field(default_factory=dict)
    records_with_undeclared_fields: int = 0
    #: ``{field: (values, first reason)}``: values that did not fit their column, stored as null
    mismatched_values: dict[str, tuple[int, str]] = field(default_factory=dict)


class EarlierCommits:
    """What a stream's storage already committed, as the runtime asks; the defaults are those of a sink that knows nothing."""

    def committed(self) -> Iterator[CheckpointRecord]:
        return iter(())

    def passed_before(self, state: Mapping[str, Any]) -> bool:
        """Whether the table passed ``state`` in a commit whose record was reclaimed (``spark/passed_states.py``)."""
        return False

    def pending_reset(self) -> str | None:
        """The id of a ``state reset`` that asked this stream's next sync to replace its data."""
        return None

    def apply_reset(self, reset_id: str) -> None:
        """This sync starts over from the reset: its first commit replaces the data."""

    def discard_reset(self, reset_id: str) -> None:
        """The reset does not apply (this sync was given a state): forget it."""

    def may_commit_rows_ahead_of_state(self) -> bool:
        """Whether records may be committed under a state that does not cover them: true only where they still end up once."""
        return False

    def already_in_table(self, records: list[Mapping[str, Any]]) -> list[bool]:
        """For each record read again below its state, whether the table already holds it (equal in every column)."""
        return [False] * len(records)


class StreamSink(ABC):
    """Receives one stream's records and commits them at checkpoints."""

    location: str = ""
    earlier_commits: EarlierCommits = EarlierCommits()

    @abstractmethod
    def write(self, record: Mapping[str, Any]) -> None:
        """Take one record; it becomes visible only with the next commit."""

    @abstractmethod
    def commit(self, state: Mapping[str, Any] | None, notes: Notes | None = None) -> Future[CommitReceipt]:
        """Commit every record written so far with the state that covers them; ``notes`` are kept so a later run can resume."""

    @abstractmethod
    def finish(self, state: Mapping[str, Any] | None, notes: Notes | None = None) -> Future[CommitReceipt]:
        """The stream completed: commit what is left and publish (overwrite switches tables here)."""

    def abort(self) -> None:
        """The stream failed: drop what is not committed. Committed data stays."""

    def values_not_kept(self) -> ValuesNotKept:
        return ValuesNotKept()


class Destination(ABC):
    """Opens one sink per stream; closed once at the end of ``read``."""

    def reserve(self, streams: Iterable[tuple[str | None, str]]) -> None:
        """Before any stream is read: take what the sync needs (the tables' locks), so a sync that cannot run fails early."""

    @abstractmethod
    def open_stream(self, target: StreamTarget) -> StreamSink: ...

    def close(self) -> None:
        """Wait for outstanding work and release resources."""

    def describe(self) -> str:
        return type(self).__name__
