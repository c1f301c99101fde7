"""All-or-nothing, exactly-once commits into a Delta Lake table (``table_format: delta``).

One Delta transaction per commit carries the checkpoint record (``commitInfo.userMetadata``) and an app transaction whose
version is the commit's ``seq``, so a version already held is skipped and a concurrent writer fails instead of doubling rows."""

from __future__ import annotations

import json
import logging
import os
import shutil
import tempfile
import threading
import time
import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.parquet as pq

from source_framework.destinations.checkpoint_record import CheckpointRecord, ResumeNotes, committed_at_now
from source_framework.destinations.spark.arrow_conversion import parquet_options
from source_framework.destinations.spark.atomic_files import remove_folder
from source_framework.destinations.spark.commit_parts import ARROW_PARQUET_OPTIONS, CommitInfo, PageRows, StagedFiles, parquet_batches
from source_framework.destinations.spark.delta_file_commit import commit_files, files_fit
from source_framework.destinations.spark.delta_log import (
    RECORD_KEY,
    RESET_KEY,
    history_newest_first,
    record_of,
    reset_of,
    rows_of,
    with_counts,
)
from source_framework.destinations.spark.delta_merge import DedupMerge
from source_framework.destinations.spark.layout import is_object_store
from source_framework.destinations.spark.spark_frames import arrow_frame, spark_path
from source_framework.destinations.spark.table_recovery import STAGING_DIR
from source_framework.destinations.spark.table_schema import schema_from_footer, schema_from_json
from source_framework.helpers.faults import fault_point

if TYPE_CHECKING:
    from deltalake import DeltaTable
    from pyspark.sql import DataFrame, SparkSession

logger = logging.getLogger("source_framework.spark")

#: the app id of our app transactions: one per table, whose versions are the table's commit seqs
APP_ID = "source_framework"
#: Delta's own default (``delta.deletedFileRetentionDuration``): time travel reaches back this far
VACUUM_RETENTION_HOURS = 7 * 24
LOG_FOLDER = "_delta_log"


class RecordLost(RuntimeError):
    """The table holds a commit of ours whose checkpoint record Delta's log clean-up removed."""


class ConcurrentRun(RuntimeError):
    """Delta refused a commit: another writer committed a conflicting one meanwhile."""


def is_delta_table(path: str) -> bool:
    if is_object_store(path):
        from deltalake import DeltaTable

        return bool(DeltaTable.is_deltatable(path))
    return os.path.isdir(os.path.join(path, LOG_FOLDER))


def delete_delta_table(uri: str) -> bool:
    """Delete a table on an object store: its log first, so readers and the next sync find no table, then its data."""
    import pyarrow.fs as pafs

    if not is_delta_table(uri):
        return False
    filesystem, path = pafs.FileSystem.from_uri(uri)
    filesystem.delete_dir(f"{path}/{LOG_FOLDER}")
    fault_point("state.reset.deleting")
    filesystem.delete_dir(path)
    return True


def local_staging_root() -> str:
    """Where a table on a store stages rows on local disk: a folder per process, named by its pid."""
    return os.path.join(tempfile.gettempdir(), "source_framework-staging")


def remove_staging_of_ended_processes() -> list[str]:
    """A killed run's staged rows for a store stay on this disk: remove the folders of processes no longer running.

    (Only those: runs on the same store may run at once, each with staged rows still to commit.)"""
    root = local_staging_root()
    ended = [os.path.join(root, name) for name in (os.listdir(root) if os.path.isdir(root) else [])
             if name.isdigit() and not _running(int(name))]
    for folder in ended:
        shutil.rmtree(folder, ignore_errors=True)
    return ended


def _running(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process
        return True
    return True


class DeltaLakeTable:
    """One Delta table, committed one checkpoint per Delta transaction."""

    takes_page_commits = False

    def __init__(self, spark: SparkSession | Callable[[], SparkSession], path: str, *, arrow_writes: bool = False):
        self._spark = spark
        self.arrow_writes = arrow_writes
        self.remote = is_object_store(path)
        self.path = path if self.remote else os.path.realpath(path)
        self._uri_for_spark = path if self.remote else spark_path(self.path)
        self._lock = threading.Lock()
        #: delta-rs advances its table object with each commit, so the next need not read the log again
        self._delta: DeltaTable | None = None
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
        merge: DedupMerge | None = None,
    ) -> CommitInfo:
        """Make ``data`` (and ``staged`` rows) visible with ``state`` in one Delta transaction; ``merge``: a Delta MERGE by key."""
        if pages is not None:
            raise ValueError("a Delta table's commits are written by this process, not by the page converter")
        started = time.perf_counter()
        state = dict(state) if state is not None else None
        json.dumps(state)  # fail before writing anything if the state is not JSON
        fault_point("commit.start")
        with self._lock:
            last = self._newest or self.last_checkpoint()
            if seq < 0 or (last is not None and seq <= last.seq):
                raise ValueError(f"seq {seq} must be greater than the last committed seq {last and last.seq}")
            self._newest = None
            notes = notes or ResumeNotes()
            record = CheckpointRecord(
                seq=seq, batch_id=-1, state=state, rows=0, replace=replace, committed_at=committed_at_now(),
                start_state=notes.start_state, boundary=dict(notes.boundary), boundary_full=notes.boundary_full,
                merged_states=tuple(dict(s) for s in merged_states), reset_id=reset_id,
                schema=dict(schema) if schema is not None else None,
            )
            metadata = json.dumps({RECORD_KEY: json.loads(record.to_json())}, separators=(",", ":"))
            fault_point("commit.files_written")  # (nothing is written before the transaction itself)
            if isinstance(data, pa.Table) and (self.arrow_writes or merge is not None):
                counted = self._write_arrow(data, staged, seq, metadata, replace, merge)
            else:
                self._write_spark(data, staged, seq, metadata, replace)
                counted = None
            rows, version = counted or self._committed_rows(seq)
            for item in staged:
                remove_folder(item.folder)
            self._newest = CheckpointRecord.from_json({**json.loads(record.to_json()), "batch_id": version, "rows": rows})
            fault_point("commit.done")
        return CommitInfo(seq, version, [], rows, (time.perf_counter() - started) * 1000)

    def _write_arrow(self, data: pa.Table, staged: Sequence[StagedFiles], seq: int, metadata: str, replace: bool,
                     merge: DedupMerge | None = None) -> tuple[int, int] | None:
        """delta-rs: stream, merge or add files as written (``delta_file_commit``); returns (rows, version) if known, else None."""
        from deltalake import CommitProperties, PostCommitHookProperties, Transaction, write_deltalake

        properties = CommitProperties(app_transactions=[Transaction(APP_ID, seq)], custom_metadata={"userMetadata": metadata})
        # Expired-log clean-up lists the whole log after every commit: left to Delta's own cadence.
        hooks = PostCommitHookProperties(create_checkpoint=True, cleanup_expired_logs=False)
        from deltalake.exceptions import CommitFailedError

        table = self._delta or self._open()
        as_written = (merge is None and not replace and table is not None and not self.remote
                      and files_fit(table, data, staged))
        files = [file for item in staged for file in item.parquet_files()]
        batches = [*parquet_batches(files, data.schema), *data.to_batches()] if not as_written else []
        rows: Any = pa.RecordBatchReader.from_batches(data.schema, batches)
        if merge is not None:  # (MERGE takes its source whole; a new or replaced table gets one row per key)
            rows = pa.Table.from_batches(batches, data.schema)
            rows = rows if table is not None and not replace else merge.latest_per_key(rows)
        try:
            if as_written:
                assert table is not None
                added = commit_files(table, self.path, data, staged, seq, hooks=hooks, properties_for=lambda rows, files: CommitProperties(
                    app_transactions=[Transaction(APP_ID, seq)], custom_metadata={"userMetadata": with_counts(metadata, rows, files)}))
                table.update_incremental()  # (the object does not follow its own transaction)
                self._delta = table
                return added, table.version()
            elif merge is not None and table is not None and not replace:
                before = table.version()
                merge.apply(table, rows, properties, hooks)
                if table.version() == before:
                    # A MERGE that changes no row commits nothing, but the checkpoint needs its commit.
                    write_deltalake(table, rows.slice(0, 0), mode="append", schema_mode="merge",
                                    commit_properties=properties, post_commithook_properties=hooks)
            elif table is None:
                write_deltalake(self.path, rows, mode="error", commit_properties=properties, post_commithook_properties=hooks)
            else:
                write_deltalake(table, rows, mode="overwrite" if replace else "append",
                                schema_mode="overwrite" if replace else "merge",
                                commit_properties=properties, post_commithook_properties=hooks)
        except CommitFailedError as error:
            self._delta = None
            raise ConcurrentRun(
                f"{self.path}: another writer committed to this table while this run wrote its commit {seq} ({error}); "
                "nothing of this commit was written. Is another run of this sync going on?"
            ) from None
        except Exception:
            self._delta = None  # read again: whatever happened, the log says
            raise
        return None

    def _write_spark(self, data: pa.Table | DataFrame, staged: Sequence[StagedFiles], seq: int, metadata: str,
                     replace: bool) -> None:
        """Spark's Delta writer; Delta skips a ``(txnAppId, txnVersion)`` the table already holds."""
        frame = arrow_frame(self.spark, data) if isinstance(data, pa.Table) else data
        for item in staged:
            frame = self.read_staged(item).unionByName(frame)
        writer = (frame.write.format("delta").mode("overwrite" if replace else "append")
                  .option("txnAppId", APP_ID).option("txnVersion", seq).option("userMetadata", metadata)
                  .option("overwriteSchema" if replace else "mergeSchema", "true"))
        writer.save(self._uri_for_spark)
        self._delta = None  # delta-rs's snapshot is behind Spark's commit now

    def _committed_rows(self, seq: int) -> tuple[int, int]:
        """The rows and Delta version of commit ``seq``, from the log's metrics: counted by the writer, not taken on trust."""
        table = self._delta = self._delta or self._open()
        if table is None:
            raise RuntimeError(f"{self.path}: no Delta table after commit {seq}")
        table.update_incremental()
        for info in table.history(10):
            record = record_of(info)
            if record is not None and record.get("seq") == seq:
                return rows_of(info), int(info["version"])
        raise RuntimeError(f"{self.path}: commit {seq} is not in the table's newest Delta log entries")

    def stage(self, data: pa.Table) -> StagedFiles:
        folder = self.staging_folder()
        if self.arrow_writes:
            os.makedirs(folder, exist_ok=True)
            pq.write_table(data, os.path.join(folder, f"part-00000-{uuid.uuid4().hex}.parquet"),
                           **parquet_options(ARROW_PARQUET_OPTIONS, data.schema))
        else:
            arrow_frame(self.spark, data).coalesce(1).write.mode("overwrite").parquet(spark_path(folder))
        return StagedFiles(folder, data.num_rows)

    def staging_folder(self) -> str:
        root = os.path.join(local_staging_root(), str(os.getpid())) if self.remote else os.path.join(self.path, STAGING_DIR)
        return os.path.join(root, f"s-{uuid.uuid4().hex}")

    def _open(self) -> DeltaTable | None:
        from deltalake import DeltaTable
        from deltalake.exceptions import TableNotFoundError

        if not self.remote and not is_delta_table(self.path):
            return None
        try:
            return DeltaTable(self.path)
        except TableNotFoundError:
            return None

    def last_checkpoint(self) -> CheckpointRecord | None:
        return next(self.committed_checkpoints(), None)

    def committed_checkpoints(self) -> Iterator[CheckpointRecord]:
        """Our records in the Delta log, newest first, passing over other writers' commits; the log is the commit."""
        table = self._open()
        if table is None:
            return
        done = table.transaction_version(APP_ID)
        first = True
        for info in history_newest_first(table):
            raw = record_of(info)
            if raw is None:
                continue
            record = CheckpointRecord.from_json({**raw, "batch_id": info["version"], "rows": rows_of(info)})
            if first and done is not None and record.seq < done:
                raise RecordLost(
                    f"{self.path}: the Delta table holds commit {done} of source_framework, but its newest checkpoint "
                    f"record is of commit {record.seq}: Delta's log clean-up (delta.logRetentionDuration) removed the "
                    "newer ones. Give the sync its state (--state) or rebuild the table (state reset)."
                )
            first = False
            yield record

    def read(self) -> DataFrame:
        return self.spark.read.format("delta").load(self._uri_for_spark)

    def read_staged(self, staged: StagedFiles) -> DataFrame:
        return self.spark.read.parquet(spark_path(staged.folder))

    def live_files(self) -> list[str]:
        table = self._open()
        return table.file_uris() if table is not None else []

    def rows_where(self, schema: pa.Schema, columns: list[str], where: Any) -> pa.Table:
        import pyarrow.dataset as ds
        import pyarrow.fs as pafs

        files = self.live_files()
        if not files:
            return schema.empty_table().select(columns)
        filesystem = pafs.FileSystem.from_uri(files[0])[0] if self.remote else None
        paths = [uri.split("://", 1)[1] for uri in files] if self.remote else files
        return ds.dataset(paths, schema=schema, format="parquet", filesystem=filesystem).to_table(columns=columns, filter=where)

    def live_bytes(self) -> int:
        table = self._open()
        return sum(pa.table(table.get_add_actions()).column("size_bytes").to_pylist()) if table is not None else 0

    def live_rows(self) -> int:
        table = self._open()
        return table.to_pyarrow_dataset().count_rows() if table is not None else 0

    def recorded_schema(self) -> pa.Schema | None:
        """The schema our newest commit recorded; for a Delta table of someone else's, Delta's."""
        last = self.last_checkpoint()
        if last is not None and last.schema is not None:
            return schema_from_json(last.schema)
        table = self._open()
        return schema_from_footer(pa.schema(table.schema().to_arrow())) if table is not None else None

    def request_reset(self) -> str:
        """Mark the table in its own log (a transaction that changes no row), so any store takes a reset in one transaction."""
        reset_id = uuid.uuid4().hex
        self._mark({"requested": reset_id})
        return reset_id

    def pending_reset(self) -> str | None:
        table = self._open()
        for info in history_newest_first(table) if table is not None else ():
            if record_of(info) is not None:
                return None
            reset = reset_of(info)
            if reset is not None:
                return reset.get("requested")
        return None

    def clear_reset(self) -> None:
        if self.pending_reset() is not None:
            self._mark({"cleared": True})

    def _mark(self, reset: dict[str, Any]) -> None:
        from deltalake import CommitProperties, write_deltalake

        table = self._open()
        if table is None:
            raise RuntimeError(f"{self.path}: no Delta table to mark")
        no_rows = pa.schema(table.schema().to_arrow()).empty_table()
        metadata = json.dumps({RESET_KEY: reset}, separators=(",", ":"))
        write_deltalake(table, no_rows, mode="append", commit_properties=CommitProperties(custom_metadata={"userMetadata": metadata}))
        self._delta = None

    def recover(self, given_state: Mapping[str, Any] | None = None) -> list[str]:
        """A killed run left at most staged files and data files no log entry names (VACUUM takes those): remove the staging."""
        self._delta, self._newest = None, None
        if self.remote:
            return remove_staging_of_ended_processes()
        staging = os.path.join(self.path, STAGING_DIR)
        leftovers = [os.path.join(staging, name) for name in os.listdir(staging)] if os.path.isdir(staging) else []
        shutil.rmtree(staging, ignore_errors=True)
        return leftovers

    def optimize(self) -> dict[str, Any]:
        """Compact small files in a Delta transaction that changes no row, then VACUUM; returns delta-rs's metrics."""
        from deltalake import PostCommitHookProperties

        table = self._open()
        if table is None:
            return {}
        metrics = dict(table.optimize.compact())
        metrics["filesVacuumed"] = len(table.vacuum(retention_hours=VACUUM_RETENTION_HOURS, dry_run=False,
                                                    post_commithook_properties=PostCommitHookProperties(cleanup_expired_logs=False)))
        self._delta = None
        return metrics

    def reclaim(self, retention_seconds: float = 0, now: float | None = None) -> list[str]:
        """Delta's VACUUM after ``VACUUM_RETENTION_HOURS``; ``retention_seconds`` does not apply: time travel keeps Delta's retention."""
        table = self._open()
        if table is None:
            return []
        from deltalake import PostCommitHookProperties

        return list(table.vacuum(retention_hours=VACUUM_RETENTION_HOURS, dry_run=False,
                                 post_commithook_properties=PostCommitHookProperties(cleanup_expired_logs=False)))

