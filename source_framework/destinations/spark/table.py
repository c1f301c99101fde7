"""All-or-nothing commits of Arrow tables into one Parquet table folder, readable by plain Spark.

Why: a STATE message may only be emitted once the records before it are durable, and a
reader using nothing but ``spark.read.parquet(table_path)`` (a new session, none of our
code) must see exactly the committed rows: never half a commit, even after a SIGKILL that
leaves stray files in the folder. Spark's file-sink metadata log gives exactly that when
the log is the source of truth, so each commit ends by appending one batch to it (see
``file_sink_log.py``).

Usage::

    table = SparkTable(spark, "warehouse/demo/users")
    info = table.commit(arrow_table, state={"updatedAt": "2025-02-01T00:00:00Z"}, seq=3)
    info.batch_id, info.files, info.rows, info.ms
    table.commit(snapshot, state=None, seq=4, replace=True)   # overwrite mode
    table.last_checkpoint()   # {"seq": 4, "state": None, ...} - newest committed record
    table.live_files()        # file: URIs Spark reads now

Folder layout::

    users/
      _spark_metadata/0, 1, ..., 9.compact, 10, ...   Spark's log (the commit points)
      _checkpoints/00000003.json, ...                 our records (state per commit)
      _staging/<commit>/                              Spark's writer output, transient
      c00000003-0-<uuid>.parquet, ...                 data files

One commit, in order:

1. ``spark.createDataFrame(arrow_table)`` (pyspark 4 takes a ``pyarrow.Table`` directly,
   classic or Spark Connect), ``.coalesce(1).write.mode("overwrite").parquet(_staging/<commit>)``.
2. Rename the ``part-*.parquet`` file(s) into the table folder as
   ``c<seq:08d>-<n>-<uuid>.parquet`` (atomic, same file system), fsync them.
3. Write ``_checkpoints/<seq>.json`` atomically (the caller's state, files, row count).
4. Write the next ``_spark_metadata`` batch atomically: **the commit point**.

A crash before step 4 leaves only invisible leftovers (staging output, unlisted data
files, a record whose batch is missing or lists other files); :meth:`remove_orphans`
deletes them. A crash after step 4 loses nothing: :meth:`last_checkpoint` returns the
committed state, which the runtime resumes from.

What pyspark 4.3 does, checked empirically:

* Given a single folder that contains ``_spark_metadata``, ``spark.read.parquet`` reads
  only the logged files; stray ``.parquet`` files in the folder and in ``_staging`` are
  ignored. A log with no batch yet fails with ``UNABLE_TO_INFER_SCHEMA``, so a table
  becomes readable with its first commit.
* An empty Arrow table becomes a DataFrame with 0 partitions, and the writer still writes
  one schema-only Parquet file (about 400 bytes): an empty commit keeps the table
  readable with its columns, no special case needed.
* The writer also leaves ``_SUCCESS`` and Hadoop ``.crc`` side files in staging; only the
  Parquet files are moved (a missing ``.crc`` merely skips checksum verification).
* ``delete`` log entries are read as ``add``, so ``replace=True`` cannot delete; it jumps
  to the next compaction batch id and writes a compaction batch listing only the new
  files. Replaced files stay on disk (readers that listed them earlier may still be
  reading them); nothing references them any more.

Limits: one writer per table (a per-object lock serialises threads; a second process would
get ``FileExistsError`` on the batch file), and ``seq`` must grow from commit to commit. Spark
writes the files (on its executors, or on a Spark Connect server) and this process moves them
and writes the logs with plain file operations: the table folder must be on a file system both
reach at the same path (a local disk for a local Spark, a shared mount for a cluster). Nothing
here talks to the JVM directly, so the same code runs on a Spark Connect session.
"""

from __future__ import annotations

import json
import os
import shutil
import threading
import time
import uuid
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Iterator, Mapping, Sequence

import pyarrow as pa
import pyarrow.parquet as pq

from source_framework.destinations.spark.atomic_files import (
    fsync_directory,
    fsync_file,
    is_temp_file,
)
from source_framework.destinations.spark.checkpoint_records import CheckpointRecords
from source_framework.destinations.spark.file_sink_log import (
    DEFAULT_COMPACT_INTERVAL,
    FileSinkLog,
    SinkFileStatus,
)
from source_framework.runtime.faults import fault_point

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

STAGING_DIR = "_staging"


@dataclass(frozen=True)
class StagedFiles:
    """Data files written ahead of their commit: a folder under the staging folder."""

    folder: str
    rows: int


@dataclass(frozen=True)
class CommitInfo:
    """What one :meth:`SparkTable.commit` published."""

    seq: int
    batch_id: int
    files: list[str]  # file: URIs, as listed in the metadata log
    rows: int
    ms: float  # wall time of the whole commit


class SparkTable:
    """One Parquet table folder committed through Spark's metadata log."""

    def __init__(
        self,
        spark: "SparkSession | Callable[[], SparkSession]",
        path: str,
        *,
        compact_interval: int = DEFAULT_COMPACT_INTERVAL,
    ):
        # A function is called on the first write, so reading checkpoints or cleaning up
        # need not wait for Spark to start.
        self._spark = spark
        self.path = os.path.abspath(path)
        self._log = FileSinkLog(self.path, compact_interval)
        self._checkpoints = CheckpointRecords(self.path)
        self._lock = threading.Lock()

    @property
    def spark(self) -> "SparkSession":
        if callable(self._spark):
            self._spark = self._spark()
        return self._spark

    # --- writing -----------------------------------------------------------------

    def commit(
        self,
        data: pa.Table,
        state: Mapping[str, Any] | None,
        seq: int,
        replace: bool = False,
        extra: Mapping[str, Any] | None = None,
        staged: Sequence[StagedFiles] = (),
    ) -> CommitInfo:
        """Make ``data`` visible together with ``state``, all or nothing.

        ``data`` is an Arrow table or a Spark DataFrame (e.g. a merge of the table with new rows).
        ``staged``: files written earlier by :meth:`stage` for this commit; they become visible
        with ``data``.
        ``replace=True`` atomically swaps every previously visible row for ``data``.
        ``extra`` (JSON-able) is kept in the checkpoint record: the runtime stores there what it
        needs to resume (the boundary keys, the run's start state).
        ``seq`` must be greater than the last committed one. Returns when the commit is
        durable, i.e. when it is safe to emit the STATE message.
        """
        started = time.perf_counter()
        state = dict(state) if state is not None else None
        json.dumps(state)  # fail before writing anything if the state is not JSON
        with self._lock:
            last = self.last_checkpoint()
            if seq < 0 or (last is not None and seq <= last["seq"]):
                raise ValueError(f"seq {seq} must be greater than the last committed seq {last and last['seq']}")
            files, rows = self._write_data_files(data, seq, staged)
            fault_point("commit.files_written")
            batch_id = self._log.next_batch_id(replace=replace)
            self._checkpoints.write(
                {
                    "seq": seq,
                    "batch_id": batch_id,
                    **dict(extra or {}),
                    "state": state,
                    "files": [status.path for status in files],
                    "rows": rows,
                    "replace": replace,
                    "committed_at": datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ"),
                }
            )
            fault_point("commit.record_written")
            self._log.write_batch(batch_id, files, replace=replace)  # the commit point
            fault_point("commit.done")
        elapsed_ms = (time.perf_counter() - started) * 1000
        return CommitInfo(seq, batch_id, [status.path for status in files], rows, elapsed_ms)

    def stage(self, data: pa.Table) -> StagedFiles:
        """Write ``data``'s files now for a commit still to come (see ``commit(staged=...)``).

        Why: a checkpoint can be far away (a large slice), and rows held until then would grow
        the process's memory with the slice. Staged files sit in the staging folder, invisible
        to readers; a run that dies before the commit leaves them to the next run's clean-up.
        """
        staging = os.path.join(self.path, STAGING_DIR, f"s-{uuid.uuid4().hex}")
        arrow_frame(self.spark, data).coalesce(1).write.mode("overwrite").parquet(spark_path(staging))
        return StagedFiles(staging, data.num_rows)

    def _write_data_files(
        self, data: "pa.Table | DataFrame", seq: int, staged: Sequence[StagedFiles] = ()
    ) -> tuple[list[SinkFileStatus], int]:
        """Let Spark write ``data`` to a private staging folder, then move it, and any files
        staged before, into the table. The rows are counted in the moved files' Parquet footers:
        what the commit publishes, not what was asked for."""
        commit_id = uuid.uuid4().hex
        folders = [item.folder for item in staged]
        if not staged or not isinstance(data, pa.Table) or data.num_rows > 0:
            staging = os.path.join(self.path, STAGING_DIR, f"c{seq:08d}-{commit_id}")
            frame = arrow_frame(self.spark, data) if isinstance(data, pa.Table) else data
            frame.coalesce(1).write.mode("overwrite").parquet(spark_path(staging))
            folders.append(staging)
        parts = [
            os.path.join(folder, name)
            for folder in folders
            for name in sorted(os.listdir(folder))
            if name.startswith("part-") and name.endswith(".parquet")
        ]
        if not parts:
            raise RuntimeError(f"Spark wrote no Parquet file to {folders}")
        moved, rows = [], 0
        for n, part in enumerate(parts):
            target = os.path.join(self.path, f"c{seq:08d}-{n}-{commit_id}.parquet")
            os.rename(part, target)
            fsync_file(target)
            rows += pq.read_metadata(target).num_rows
            moved.append(SinkFileStatus.for_local_file(target))
        fsync_directory(self.path)
        for folder in folders:
            shutil.rmtree(folder, ignore_errors=True)
        return moved, rows

    # --- reading our own state ---------------------------------------------------

    def last_checkpoint(self) -> dict | None:
        """The newest checkpoint record whose commit happened, or None before the first.

        A record counts only if its metadata-log batch exists and lists the record's files.
        """
        return next(self.committed_checkpoints(), None)

    def committed_checkpoints(self) -> Iterator[dict]:
        """Committed checkpoint records, newest first (the resume logic looks back through them)."""
        for seq in self._checkpoints.seqs_newest_first():
            record = self._checkpoints.read(seq)
            if record is not None and self._is_committed(record):
                yield record

    def _is_committed(self, record: dict) -> bool:
        entries = self._log.read_batch(record["batch_id"])
        if entries is None:
            return False
        logged = {entry.path for entry in entries}
        return all(path in logged for path in record["files"])

    def read(self) -> "DataFrame":
        """The committed rows, as any Spark reader sees them."""
        return self.spark.read.parquet(spark_path(self.path))

    def read_staged(self, staged: StagedFiles) -> "DataFrame":
        """The rows of files staged for a commit still to come."""
        return self.spark.read.parquet(spark_path(staged.folder))

    def live_files(self) -> list[str]:
        """``file:`` URIs of the data files a Spark reader sees now."""
        return [status.path for status in self._log.live_files()]

    # --- housekeeping ------------------------------------------------------------

    def remove_orphans(self) -> list[str]:
        """Delete what interrupted commits left behind; return the removed paths.

        Removes data files no metadata-log batch ever listed, checkpoint records newer
        than the last committed one, the staging folder, and temporary files. Files of
        replaced snapshots are kept. Call it only while no commit on this table is in
        progress (e.g. when a sync starts).
        """
        with self._lock:
            fault_point("recovery.start")
            return (
                self._remove_uncommitted_records()
                + self._remove_unlisted_data_files()
                + self._remove_staging_and_temp_files()
            )

    def _remove_uncommitted_records(self) -> list[str]:
        last = self.last_checkpoint()
        removed = []
        for seq in self._checkpoints.seqs_newest_first():
            if last is not None and seq <= last["seq"]:
                break
            removed.append(_remove(self._checkpoints.path(seq)))
        return removed

    def _remove_unlisted_data_files(self) -> list[str]:
        listed = set()
        for batch_id in self._log.batch_ids():
            listed.update(entry.path for entry in self._log.read_batch(batch_id) or [])
        return [
            _remove(path)
            for path in _children(self.path)
            if path.endswith(".parquet") and os.path.isfile(path) and Path(path).as_uri() not in listed
        ]

    def _remove_staging_and_temp_files(self) -> list[str]:
        removed = []
        staging = os.path.join(self.path, STAGING_DIR)
        if os.path.isdir(staging):
            leftovers = os.listdir(staging)
            # A killed run's write can still be running on a Spark Connect server or on
            # executors and add files while we delete. Whatever it leaves is never
            # published (only this process moves files into the table): the next run
            # removes it.
            shutil.rmtree(staging, ignore_errors=True)
            removed += [os.path.join(staging, name) for name in leftovers]  # an empty folder is no news
        for directory in (self._log.directory, self._checkpoints.directory):
            removed += [_remove(path) for path in _children(directory) if is_temp_file(os.path.basename(path))]
        return removed


def arrow_frame(spark: "SparkSession", data: pa.Table) -> "DataFrame":
    """A DataFrame of ``data`` under a classic or a Spark Connect session.

    The schema is the one Spark would infer from the Arrow schema, given explicitly because
    Spark Connect refuses to infer one from an empty table (a commit with no records).
    """
    from pyspark.sql.pandas.types import from_arrow_schema

    return spark.createDataFrame(data, schema=from_arrow_schema(data.schema))


def spark_path(path: str) -> str:
    """``path`` for Spark: always the local file system, whatever the cluster's default file
    system is (HDFS on YARN). A plain "file://" + path, not a percent-encoded URI: Hadoop's
    Path takes it literally."""
    return "file://" + path


def _children(directory: str) -> list[str]:
    return [os.path.join(directory, name) for name in sorted(os.listdir(directory))] if os.path.isdir(directory) else []


def _remove(path: str) -> str:
    os.remove(path)
    return path
