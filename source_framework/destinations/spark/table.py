"""All-or-nothing commits of Arrow tables into one Parquet table folder, readable by plain Spark.

Each commit ends by appending one batch to Spark's file-sink log, the commit point (``docs/tables.md``, "How a commit
lands"): a reader never sees half a commit, even after a SIGKILL, and ``recover`` removes only leftovers it proves ours."""

from __future__ import annotations

import json
import logging
import os
import threading
import time
import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.parquet as pq

from source_framework.destinations.checkpoint_record import CheckpointRecord, ResumeNotes, committed_at_now, committed_at_seconds, file_name
from source_framework.destinations.spark.arrow_conversion import parquet_options
from source_framework.destinations.spark.atomic_files import fsync_file, make_folders
from source_framework.destinations.spark.checkpoint_folder import CheckpointFolder
from source_framework.destinations.spark.commit_parts import ARROW_PARQUET_OPTIONS, CommitInfo, PageRows, StagedFiles, parquet_batches
from source_framework.destinations.spark.file_sink_log import DEFAULT_COMPACT_INTERVAL, FileSinkLog, SinkFileStatus
from source_framework.destinations.spark.file_sink_log import local_path as _local_path
from source_framework.destinations.spark.parquet_commit import CommitPlan, carry_out
from source_framework.destinations.spark.passed_states import PassedStates
from source_framework.destinations.spark.reset_marker import ResetMarker
from source_framework.destinations.spark.spark_frames import arrow_frame, spark_path
from source_framework.destinations.spark.table_lock import no_commit_in_flight
from source_framework.destinations.spark.table_recovery import STAGING_DIR, FolderRecovery
from source_framework.destinations.spark.table_recovery import remove_file as _remove
from source_framework.destinations.spark.table_schema import schema_from_footer, schema_from_json
from source_framework.helpers.faults import crashed_elsewhere, fault_point, reached_elsewhere

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession


logger = logging.getLogger("source_framework.spark")

#: How long files a replace made invisible stay on disk (readers that listed them may need them).
DEFAULT_RETENTION_SECONDS = 6 * 3600
#: Checkpoint records kept however old (``runtime.resume`` looks back through them).
KEEP_RECORDS = 1000


class SparkTable(ResetMarker):
    """One Parquet table folder committed through Spark's metadata log."""

    takes_page_commits = True

    def __init__(
        self,
        spark: SparkSession | Callable[[], SparkSession],
        path: str,
        *,
        compact_interval: int = DEFAULT_COMPACT_INTERVAL,
        arrow_writes: bool = False,
    ):
        # A function is called on first use, so reading checkpoints and cleaning up need not wait for Spark to start.
        self._spark = spark
        self.arrow_writes = arrow_writes
        # One spelling of the folder, whatever symlink led here: the log's paths use it.
        self.path = os.path.realpath(path)
        self._log = FileSinkLog(self.path, compact_interval)
        self._checkpoints = CheckpointFolder(self.path)
        self._lock = threading.Lock()
        #: the newest commit this object made: the next one need not list and read the folders
        self._newest: CheckpointRecord | None = None

    @property
    def spark(self) -> SparkSession:
        if callable(self._spark):
            self._spark = self._spark()
        return self._spark

    def commit(
        self,
        data: pa.Table | DataFrame,
        state: Mapping[str, Any] | None,
        seq: int,
        *,
        replace: bool = False,
        notes: ResumeNotes | None = None,
        merged_states: Sequence[Mapping[str, Any]] = (),
        reset_id: str | None = None,
        schema: Mapping[str, Any] | None = None,
        staged: Sequence[StagedFiles] = (),
        pages: PageRows | None = None,
    ) -> CommitInfo:
        """Make ``data`` (with ``staged`` files or the page converter's ``pages``) visible with ``state``, all or nothing."""
        started = time.perf_counter()
        state = dict(state) if state is not None else None
        json.dumps(state)  # fail before writing anything if the state is not JSON
        fault_point("commit.start")
        with self._lock:
            last = self._last_committed()
            if seq < 0 or (last is not None and seq <= last.seq):
                raise ValueError(f"seq {seq} must be greater than the last committed seq {last and last.seq}")
            self._newest = None  # until this commit is done: a failed one leaves the folders to be read again
            if last is None:
                self._make_folders()
            parts, folders, written_here = self._write_parts(data, seq, staged, more=pages is not None)
            commit_id = uuid.uuid4().hex
            count = len(parts) + (written_here is not None) + (pages is not None)
            names = _data_file_names(seq, count, commit_id, leads_schema=_leads_schema(schema, replace, last))
            counted = {os.path.join(item.folder, name) for item in staged for name in item.files}
            rows = sum(item.rows for item in staged if item.files)
            rows += sum(pq.read_metadata(part).num_rows for part in parts if part not in counted)
            rows += written_here.num_rows if written_here is not None else 0
            rows += pages.rows if pages is not None else 0
            batch_id = self._log.next_batch_id(replace=replace)
            replaced = tuple(sorted(self._live_names())) if replace else ()
            notes = notes or ResumeNotes()
            record = CheckpointRecord(
                seq=seq, batch_id=batch_id, state=state, files=tuple(names), rows=rows, replace=replace,
                committed_at=committed_at_now(), start_state=notes.start_state, boundary=dict(notes.boundary),
                boundary_full=notes.boundary_full,
                merged_states=tuple(dict(s) for s in merged_states), reset_id=reset_id,
                schema=dict(schema) if schema is not None else None, replaced=replaced,
            )
            head, live_before = self._log.batch_head(batch_id, replace=replace)
            targets = [os.path.join(self.path, name) for name in names]
            file = targets[-1] if written_here is not None or pages is not None else None
            plan = CommitPlan(
                table=self.path, record=self._checkpoints.path(seq), record_text=record.to_json().decode("utf-8"),
                moves=list(zip(parts, targets[:len(parts)], strict=True)),
                unsynced=[target for part, target in zip(parts, targets[:len(parts)], strict=True) if part not in counted],
                file=file, folders=folders, batch=self._log.batch_path(batch_id), head=head,
                added=[SinkFileStatus(Path(target).as_uri(), 0, 0).to_json()
                       for target in [*targets[:len(parts)], *([file] if file is not None else [])]],
            )
            answer: dict[str, Any] = {}
            if pages is not None:
                answer = self._commit_by(pages, plan, seq)
                added = answer["added"]
            else:
                added = carry_out(plan, lambda path: self._write_in(written_here, path), fault_point)
            statuses = [SinkFileStatus.from_json(line) for line in added]
            self._log.batch_written(batch_id, live_before, statuses, replace=replace)  # (the commit point is passed)
            self._newest = record
            fault_point("commit.done")
        elapsed_ms = (time.perf_counter() - started) * 1000
        return CommitInfo(seq, batch_id, [status.path for status in statuses], rows, elapsed_ms,
                          answer.get("counts") or {})

    def _make_folders(self) -> None:
        """Make the log's folder first: a folder without ``_spark_metadata/`` is listed, so a data file would show before its batch."""
        make_folders(self._log.directory)
        make_folders(self._checkpoints.directory)

    def _commit_by(self, pages: PageRows, plan: CommitPlan, seq: int) -> dict[str, Any]:
        """``plan`` carried out by the page converter: the fault points are counted here and honoured there."""
        answer = pages.converter.publish({
            "token": pages.token, "rows": pages.rows, "seq": seq,
            "plan": plan.as_json(),
            # (a process that stops at the first point never reaches the second)
            "stop": reached_elsewhere("commit.record_written") or reached_elsewhere("commit.files_written"),
        })
        if "stopped" in answer:
            crashed_elsewhere(answer["stopped"])
        return answer

    def stage(self, data: pa.Table) -> StagedFiles:
        """Write ``data``'s files now, invisible, for a commit still to come, so a far checkpoint need not hold a slice in memory."""
        staging = self.staging_folder()
        self._write_parquet(data, staging)
        return StagedFiles(staging, data.num_rows)

    def staging_folder(self) -> str:
        return os.path.join(self.path, STAGING_DIR, f"s-{uuid.uuid4().hex}")

    def _write_parts(
        self, data: pa.Table | DataFrame, seq: int, staged: Sequence[StagedFiles], more: bool = False
    ) -> tuple[list[str], list[str], pa.Table | None]:
        written_here = None
        if not (staged or more) or not isinstance(data, pa.Table) or data.num_rows > 0:
            if isinstance(data, pa.Table) and self.arrow_writes:
                # No staging folder to make, list and remove: at a small interval that is most of a commit's file work.
                written_here = data
            else:
                staging = os.path.join(self.path, STAGING_DIR, f"c{seq:08d}-{uuid.uuid4().hex}")
                self._write_parquet(data, staging)
                staged = [*staged, StagedFiles(staging, 0)]
        folders = [item.folder for item in staged]
        parts = [file for item in staged for file in item.parquet_files()]
        if not parts and written_here is None and not more:
            raise RuntimeError(f"Spark wrote no Parquet file to {folders}")
        return parts, folders, written_here

    def _write_parquet(self, data: pa.Table | DataFrame, folder: str) -> None:
        if isinstance(data, pa.Table) and self.arrow_writes:
            os.makedirs(folder, exist_ok=True)
            pq.write_table(data, os.path.join(folder, f"part-00000-{uuid.uuid4().hex}.parquet"),
                           **parquet_options(ARROW_PARQUET_OPTIONS, data.schema))
            return
        frame = arrow_frame(self.spark, data) if isinstance(data, pa.Table) else data
        frame.coalesce(1).write.mode("overwrite").parquet(spark_path(folder))

    def _write_in(self, data: pa.Table, target: str) -> None:
        pq.write_table(data, target, **parquet_options(ARROW_PARQUET_OPTIONS, data.schema))
        fsync_file(target)
        written = pq.read_metadata(target).num_rows
        if written != data.num_rows:
            raise RuntimeError(f"{target}: {written} rows in its footer, {data.num_rows} were written")

    def _last_committed(self) -> CheckpointRecord | None:
        """``last_checkpoint()``, remembered from our own last commit while no other followed it (it would write the next record)."""
        newest = self._newest
        if newest is not None and not os.path.exists(self._checkpoints.path(newest.seq + 1)):
            return newest
        self._log.forget()
        return self.last_checkpoint()

    def last_checkpoint(self) -> CheckpointRecord | None:
        """The newest checkpoint record whose commit happened (its log batch lists its files), or None before the first."""
        return next(self.committed_checkpoints(), None)

    def committed_checkpoints(self) -> Iterator[CheckpointRecord]:
        """Committed records, newest first: records older than the newest committed one are committed too (one writer, in order)."""
        found = False
        for seq in self._checkpoints.seqs_newest_first():
            record = self._checkpoints.read(seq)
            if record is None:
                continue
            if found or self._is_committed(record):
                found = True
                yield record

    def _is_committed(self, record: CheckpointRecord) -> bool:
        entries = self._log.read_batch(record.batch_id)
        if entries is None:
            return False
        logged = {file_name(entry.path) for entry in entries}
        return all(name in logged for name in record.files)

    def read(self) -> DataFrame:
        return self.spark.read.parquet(spark_path(self.path))

    def read_staged(self, staged: StagedFiles) -> DataFrame:
        return self.spark.read.parquet(spark_path(staged.folder))

    def live_files(self) -> list[str]:
        return [status.path for status in self._log.live_files()]

    def rows_where(self, schema: pa.Schema, columns: list[str], where: Any) -> pa.Table:
        import pyarrow.dataset as ds

        paths = [_local_path(uri) for uri in self.live_files()]
        if not paths:
            return schema.empty_table().select(columns)
        dataset = ds.dataset(paths, schema=schema, format="parquet")
        try:
            return dataset.to_table(columns=columns, filter=where)
        except pa.ArrowNotImplementedError:
            # A file with another column type (a widening not yet rewritten) cannot be filtered by statistics: filter after reading.
            parts = [pa.Table.from_batches([batch]).filter(where).select(columns) for batch in dataset.to_batches()]
            return pa.concat_tables(parts) if parts else schema.empty_table().select(columns)

    def rows(self, schema: pa.Schema) -> pa.Table:
        """Every row, as ``schema`` (columns added since a file was written are null in its rows)."""
        return pa.Table.from_batches(parquet_batches([_local_path(uri) for uri in self.live_files()], schema), schema)

    def live_bytes(self) -> int:
        return sum(os.path.getsize(_local_path(status.path)) for status in self._log.live_files())

    def _live_names(self) -> set[str]:
        return {file_name(status.path) for status in self._log.live_files()}

    def recorded_schema(self) -> pa.Schema | None:
        """The schema the newest commit recorded, or for older tables the footer of the first live file (as plain readers do)."""
        last = self.last_checkpoint()
        if last is None:
            return None
        if last.schema is not None:
            return schema_from_json(last.schema)
        live = sorted(status.path for status in self._log.live_files())
        return schema_from_footer(pq.read_schema(_local_path(live[0]))) if live else None

    def recover(self, given_state: Mapping[str, Any] | None = None) -> list[str]:
        """Before writing, with the table's lock: remove an interrupted commit of ours, adopt moved files; all checked first."""
        with self._lock, no_commit_in_flight(self.path):
            self._newest = None
            self._log.forget()
            fault_point("recovery.start")
            folder = FolderRecovery(self.path, self._log, self._checkpoints)
            interrupted = folder.interrupted_commit(self.last_checkpoint(), given_state)
            folder.check_files()
            removed = folder.remove_commit(interrupted) if interrupted is not None else []
            folder.adopt_moved_files()
            return removed + folder.remove_staging_and_temp_files()

    def reclaim(self, retention_seconds: float = DEFAULT_RETENTION_SECONDS, now: float | None = None) -> list[str]:
        """Delete what no reader needs, once old enough; only files a committed record of this table names are ever deleted."""
        now = time.time() if now is None else now
        cutoff = now - retention_seconds
        with self._lock:
            live = self._live_names()
            records = list(self.committed_checkpoints())
            removed, dropped = [], []
            for index, record in enumerate(records):
                old_enough = committed_at_seconds(record.committed_at) < cutoff
                if record.replaced and old_enough:
                    removed += [_remove(path) for path in self._files_here(record.replaced, live)]
                if index >= KEEP_RECORDS and old_enough and not (set(record.files) - live) & self._present():
                    dropped.append(record)
            PassedStates(self.path).add(dropped)  # before the records go: their states keep their meaning
            removed += [_remove(self._checkpoints.path(record.seq)) for record in dropped]
            newest_batch = records[0].batch_id if records else None
            removed += self._remove_old_batches(cutoff, newest_batch)
            return removed

    def _files_here(self, names: Sequence[str], live: set[str]) -> list[str]:
        return [os.path.join(self.path, n) for n in names if n not in live and os.path.exists(os.path.join(self.path, n))]

    def _present(self) -> set[str]:
        return set(os.listdir(self.path)) if os.path.isdir(self.path) else set()

    def _remove_old_batches(self, cutoff: float, newest_record_batch: int | None) -> list[str]:
        """Batches before the newest compaction batch, except the newest record's: it is how a commit is known to have happened."""
        ids = self._log.batch_ids()
        compacted = [batch_id for batch_id in ids if self._log.is_compact_batch(batch_id)]
        if not compacted or newest_record_batch is None:
            return []
        keep_from = min(compacted[-1], newest_record_batch)
        removed = []
        for batch_id in ids:
            path = self._log.batch_path(batch_id)
            if batch_id < keep_from and os.path.getmtime(path) < cutoff:
                removed.append(_remove(path))
        return removed


#: a schema-leading file of commit ``seq`` is named ``a<LEADING_BASE - seq>``: newer ones sort first
LEADING_BASE = 99_999_999


def _leads_schema(schema: Mapping[str, Any] | None, replace: bool, last: CheckpointRecord | None) -> bool:
    return not replace and last is not None and schema is not None and dict(schema) != last.schema


def _data_file_names(seq: int, count: int, commit_id: str, leads_schema: bool) -> list[str]:
    """``c<seq>-...``, or ``a<LEADING_BASE - seq>-...`` for a new schema: Spark takes the schema from the first file by path."""
    prefix = f"a{LEADING_BASE - seq:08d}" if leads_schema else f"c{seq:08d}"
    return [f"{prefix}-{n}-{commit_id}.parquet" for n in range(count)]
