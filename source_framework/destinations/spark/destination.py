"""The Spark destination: one table per stream, one atomic commit per checkpoint.

Commits' Parquet files are written here with Arrow, as handing them to a local Spark cost more CPU than reading the records;
Spark starts in the background only when a sync needs it (merges, rewrites)."""

from __future__ import annotations

import datetime as dt
import logging
import os
import re
import threading
import uuid
from collections.abc import Iterable, Iterator, Mapping
from typing import Any, Protocol

from source_framework.destinations.base import Destination, StreamSink, StreamTarget
from source_framework.destinations.checkpoint_record import CheckpointRecord, ResumeNotes
from source_framework.destinations.spark.arrow_conversion import ON_TYPE_MISMATCH, arrow_schema, warm_up
from source_framework.destinations.spark.atomic_files import fsync_directory
from source_framework.destinations.spark.buffer import STAGE_ROWS, StreamBuffer
from source_framework.destinations.spark.commit_parts import CommitInfo
from source_framework.destinations.spark.committer import BackgroundCommitter
from source_framework.destinations.spark.cursor_order import arrow_rows_before, spark_rows_before
from source_framework.destinations.spark.delta_table import DeltaLakeTable, delete_delta_table, is_delta_table
from source_framework.destinations.spark.layout import is_object_store, table_path, warehouse_for
from source_framework.destinations.spark.page_conversion import ConverterPool
from source_framework.destinations.spark.session import CONNECT_RETRY_SECONDS, get_spark
from source_framework.destinations.spark.table import DEFAULT_RETENTION_SECONDS, SparkTable
from source_framework.destinations.spark.table_lock import TableLock, no_commit_in_flight
from source_framework.destinations.spark.table_writer import ARROW_REWRITE_BYTES, TableWriter
from source_framework.helpers.faults import fault_point
from source_framework.helpers.tuning import TUNING

logger = logging.getLogger("source_framework.spark")

Table = SparkTable | DeltaLakeTable


def new_sync_id() -> str:
    """Sortable and unique: ``20261123T101500Z-1a2b3c4d``."""
    return dt.datetime.now(dt.UTC).strftime("%Y%m%dT%H%M%SZ") + "-" + uuid.uuid4().hex[:8]


class CommittedTable(Protocol):
    """A table as its readers see it: the committed checkpoints and rows, and no way to change them."""

    path: str

    def last_checkpoint(self) -> CheckpointRecord | None: ...

    def committed_checkpoints(self) -> Iterator[CheckpointRecord]: ...

    def read(self) -> Any: ...


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
        writer: str = "auto",
        connect_retry_seconds: float = CONNECT_RETRY_SECONDS,
        converters: ConverterPool | None = None,
        on_type_mismatch: str = "null",
        table_format: str = "delta",
        former_namespaces: Iterable[str] = (),
        group_size: int = TUNING.group_checkpoints,
    ) -> None:
        self.group_size = group_size
        if table_format not in TABLE_FORMATS:
            raise ValueError(f"table_format must be one of {', '.join(TABLE_FORMATS)}, not {table_format!r}")
        self.table_format = table_format
        if on_type_mismatch not in ON_TYPE_MISMATCH:
            raise ValueError(f"on_type_mismatch must be one of {', '.join(ON_TYPE_MISMATCH)}, not {on_type_mismatch!r}")
        self.on_type_mismatch = on_type_mismatch
        self.warehouse = warehouse_for(warehouse, table_format)
        self.remote = is_object_store(self.warehouse)
        self.default_namespace = default_namespace
        self.former_namespaces = tuple(name for name in former_namespaces if name != default_namespace)
        self._paths: dict[str, str] = {}  # stream -> its table, for streams without a namespace
        self.master = master
        self.stage_rows = max(1, stage_rows)
        self.retention_seconds = retention_seconds
        self.wait_for_lock = wait_for_lock
        if writer not in WRITERS:
            raise ValueError(f"writer must be one of {', '.join(WRITERS)}, not {writer!r}")
        self.arrow_writes = writer != "spark"
        self.sync_id = new_sync_id()
        self.connect_retry_seconds = connect_retry_seconds
        self.committer = BackgroundCommitter(self._apply, max_pending_records, max_pending_bytes)
        self._locks: dict[str, TableLock] = {}
        self.converters = converters if converters is not None else ConverterPool()
        self._warmed = False  # Arrow's first conversion done in this process (``open_stream``)
        self._spark: Any = None
        self._spark_error: BaseException | None = None
        self._spark_lost: BaseException | None = None  # the Connect server stopped answering
        self._spark_conf = dict(spark_conf or {})
        self._starting = threading.Thread(target=self._start_spark, daemon=True)
        self._start_lock = threading.Lock()  # streams synced at once may ask for Spark together

    @property
    def secrets(self) -> list[str]:
        """What of the master URL no log line or error may show (a Spark Connect token or header)."""
        return master_secrets(self.master)

    def _start_spark(self) -> None:
        try:
            self._spark = get_spark(self.master, conf=self._spark_conf, connect_retry_seconds=self.connect_retry_seconds)
        except BaseException as error:  # re-raised on first use, in the thread that needs it
            self._spark_error = error

    @property
    def spark(self) -> Any:
        self.start_spark()  # not started ahead (a state command): start it now
        self._starting.join()
        if self._spark_error is not None:
            # not chained when the URL holds secrets: pyspark's own error quotes it, token and all
            reason = self._masked(str(self._spark_error))
            cause = None if master_secrets(self.master) else self._spark_error
            raise RuntimeError(f"Spark did not start (master {self._masked(self.master)}): {reason}") from cause
        if self._spark_lost is not None:
            # Each stream would otherwise wait out the retries again, on a session that is gone.
            raise RuntimeError(
                f"the Spark Connect server (master {self._masked(self.master)}) stopped answering earlier in this run "
                f"({self._masked(' '.join(str(self._spark_lost).split())[:300])}); nothing more is committed through it"
            )
        return self._spark

    def _apply(self, jobs: list[Any]) -> Any:
        try:
            return jobs[0].writer.apply(jobs)
        except Exception as error:
            if self.master.startswith("sc://") and self._spark_lost is None and _unreachable(error):
                self._spark_lost = error
            raise

    def _masked(self, text: str) -> str:
        """``text`` without the master URL's Spark Connect parameters' values (tokens, auth headers) or user info."""
        for secret in master_secrets(self.master):
            text = text.replace(secret, "****")
        return text

    def table_path(self, namespace: str | None, stream: str) -> str:
        """Where the stream's table is; a table under a former default namespace stays, so no second table starts beside it."""
        if namespace or not self.former_namespaces:
            return table_path(self.warehouse, namespace or self.default_namespace, stream)
        if stream not in self._paths:  # decided once: every command of this process finds the same table
            path = table_path(self.warehouse, self.default_namespace, stream)
            if not self._exists(path):
                for former in self.former_namespaces:
                    old = table_path(self.warehouse, former, stream)
                    if self._exists(old):
                        logger.info("stream %s: its table stays at %s, where an earlier version put it (tables new "
                                    "to this source go under %s)", stream, old, os.path.dirname(path))
                        path = old
                        break
            self._paths[stream] = path
        return self._paths[stream]

    def _exists(self, path: str) -> bool:
        return is_delta_table(path) if self.remote else os.path.isdir(path)

    def table(self, namespace: str | None, stream: str) -> Table:
        return self._table_at(self.table_path(namespace, stream), lambda: self.spark, arrow_writes=self.arrow_writes)

    def _table_at(self, path: str, spark: Any, arrow_writes: bool = False) -> Table:
        """The table at ``path`` in its own format, a new one in ``table_format``: a new default never converts or orphans a table."""
        if self.remote or is_delta_table(path):
            return DeltaLakeTable(spark, path, arrow_writes=arrow_writes)
        if self.table_format == "delta" and not os.path.isdir(os.path.join(path, "_spark_metadata")):
            return DeltaLakeTable(spark, path, arrow_writes=arrow_writes)
        return SparkTable(spark, path, arrow_writes=arrow_writes)

    def committed_table(self, namespace: str | None, stream: str, spark: Any = None) -> CommittedTable:
        """A table to look at, for the tools: no lock is taken, nothing changes; Spark starts only for ``read()``."""
        return self._table_at(self.table_path(namespace, stream), spark if spark is not None else (lambda: self.spark))

    def reserve(self, streams: Iterable[tuple[str | None, str]]) -> None:
        """Lock every table the sync writes, then start Spark while the first pages are read if the tables need it."""
        for namespace, stream in streams:
            self.lock(namespace, stream, purpose="read")
        if not self.arrow_writes:
            self.start_spark()  # (with Arrow's writes, ``open_stream`` starts it for a table that needs it: see ``needs_spark``)
        if self.arrow_writes:  # a page converter (``page_conversion``) starts meanwhile, for the first stream
            self.converters.warm()

    def start_spark(self) -> None:
        with self._start_lock:
            if self._starting.ident is None:
                self._starting.start()

    def lock(self, namespace: str | None, stream: str, purpose: str) -> str:
        path = self.table_path(namespace, stream)
        if path not in self._locks and not self.remote:
            # (No lock on an object store: Delta refuses a second run's commit, whose app transaction conflicts.)
            self._locks[path] = TableLock(path, purpose=purpose, wait=self.wait_for_lock).acquire()
        return path

    def open_stream(self, target: StreamTarget) -> StreamSink:
        table = self.open_table(target.namespace, target.name, purpose="read", given_state=target.state)
        writer = TableWriter(table, target, arrow_schema(dict(target.json_schema)), recorded_schema=table.recorded_schema(),
                             sync_id=self.sync_id, on_type_mismatch=self.on_type_mismatch)
        if writer.needs_spark:
            self.start_spark()  # in the background, while the stream's first pages are read
        if table.pending_reset() is None:
            # A pending reset may yet replace the table: then the sync decides (discard_reset checks).
            writer.check_schema()  # before anything is written: an incompatible change fails this stream
        # Records taken from their pages' bytes need a table this process writes (``page_conversion``).
        pages = target.pages if self.arrow_writes else None
        if pages is None and not self._warmed:
            # Arrow's first conversion done here, before reading: in a thread it held the import lock the first commit waits for.
            warm_up()
            self._warmed = True
        return StreamBuffer(writer, self.committer, self.stage_rows, pages=pages, converters=self.converters,
                            group_size=self.group_size)

    def open_table(self, namespace: str | None, stream: str, purpose: str, given_state: Mapping[str, Any] | None = None) -> Table:
        """The stream's table, locked and made whole for writing; ``read`` and ``state set`` open tables this one way."""
        path = self.lock(namespace, stream, purpose=purpose)
        if not self.arrow_writes:
            self.start_spark()
        if not self.remote:
            _remove_deleted_leftovers(path)
        table = self._table_at(path, lambda: self.spark, arrow_writes=self.arrow_writes)
        removed = table.recover(given_state)
        if removed:
            logger.info("%s: removed %d file(s) an interrupted run of ours left", stream, len(removed))
        reclaimed = table.reclaim(self.retention_seconds)
        if reclaimed:
            logger.info("%s: deleted %d file(s) no reader needs any more", stream, len(reclaimed))
        return table

    def describe(self) -> str:
        return f"Spark tables under {self.warehouse} (master {self._masked(self.master)})"

    def close(self) -> None:
        try:
            self.committer.close()
            self.converters.close()
            if self._starting.ident is not None:
                self._starting.join()
        finally:
            for lock in self._locks.values():
                lock.release()
            self._locks.clear()

    def has_table(self, namespace: str | None, stream: str) -> bool:
        """The stream's table exists; creates nothing (not even a lock file): the ``state`` commands look before they lock."""
        return self._exists(self.table_path(namespace, stream))

    def request_reset(self, namespace: str | None, stream: str) -> str | None:
        table = self.table(namespace, stream)
        if table.last_checkpoint() is None:
            return None
        return table.request_reset()

    def delete_table(self, namespace: str | None, stream: str) -> bool:
        """Delete the table folder: moved aside in one rename, so readers see the whole table or none, then removed."""
        path = self.table_path(namespace, stream)
        if self.remote:
            return delete_delta_table(path)
        _remove_deleted_leftovers(path)
        if not os.path.isdir(path):
            return False
        aside = os.path.join(os.path.dirname(path), f".{os.path.basename(path)}{_DELETED}{uuid.uuid4().hex}")
        with no_commit_in_flight(path):
            os.rename(path, aside)
        fsync_directory(os.path.dirname(path))
        fault_point("state.reset.deleting")
        _remove_tree(aside)
        return True

    def convert_table(self, namespace: str | None, stream: str) -> int:
        from source_framework.destinations.spark.table_conversion import convert_to_delta

        return convert_to_delta(self.lock(namespace, stream, purpose="convert"))

    def optimize_table(self, namespace: str | None, stream: str) -> dict[str, Any]:
        table = self._table_at(self.lock(namespace, stream, purpose="optimize"), lambda: self.spark)
        if not isinstance(table, DeltaLakeTable):
            raise NotDelta(f"{table.path} is a Parquet table folder: optimize compacts Delta tables (convert it first: "
                           "main.py convert)")
        return table.optimize()

    def truncate_from(
        self,
        namespace: str | None,
        stream: str,
        cursor_field: str,
        cursor: str,
        new_state: Mapping[str, Any],
        old_state: Mapping[str, Any],
    ) -> tuple[CommitInfo, str] | None:
        """Keep the rows before ``cursor``, committed as a checkpoint of ``new_state`` that records ``old_state`` as its start."""
        table = self.open_table(namespace, stream, purpose="state set", given_state=old_state)
        last = table.last_checkpoint()
        if last is None:
            return None
        # A table this process writes is split in its memory if it fits: no JVM for one command.
        schema = table.recorded_schema() if table.arrow_writes and table.live_bytes() <= ARROW_REWRITE_BYTES else None
        kept = (arrow_rows_before(table.rows_where(schema, schema.names, None), cursor_field, cursor) if schema is not None
                else spark_rows_before(table.read(), cursor_field, cursor))
        notes = ResumeNotes(start_state=dict(old_state), boundary={})
        info = table.commit(
            kept, dict(new_state), last.seq + 1, replace=True, notes=notes, schema=last.schema, reset_id=table.pending_reset(),
        )
        fault_point("state.set.committed")
        table.clear_reset()
        return info, f"{'Delta version' if isinstance(table, DeltaLakeTable) else 'log batch'} {info.batch_id}"


class NotDelta(ValueError):
    """A command for Delta tables met a table in another format."""


def _unreachable(error: BaseException) -> bool:
    """A gRPC call the server never answered (gone, or not listening), after pyspark's retries."""
    seen: BaseException | None = error
    while seen is not None:
        if "StatusCode.UNAVAILABLE" in str(seen) or "RETRIES_EXCEEDED" in str(seen):
            return True
        seen = seen.__cause__ or seen.__context__
    return False


def master_secrets(master: str) -> list[str]:
    """The parts of a master URL to mask wherever they appear (pyspark's errors quote the URL)."""
    found = [match.group(1) for match in _USER_INFO.finditer(master)]
    for match in _PARAMETER.finditer(master):
        if match.group(1).lower() not in _CONNECT_SETTINGS and match.group(2):
            found.append(match.group(2))
    return sorted(set(found), key=len, reverse=True)


_PARAMETER = re.compile(r";([^;=/]+)=([^;]*)")
_USER_INFO = re.compile(r"://([^/@]*)@")
#: Spark Connect URL parameters that are settings, not headers (``pyspark.sql.connect``'s ChannelBuilder)
_CONNECT_SETTINGS = {"use_ssl", "user_id", "user_agent", "session_id", "grpc_keepalive_enabled",
                     "grpc_keepalive_time_ms", "grpc_keepalive_timeout_ms", "grpc_keepalive_without_calls",
                     "grpc_max_message_size"}

#: the ``writer`` settings: "auto" (the default) is "arrow", whatever the master
WRITERS = ("auto", "arrow", "spark")
#: what a new table is made as: a Delta Lake table, or a Spark file-sink Parquet folder
TABLE_FORMATS = ("delta", "parquet")

#: ``.<table folder>.deleted-<uuid>``: a table ``delete_table`` moved aside, being deleted
_DELETED = ".deleted-"
_UUID_HEX = re.compile("[0-9a-f]{32}")


def _remove_deleted_leftovers(path: str) -> None:
    """Finish deletions of this table that were cut short (``delete_table``'s folders: a table never starts with a dot)."""
    parent, prefix = os.path.dirname(path), f".{os.path.basename(path)}{_DELETED}"
    if os.path.isdir(parent):
        for name in sorted(os.listdir(parent)):
            # exactly delete_table's name: another stream's lock file may start the same way (".a.deleted-x.lock")
            moved_aside = name.startswith(prefix) and _UUID_HEX.fullmatch(name[len(prefix):]) is not None
            if moved_aside and os.path.isdir(os.path.join(parent, name)):
                _remove_tree(os.path.join(parent, name))


def _remove_tree(folder: str) -> None:
    """``shutil.rmtree`` with a fault point after each file, so fault tests can kill a deletion half done."""
    for current, folders, files in os.walk(folder, topdown=False):
        for name in files:
            os.remove(os.path.join(current, name))
            fault_point("state.reset.deleting")
        for name in folders:
            os.rmdir(os.path.join(current, name))
    os.rmdir(folder)
