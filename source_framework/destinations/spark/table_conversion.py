"""Convert a Parquet table folder to a Delta table in place, in one Delta transaction carrying the newest checkpoint record.
Not ``CONVERT TO DELTA``: the folder holds files our log no longer lists. Each step is safe to be killed after."""

from __future__ import annotations

import json
import os
import shutil
from typing import Any

import pyarrow.dataset as ds

from source_framework.destinations.spark.delta_log import RECORD_KEY
from source_framework.destinations.spark.delta_table import APP_ID, DeltaLakeTable, is_delta_table
from source_framework.destinations.spark.file_sink_log import local_path
from source_framework.destinations.spark.passed_states import PassedStates
from source_framework.destinations.spark.table import SparkTable
from source_framework.destinations.spark.table_recovery import STAGING_DIR
from source_framework.helpers.faults import fault_point

PARQUET_FOLDERS = ("_spark_metadata", "_checkpoints", STAGING_DIR)


class NothingToConvert(ValueError):
    """The folder holds no committed Parquet table."""


def convert_to_delta(path: str) -> int:
    """Make the Parquet table folder at ``path`` a Delta table; return its rows (a converted folder only loses leftovers)."""
    if is_delta_table(path):
        _remove_parquet_files(path)
        return 0
    table = SparkTable(_no_spark, path)  # (its records, log and files are read as files)
    records = list(table.committed_checkpoints())
    if not records:
        raise NothingToConvert(f"{path}: no committed Parquet table to convert")
    if table.pending_reset() is not None:
        raise NothingToConvert(f"{path}: a state reset is pending; let the next sync apply it, then convert")
    newest, older = records[0], records[1:]
    PassedStates(table.path).add(older)
    schema = table.recorded_schema()
    files = [local_path(uri) for uri in table.live_files()]
    rows = ds.dataset(files, schema=schema, format="parquet").scanner().to_reader()
    _write_first_version(table.path, rows, newest.seq, json.loads(newest.to_json()))
    fault_point("convert.committed")
    _remove_parquet_files(table.path)
    return int(DeltaLakeTable(_no_spark, table.path).live_rows())


def _no_spark() -> Any:
    raise RuntimeError("a table's conversion reads and writes files only: Spark is not started for it")


def _write_first_version(path: str, rows: Any, seq: int, record: dict[str, Any]) -> None:
    from deltalake import CommitProperties, Transaction, write_deltalake

    metadata = json.dumps({RECORD_KEY: record}, separators=(",", ":"))
    write_deltalake(path, rows, mode="error",
                    commit_properties=CommitProperties(app_transactions=[Transaction(APP_ID, seq)],
                                                       custom_metadata={"userMetadata": metadata}))


def _remove_parquet_files(path: str) -> None:
    """Every ``.parquet`` file the Delta log does not name, and the Parquet folder's log and records."""
    delta_files = {os.path.basename(local_path(uri)) for uri in DeltaLakeTable(_no_spark, path).live_files()}
    for name in os.listdir(path):
        if name.endswith(".parquet") and name not in delta_files:
            os.remove(os.path.join(path, name))
    for folder in PARQUET_FOLDERS:
        shutil.rmtree(os.path.join(path, folder), ignore_errors=True)
