"""What a stream's table committed before this run, as the runtime asks it (``base.EarlierCommits``), on the reading thread."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from source_framework.destinations.base import EarlierCommits
from source_framework.destinations.checkpoint_record import CheckpointRecord
from source_framework.destinations.spark.passed_states import PassedStates
from source_framework.destinations.spark.table_writer import TableWriter


class CommitsInTable(EarlierCommits):
    """The answers of the table ``writer`` writes (either format)."""

    def __init__(self, writer: TableWriter) -> None:
        self._writer = writer
        #: this run's first commit replaces the table; kept on the reading thread, never asking the committer's writer
        self.replaces_table = writer.rebuilding

    def committed(self) -> Iterator[CheckpointRecord]:
        if self.replaces_table:
            return iter(())
        return self._writer.table.committed_checkpoints()

    def passed_before(self, state: Mapping[str, Any]) -> bool:
        return not self.replaces_table and PassedStates(self._writer.table.path).includes(state)

    def pending_reset(self) -> str | None:
        return self._writer.table.pending_reset()

    def apply_reset(self, reset_id: str) -> None:
        self._writer.rebuild_from_reset(reset_id)  # before the first job: the writer is still ours
        self.replaces_table = True

    def discard_reset(self, reset_id: str) -> None:
        self._writer.check_schema()  # the table stays: it must take the stream's schema
        self._writer.table.clear_reset()

    def may_commit_rows_ahead_of_state(self) -> bool:
        return self._writer.looks_up_rows

    def already_in_table(self, records: list[Mapping[str, Any]]) -> list[bool]:
        return self._writer.already_in_table(records)
