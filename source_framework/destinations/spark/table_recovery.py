"""A table folder made whole before writing (``SparkTable.recover``): what an interrupted commit of ours left is deleted,
and nothing else; a table changed or damaged from outside is refused as it is, and everything is checked before anything
is deleted. An interrupted commit can only be the newest record, one past the last committed, naming the log's next batch;
anything else could empty a table (``InconsistentTable``). A record the given state proves committed lost its batch
(``LogBatchLost``): deleting its files would lose rows."""

from __future__ import annotations

import logging
import os
import shutil
from collections.abc import Mapping
from typing import Any

from source_framework.destinations.checkpoint_record import CheckpointRecord, file_name
from source_framework.destinations.spark.atomic_files import is_temp_file
from source_framework.destinations.spark.checkpoint_folder import CHECKPOINTS_DIR, CheckpointFolder
from source_framework.destinations.spark.file_sink_log import METADATA_DIR, FileSinkLog, SinkFileStatus, local_path
from source_framework.helpers.faults import fault_point

logger = logging.getLogger("source_framework.spark")

STAGING_DIR = "_staging"
_REBUILD = "rebuild the table: 'state reset --tables' for the stream, then sync it again"
_NOT_OURS = (
    f": its log and its {CHECKPOINTS_DIR}/ do not belong together (copied or restored in part?), so nothing was "
    f"deleted. Restore the table's folder whole, or {_REBUILD}"
)


class TableMoved(RuntimeError):
    """The table's log names data files that are not in its folder (moved or copied without them, or deleted)."""


class TableDamaged(TableMoved):
    """A data file the table's log names is not the size the log recorded (cut or emptied)."""


class InconsistentTable(RuntimeError):
    """The table's checkpoint records and its log do not tell one interrupted commit apart."""


class LogBatchLost(InconsistentTable):
    """The given state proves a commit happened whose log batch is not there."""


class FolderRecovery:
    """The checks and deletions of one ``SparkTable.recover``, on its folder, log and records."""

    def __init__(self, path: str, log: FileSinkLog, checkpoints: CheckpointFolder) -> None:
        self.path, self.log, self.checkpoints = path, log, checkpoints

    def interrupted_commit(self, last: CheckpointRecord | None, given_state: Mapping[str, Any] | None) -> CheckpointRecord | None:
        """The record of the commit a killed run left unpublished, if any; ``given_state``: None when none is known (a tool)."""
        newer = [seq for seq in self.checkpoints.seqs_newest_first() if last is None or seq > last.seq]
        if not newer:
            return None
        latest = self.log.latest_batch_id()
        where = (
            f"its log ({METADATA_DIR}/) ends at batch {latest}" if latest is not None
            else f"its log ({METADATA_DIR}/) has no batch" if os.path.isdir(self.log.directory)
            else f"its log ({METADATA_DIR}/) is missing"
        )
        committed = f"the last committed is {last.seq}" if last is not None else "none is committed"
        if len(newer) > 1:
            raise InconsistentTable(
                f"table {self.path}: {len(newer)} checkpoint records ({min(newer)} to {max(newer)}) are newer than its "
                f"last committed one ({committed}; {where}), but an interrupted run leaves at most one" + _NOT_OURS
            )
        record = self.checkpoints.read(newer[0])
        if record is None:
            return None
        expected = self.log.next_batch_id(replace=record.replace)
        if record.batch_id != expected:
            raise InconsistentTable(
                f"table {self.path}: checkpoint record {record.seq} is not committed ({committed}; {where}) and names "
                f"log batch {record.batch_id}, not the one its log takes next ({expected})" + _NOT_OURS
            )
        if given_state is not None and _proves_committed(record, given_state, last):
            batch = os.path.relpath(self.log.batch_path(record.batch_id), self.path)
            raise LogBatchLost(
                f"table {self.path}: the state this sync was given is the one of checkpoint record {record.seq}, so that "
                f"commit happened (a STATE is printed only once its commit is done), but its log batch {batch} is "
                f"missing: lost (not yet on disk at a power loss, or deleted). Readers do not see the commit's "
                f"{record.rows} row(s) in {len(record.files)} file(s), which are still in the folder; nothing was "
                f"deleted. Put the batch back from a backup, or {_REBUILD}"
            )
        return record

    def remove_commit(self, record: CheckpointRecord) -> list[str]:
        """Delete an interrupted commit: its data files, then the record, which names what is left if killed in between."""
        removed = []
        for name in record.files:
            path = os.path.join(self.path, name)
            if os.path.exists(path):
                removed.append(remove_file(path))
                fault_point("recovery.removing")
        removed.append(remove_file(self.checkpoints.path(record.seq)))
        return removed

    def check_files(self) -> None:
        """Every logged data file is here at its logged size; else refused, as writing on would bury the damage under commits."""
        live = self.log.live_files()
        if not live:
            return
        with os.scandir(self.path) as entries:
            sizes = {entry.name: entry.stat().st_size for entry in entries if entry.is_file()}
        missing = [status.path for status in live if file_name(status.path) not in sizes]
        if missing:
            raise TableMoved(
                f"table {self.path}: its log lists {len(missing)} data file(s) that are not in its folder "
                f"(e.g. {missing[0]}); it was moved or copied without them, or they were deleted. Put the files "
                f"back, or {_REBUILD}"
            )
        # (a size of 0 in the log is one not recorded: no Parquet file is empty)
        damaged = [status for status in live if status.size and sizes[file_name(status.path)] != status.size]
        if damaged:
            first = damaged[0]
            raise TableDamaged(
                f"table {self.path}: {len(damaged)} of its data file(s) are not the size its log recorded (e.g. "
                f"{file_name(first.path)}: {sizes[file_name(first.path)]} bytes, logged as {first.size}): cut or emptied "
                f"from outside, and every reader of the table fails on them. Nothing was changed. Put the files back "
                f"from a backup, or {_REBUILD}"
            )

    def adopt_moved_files(self) -> None:
        """Point the log of a table moved, copied or reached by another path at its files here, so readers see the same rows."""
        live = self.log.live_files()
        elsewhere = [status for status in live if os.path.dirname(local_path(status.path)) != self.path]
        if not elsewhere:
            return
        here = [SinkFileStatus.for_local_file(os.path.join(self.path, file_name(status.path))) for status in live]
        batch_id = self.log.next_batch_id(replace=True)
        self.log.write_batch(batch_id, here, replace=True)
        logger.warning(
            "table %s was moved or copied (its log named %s): its %d file(s) are now read where they are",
            self.path, os.path.dirname(local_path(elsewhere[0].path)), len(here),
        )

    def remove_staging_and_temp_files(self) -> list[str]:
        removed = []
        staging = os.path.join(self.path, STAGING_DIR)
        if os.path.isdir(staging):
            leftovers = os.listdir(staging)
            # A killed run's write may still run on a Connect server or executors; whatever it adds is never published.
            shutil.rmtree(staging, ignore_errors=True)
            removed += [os.path.join(staging, name) for name in leftovers]  # an empty folder is no news
        for directory in (self.log.directory, self.checkpoints.directory):
            removed += [remove_file(path) for path in _children(directory) if is_temp_file(os.path.basename(path))]
        return removed


def _proves_committed(record: CheckpointRecord, given: Mapping[str, Any], last: CheckpointRecord | None) -> bool:
    """The given state is one only this commit's STATE could have printed (not a start state a retry also starts from)."""
    return bool(given) and record.covers(given) and not record.started_from(given) and not (last is not None and last.covers(given))


def _children(directory: str) -> list[str]:
    return [os.path.join(directory, name) for name in sorted(os.listdir(directory))] if os.path.isdir(directory) else []


def remove_file(path: str) -> str:
    os.remove(path)
    return path
