"""The Spark destination: one Parquet table per stream, one atomic commit per checkpoint.

Tables live at ``<warehouse>/<namespace or source name>/<stream>``. Records are buffered as
they arrive; at a checkpoint they become one Arrow table (typed from the stream's JSON schema,
see ``arrow_conversion``) and one commit of the stream's ``SparkTable``. ``commit`` returns a
finished future: the boundary with the runtime already allows commits to run in the background.

Spark starts in a background thread as soon as the destination is created, so the JVM's
start-up overlaps the first HTTP requests.
"""

from __future__ import annotations

import datetime as dt
import logging
import os
import threading
import time
import uuid
from concurrent.futures import Future
from typing import Any, Dict, List, Mapping, Optional

from source_framework.destinations.base import (
    OVERWRITE,
    Destination,
    StreamSink,
    StreamTarget,
    done,
)
from source_framework.destinations.spark.arrow_conversion import (
    arrow_schema,
    records_to_arrow,
)
from source_framework.destinations.spark.session import get_spark
from source_framework.destinations.spark.table import SparkTable

logger = logging.getLogger("source_framework.spark")


def new_sync_id() -> str:
    """Sortable and unique: ``20261123T101500Z-1a2b3c4d``."""
    return dt.datetime.now(dt.timezone.utc).strftime("%Y%m%dT%H%M%SZ") + "-" + uuid.uuid4().hex[:8]


class SparkSink(StreamSink):
    """Buffers one stream's records and commits them to its table at each checkpoint."""

    def __init__(self, destination: "SparkDestination", target: StreamTarget, path: str) -> None:
        self._destination = destination
        self.target = target
        self.path = path
        self._schema = arrow_schema(dict(target.json_schema))
        self._records: List[Mapping[str, Any]] = []
        self._extracted_at: List[int] = []
        self._replace = target.destination_sync_mode == OVERWRITE
        self._table: Optional[SparkTable] = None
        self._last: Optional[Mapping[str, Any]] = None
        self._boundary: Optional[Mapping[str, Any]] = None
        self._next_seq: Optional[int] = None
        self.commits = 0
        self.rows = 0

    @property
    def table(self) -> SparkTable:
        if self._table is None:
            self._table = SparkTable(lambda: self._destination.spark, self.path)
            removed = self._table.remove_orphans()
            if removed:
                logger.info("%s: removed %d file(s) left by an interrupted run", self.target.name, len(removed))
            self._last = self._table.last_checkpoint()
            self._next_seq = (self._last["seq"] + 1) if self._last else 0
        return self._table

    def last_commit(self) -> Optional[Mapping[str, Any]]:
        self.table
        return self._last

    def write(self, record: Mapping[str, Any]) -> None:
        self._records.append(record)
        self._extracted_at.append(int(time.time() * 1000))

    def commit(self, state: Optional[Mapping[str, Any]], boundary: Optional[Mapping[str, Any]] = None) -> "Future[Any]":
        self._boundary = boundary
        return done(self._commit(state))

    def finish(self, state: Optional[Mapping[str, Any]]) -> "Future[Any]":
        if self._replace or self._records:
            return done(self._commit(state))
        return done()

    def abort(self) -> None:
        self._records, self._extracted_at = [], []

    def _commit(self, state: Optional[Mapping[str, Any]]) -> Any:
        table = self.table
        seq = self._next_seq or 0
        arrow = records_to_arrow(
            self._records,
            self._schema,
            extracted_at_ms=self._extracted_at,
            sync_id=self._destination.sync_id,
            checkpoint=seq,
        )
        info = table.commit(arrow, state=dict(state or {}), seq=seq, replace=self._replace, boundary=self._boundary)
        self._replace = False  # an overwrite replaces once; what follows in this run appends to it
        self._next_seq = seq + 1
        self.commits += 1
        self.rows += len(self._records)
        logger.debug("%s: commit %d, %d rows, %.0f ms", self.target.name, seq, len(self._records), getattr(info, "ms", 0))
        self._records, self._extracted_at = [], []
        return info


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
    ) -> None:
        self.warehouse = warehouse if "://" in warehouse else os.path.abspath(warehouse)
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
        self._starting.join()
