"""The Spark destination: one Parquet table per stream, one atomic commit per checkpoint.

Tables live at ``<warehouse>/<namespace or source name>/<stream>``. Records become Arrow
batches of ``BATCH_ROWS`` as they arrive (typed once per batch from the stream's JSON schema,
see ``arrow_conversion``), so what waits for Spark is columnar, several times smaller than the
parsed dicts. At a checkpoint the batches go to the ``BackgroundCommitter``, which makes them
one commit of the stream's ``SparkTable`` while reading goes on. ``commit`` returns the future
the runtime waits on before printing the STATE.

Spark starts in a background thread as soon as the destination is created, so the JVM's
start-up overlaps the first HTTP requests.
"""

from __future__ import annotations

import datetime as dt
import json
import logging
import os
import shutil
import threading
import time
import uuid
from concurrent.futures import Future
from typing import Any, Dict, Iterator, List, Mapping, Optional

import pyarrow as pa

from source_framework.destinations.base import (
    APPEND_DEDUP,
    OVERWRITE,
    CommitReceipt,
    Destination,
    StreamSink,
    StreamTarget,
    done,
)
from source_framework.destinations.spark.arrow_conversion import (
    CHECKPOINT,
    arrow_schema,
    records_to_arrow,
)
from source_framework.destinations.spark.atomic_files import write_atomically
from source_framework.destinations.spark.committer import BackgroundCommitter, CommitJob
from source_framework.destinations.spark.session import get_spark
from source_framework.destinations.spark.table import SparkTable, StagedFiles, arrow_frame

logger = logging.getLogger("source_framework.spark")


def new_sync_id() -> str:
    """Sortable and unique: ``20261123T101500Z-1a2b3c4d``."""
    return dt.datetime.now(dt.timezone.utc).strftime("%Y%m%dT%H%M%SZ") + "-" + uuid.uuid4().hex[:8]


RESET_MARKER = "_sf_reset.json"

#: Records per Arrow batch: large enough that conversion runs at columnar speed, small enough
#: that few parsed dicts are alive at once.
BATCH_ROWS = 4096

#: Rows a sink holds before it has them written to staged files ahead of their checkpoint.
STAGE_ROWS = 100_000


class SparkSink(StreamSink):
    """Buffers one stream's records and commits them to its table at each checkpoint.

    - ``append``: each commit adds its rows.
    - ``overwrite``: the stream's only commit (at ``finish``) replaces the table in one step.
    - ``append_dedup``: each commit merges its rows into the table, keeping one row per primary
      key (the latest cursor, then the latest extraction) and replaces the table with the
      result; plain readers see one row per key. Each commit rewrites the table.

    A table is rebuilt (its first commit in this run replaces it) when the stream re-syncs from
    scratch on purpose: ``state reset`` left a marker in the table, or the target says so.
    """

    def __init__(self, destination: "SparkDestination", target: StreamTarget, path: str) -> None:
        self._destination = destination
        self.target = target
        self.path = path
        self.location = path
        self._schema = arrow_schema(dict(target.json_schema))
        self._records: List[Mapping[str, Any]] = []
        self._extracted_at: List[int] = []
        self._batches: List[pa.Table] = []
        self._batched_rows = 0
        self._stage_rows = destination.stage_rows
        self._batch_rows = min(BATCH_ROWS, self._stage_rows)
        self._staged_since_commit = 0  # rows handed over as stage-only jobs (reading thread)
        self._staged: List[StagedFiles] = []  # their files, once written (committer thread)
        self._mode = target.destination_sync_mode
        self._table: Optional[SparkTable] = None
        self._reset_id: Optional[str] = None
        self._replace_next = self._mode == OVERWRITE or target.rebuild
        self._next_seq = 0
        self._last_commit: Optional["Future[Any]"] = None  # the future of the last commit asked for
        self.name = target.name
        self.failed: Optional[BaseException] = None
        self.commits = 0  # writes that reached the table (committer thread)
        self.rows = 0  # rows they published (committer thread)
        if self._mode == APPEND_DEDUP and not target.primary_key:
            raise ValueError(f"stream '{target.name}': append_dedup needs a primary key")

    @property
    def table(self) -> SparkTable:
        """Opened on first use: recovers what an interrupted run left, reads the last commit."""
        if self._table is None:
            self._table = SparkTable(lambda: self._destination.spark, self.path)
            removed = self._table.remove_orphans()
            if removed:
                logger.info("%s: removed %d file(s) left by an interrupted run", self.target.name, len(removed))
            last = self._table.last_checkpoint()
            self._next_seq = (last["seq"] + 1) if last else 0
            self._reset_id = self._pending_reset(last)
            if self._reset_id:
                self._replace_next = True
                logger.info("%s: the state was reset; this sync replaces the table", self.target.name)
        return self._table

    def _pending_reset(self, last: Optional[Mapping[str, Any]]) -> Optional[str]:
        marker = os.path.join(self.path, RESET_MARKER)
        if not os.path.exists(marker):
            return None
        with open(marker) as handle:
            reset_id = json.load(handle).get("reset_id")
        if last and last.get("reset_id") == reset_id:
            os.remove(marker)  # applied by a run that died before removing it
            return None
        return reset_id

    def committed(self) -> Iterator[Mapping[str, Any]]:
        table = self.table
        if self._replace_next:
            return iter(())  # a rebuild starts over: nothing in the table counts
        return table.committed_checkpoints()

    def write(self, record: Mapping[str, Any]) -> None:
        self._records.append(record)
        self._extracted_at.append(int(time.time() * 1000))
        if len(self._records) >= self._batch_rows:
            self._to_arrow()
            if self._batched_rows >= self._stage_rows:
                self._submit_stage()

    def _to_arrow(self) -> None:
        """The records so far become one Arrow batch; its checkpoint number is set at commit."""
        if not self._records:
            return
        batch = records_to_arrow(
            self._records,
            self._schema,
            extracted_at_ms=self._extracted_at,
            sync_id=self._destination.sync_id,
            checkpoint=-1,
        )
        self._batches.append(batch)
        self._batched_rows += batch.num_rows
        self._records, self._extracted_at = [], []

    def commit(self, state: Optional[Mapping[str, Any]], notes: Optional[Mapping[str, Any]] = None) -> "Future[Any]":
        return self._submit(state, notes)

    def finish(self, state: Optional[Mapping[str, Any]], notes: Optional[Mapping[str, Any]] = None) -> "Future[Any]":
        if self._mode == OVERWRITE or self.target.rebuild or self._records or self._batches or self._staged_since_commit:
            return self._submit(state, notes)
        # Nothing left to write: the last commit's receipt already counts every row.
        return self._last_commit if self._last_commit is not None else done(CommitReceipt(0, 0))

    def abort(self) -> None:
        self._records, self._extracted_at = [], []
        self._batches, self._batched_rows = [], 0

    def _submit(self, state: Optional[Mapping[str, Any]], notes: Optional[Mapping[str, Any]]) -> "Future[Any]":
        self._to_arrow()
        self._staged_since_commit = 0
        self._last_commit = self._destination.committer.submit(self._job(state, notes, stage_only=False))
        return self._last_commit

    def _submit_stage(self) -> None:
        """Hand the rows held so far to Spark ahead of their checkpoint (a failure surfaces at
        the next commit, through ``failed``)."""
        self._staged_since_commit += self._batched_rows
        self._destination.committer.submit(self._job(None, None, stage_only=True))

    def _job(self, state: Optional[Mapping[str, Any]], notes: Optional[Mapping[str, Any]], stage_only: bool) -> CommitJob:
        """The batches held so far, as one job for the committer; the sink starts holding anew."""
        batches, rows = self._batches, self._batched_rows
        self._batches, self._batched_rows = [], 0
        return CommitJob(self, batches, rows, sum(b.nbytes for b in batches), state, notes, stage_only=stage_only)

    def commit_jobs(self, jobs: List[CommitJob]) -> List[Any]:
        """Runs on the committer's thread: one Spark write for one or more queued checkpoints;
        returns each job's result (a ``CommitReceipt``, or the ``StagedFiles`` of a stage job)."""
        if self.failed is not None:
            raise RuntimeError(f"stream '{self.name}': an earlier commit failed ({self.failed})")
        batches = [batch for job in jobs for batch in job.batches]
        if jobs[0].stage_only:
            table = self.table  # opened first: it knows the next commit's number
            staged = table.stage(self._numbered(batches, self._next_seq))
            self._staged.append(staged)
            return [staged] * len(jobs)
        notes = dict(jobs[-1].notes or {})
        if len(jobs) > 1:
            # The STATEs of the merged checkpoints are printed too; a later run given one of
            # them must know the table already holds what came after it.
            notes["merged_states"] = [dict(job.state or {}) for job in jobs[:-1]]
        self._commit(batches, jobs[-1].state, notes)
        return [CommitReceipt(self.rows, self.commits)] * len(jobs)

    def _commit(self, batches: List[pa.Table], state: Optional[Mapping[str, Any]], notes: Optional[Mapping[str, Any]]) -> Any:
        table = self.table
        seq = self._next_seq
        arrow = self._numbered(batches, seq)
        data: Any = arrow
        staged, self._staged = self._staged, []
        new_rows = arrow.num_rows + sum(item.rows for item in staged)
        publish, merged_away = staged, []
        replace = self._replace_next
        if self._mode == APPEND_DEDUP:
            data = self._merged(arrow, include_table=not replace, staged=staged)
            publish, merged_away, replace = [], staged, True
        extra = dict(notes or {})
        if self._reset_id:
            extra["reset_id"] = self._reset_id
        info = table.commit(data, state=dict(state or {}), seq=seq, replace=replace, extra=extra, staged=publish)
        if self._mode != APPEND_DEDUP:
            # Counted in the footers of the files just published, not taken on trust: the
            # runtime prints the STATE only if they hold every record it handed over.
            new_rows = info.rows
        for item in merged_away:  # their rows are in the new table version now
            shutil.rmtree(item.folder, ignore_errors=True)
        if self._reset_id:
            os.remove(os.path.join(self.path, RESET_MARKER))
            self._reset_id = None
        self._replace_next = False  # a rebuild replaces once; the rest of this run adds to it
        self._next_seq = seq + 1
        self.commits += 1
        self.rows += new_rows
        logger.debug("%s: commit %d, %d new rows, %.0f ms", self.name, seq, new_rows, info.ms)
        return info

    def _numbered(self, batches: List[pa.Table], seq: int) -> pa.Table:
        """One Arrow table of ``batches``, its rows marked as belonging to commit ``seq``."""
        arrow = pa.concat_tables(batches) if batches else self._schema.empty_table()
        column = pa.repeat(pa.scalar(seq, pa.int64()), arrow.num_rows)
        return arrow.set_column(arrow.schema.get_field_index(CHECKPOINT), CHECKPOINT, column)

    def _merged(self, arrow: Any, include_table: bool, staged: List[StagedFiles]) -> Any:
        """The table's rows plus the new ones (``arrow``'s and the staged files'), one per primary
        key: latest cursor, then latest extraction."""
        from pyspark.sql import Window
        from pyspark.sql import functions as F

        frame = arrow_frame(self._destination.spark, arrow)
        for item in staged:
            frame = frame.unionByName(self.table.read_staged(item))
        if include_table and self.table.last_checkpoint() is not None:
            frame = self.table.read().unionByName(frame)
        keys = [F.col(".".join(path)) for path in self.target.primary_key]
        order = [F.col(c).desc_nulls_last() for c in self.target.cursor_field[:1]]
        order += [F.col("_sf_extracted_at").desc(), F.col("_sf_checkpoint").desc()]
        rank = F.row_number().over(Window.partitionBy(*keys).orderBy(*order))
        return frame.withColumn("_sf_rank", rank).where(F.col("_sf_rank") == 1).drop("_sf_rank")


def request_reset(table_path: str) -> None:
    """Mark a table so that the stream's next sync replaces it (``state reset`` without ``--tables``)."""
    if not os.path.isdir(table_path):
        return
    write_atomically(os.path.join(table_path, RESET_MARKER), json.dumps({"reset_id": uuid.uuid4().hex}).encode())


class SparkDestination(Destination):
    """Writes every stream to its own table under ``warehouse``.

    ::

        destination = SparkDestination("./warehouse", default_namespace="demo")
        sink = destination.open_stream(target)    # -> ./warehouse/demo/<stream>
    """

    def __init__(
        self,
        warehouse: str,
        default_namespace: str,
        master: str = "local[*]",
        spark_conf: Optional[Mapping[str, str]] = None,
        max_pending_records: int = 200_000,
        max_pending_bytes: int = 256 * 1024 * 1024,
        stage_rows: int = STAGE_ROWS,
    ) -> None:
        self.warehouse = warehouse if "://" in warehouse else os.path.abspath(warehouse)
        self.committer = BackgroundCommitter(lambda jobs: jobs[0].sink.commit_jobs(jobs), max_pending_records, max_pending_bytes)
        self.stage_rows = max(1, stage_rows)
        self.default_namespace = default_namespace
        self.master = master
        self.sync_id = new_sync_id()
        self.sinks: Dict[str, SparkSink] = {}
        self._spark: Any = None
        self._spark_error: Optional[BaseException] = None
        self._starting = threading.Thread(target=self._start_spark, args=(dict(spark_conf or {}),), daemon=True)
        self._starting.start()

    def _start_spark(self, conf: Dict[str, str]) -> None:
        try:
            self._spark = get_spark(self.master, conf=conf)
        except BaseException as error:  # re-raised on first use, in the reading thread
            self._spark_error = error

    @property
    def spark(self) -> Any:
        self._starting.join()
        if self._spark_error is not None:
            raise RuntimeError(f"Spark did not start (master {self.master}): {self._spark_error}") from self._spark_error
        return self._spark

    def table_path(self, target: StreamTarget) -> str:
        return os.path.join(self.warehouse, target.namespace or self.default_namespace, target.name)

    def open_stream(self, target: StreamTarget) -> StreamSink:
        sink = SparkSink(self, target, self.table_path(target))
        self.sinks[target.name] = sink
        return sink

    def describe(self) -> str:
        return f"Spark tables under {self.warehouse} (master {self.master})"

    def close(self) -> None:
        self.committer.close()
        self._starting.join()
