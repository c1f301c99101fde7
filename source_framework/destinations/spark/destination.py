"""The Spark destination: one Parquet table per stream, one atomic commit per checkpoint.

Tables live at ``<warehouse>/<namespace or source name>/<stream>`` (``layout.py`` decides, names
encoded into safe folder names). Each stream gets a ``StreamBuffer`` (the reading thread's side:
records -> Arrow batches -> commit jobs) and a ``TableWriter`` (the committer thread's side: jobs
-> Spark -> the table's log), with one ``BackgroundCommitter`` thread between them::

    destination = SparkDestination("./warehouse", default_namespace="demo")
    destination.reserve([(None, "users")])       # the tables' locks: one writer per table
    sink = destination.open_stream(target)         # -> ./warehouse/demo/users
    ...
    destination.close()                            # waits for the commits, releases the locks

The same object answers the ``state`` commands (``reset``, ``delete``, ``truncate``), so the
table layout and the rules for changing a table live here only.

Spark starts in a background thread once ``reserve`` holds the tables' locks, so the JVM's
start-up overlaps the first HTTP requests (and a sync that cannot run starts no JVM).
"""

from __future__ import annotations

import datetime as dt
import logging
import os
import shutil
import threading
import uuid
from collections.abc import Iterable, Mapping
from typing import Any

from source_framework.destinations.base import Destination, StreamSink, StreamTarget
from source_framework.destinations.checkpoint_record import ResumeNotes
from source_framework.destinations.spark.arrow_conversion import arrow_schema
from source_framework.destinations.spark.buffer import STAGE_ROWS, StreamBuffer
from source_framework.destinations.spark.committer import BackgroundCommitter
from source_framework.destinations.spark.layout import table_path
from source_framework.destinations.spark.session import get_spark
from source_framework.destinations.spark.table import DEFAULT_RETENTION_SECONDS, RESET_MARKER, SparkTable
from source_framework.destinations.spark.table_lock import TableLock
from source_framework.destinations.spark.table_writer import TableWriter

logger = logging.getLogger("source_framework.spark")


def new_sync_id() -> str:
    """Sortable and unique: ``20261123T101500Z-1a2b3c4d``."""
    return dt.datetime.now(dt.UTC).strftime("%Y%m%dT%H%M%SZ") + "-" + uuid.uuid4().hex[:8]


class SparkDestination(Destination):
    """Writes every stream to its own table under ``warehouse``."""

    def __init__(
        self,
        warehouse: str,
        default_namespace: str,
        master: str = "local[*]",
        spark_conf: Mapping[str, str] | None = None,
        max_pending_records: int = 200_000,
        max_pending_bytes: int = 256 * 1024 * 1024,
        stage_rows: int = STAGE_ROWS,
        retention_seconds: float = DEFAULT_RETENTION_SECONDS,
        wait_for_lock: bool = False,
    ) -> None:
        self.warehouse = os.path.realpath(warehouse)
        self.default_namespace = default_namespace
        self.master = master
        self.stage_rows = max(1, stage_rows)
        self.retention_seconds = retention_seconds
        self.wait_for_lock = wait_for_lock
        self.sync_id = new_sync_id()
        self.committer = BackgroundCommitter(lambda jobs: jobs[0].writer.apply(jobs), max_pending_records, max_pending_bytes)
        self._locks: dict[str, TableLock] = {}
        self._spark: Any = None
        self._spark_error: BaseException | None = None
        self._spark_conf = dict(spark_conf or {})
        self._starting = threading.Thread(target=self._start_spark, daemon=True)

    # -- Spark --------------------------------------------------------------------------------

    def _start_spark(self) -> None:
        try:
            self._spark = get_spark(self.master, conf=self._spark_conf)
        except BaseException as error:  # re-raised on first use, in the thread that needs it
            self._spark_error = error

    @property
    def spark(self) -> Any:
        self.start_spark()  # not started ahead (a state command): start it now
        self._starting.join()
        if self._spark_error is not None:
            raise RuntimeError(f"Spark did not start (master {self.master}): {self._spark_error}") from self._spark_error
        return self._spark

    # -- where tables are -----------------------------------------------------------------------

    def table_path(self, namespace: str | None, stream: str) -> str:
        return table_path(self.warehouse, namespace or self.default_namespace, stream)

    def table(self, namespace: str | None, stream: str) -> SparkTable:
        return SparkTable(lambda: self.spark, self.table_path(namespace, stream))

    # -- read -----------------------------------------------------------------------------------

    def reserve(self, streams: Iterable[tuple[str | None, str]]) -> None:
        """Lock every table the sync writes, then start Spark while the first pages are read."""
        for namespace, stream in streams:
            self.lock(namespace, stream, purpose="read")
        self.start_spark()

    def start_spark(self) -> None:
        """Start Spark in the background (once); ``spark`` waits for it."""
        if self._starting.ident is None:
            self._starting.start()

    def lock(self, namespace: str | None, stream: str, purpose: str) -> str:
        """Hold the table's lock until ``close`` (fails fast, or waits with ``wait_for_lock``)."""
        path = self.table_path(namespace, stream)
        if path not in self._locks:
            self._locks[path] = TableLock(path, purpose=purpose, wait=self.wait_for_lock).acquire()
        return path

    def open_stream(self, target: StreamTarget) -> StreamSink:
        path = self.lock(target.namespace, target.name, purpose="read")
        self.start_spark()
        table = SparkTable(lambda: self.spark, path)
        removed = table.recover()
        if removed:
            logger.info("%s: removed %d file(s) an interrupted run of ours left", target.name, len(removed))
        reclaimed = table.reclaim(self.retention_seconds)
        if reclaimed:
            logger.info("%s: deleted %d file(s) no reader needs any more", target.name, len(reclaimed))
        writer = TableWriter(table, target, arrow_schema(dict(target.json_schema)), recorded_schema=table.recorded_schema())
        if table.pending_reset() is None:
            # A pending reset may yet replace the table: then the sync decides (discard_reset checks).
            writer.check_schema()  # before anything is written: an incompatible change fails this stream
        return StreamBuffer(writer, self.committer, self.sync_id, self.stage_rows)

    def describe(self) -> str:
        return f"Spark tables under {self.warehouse} (master {self.master})"

    def close(self) -> None:
        try:
            self.committer.close()
            if self._starting.ident is not None:
                self._starting.join()
        finally:
            for lock in self._locks.values():
                lock.release()
            self._locks.clear()

    # -- the state commands -----------------------------------------------------------------------

    def request_reset(self, namespace: str | None, stream: str) -> str | None:
        """Mark the table so that the stream's next sync from an empty state replaces it; None
        when there is no table."""
        table = self.table(namespace, stream)
        if table.last_checkpoint() is None:
            return None
        return table.request_reset()

    def delete_table(self, namespace: str | None, stream: str) -> bool:
        """Delete the table folder. The log goes first (the table is then empty to every reader)
        and the reset marker last, so a deletion cut short still has the next sync rebuild it."""
        path = self.table_path(namespace, stream)
        if not os.path.isdir(path):
            return False
        for name in sorted(os.listdir(path), key=lambda n: n != "_spark_metadata"):
            if name != RESET_MARKER:
                target = os.path.join(path, name)
                shutil.rmtree(target) if os.path.isdir(target) else os.remove(target)
        shutil.rmtree(path)
        return True

    def truncate_from(
        self, namespace: str | None, stream: str, cursor_field: str, cursor: str, new_state: Mapping[str, Any]
    ) -> int | None:
        """Keep the rows before ``cursor`` (and those without one), committed as a checkpoint of
        ``new_state``, so the stream's next sync from ``new_state`` reads the rest exactly once.
        Returns the rows kept, or None when there is no table."""
        from pyspark.sql import functions as F

        table = self.table(namespace, stream)
        last = table.last_checkpoint()
        if last is None:
            return None
        frame = table.read()
        column = frame[cursor_field]
        kept = frame.where(column.isNull() | (column < F.lit(cursor).cast(frame.schema[cursor_field].dataType)))
        notes = ResumeNotes(start_state=dict(new_state), boundary={})
        info = table.commit(kept, dict(new_state), last.seq + 1, replace=True, notes=notes, schema=last.schema)
        table.clear_reset()  # a reset before this is superseded: the next sync starts from new_state
        return info.rows

