"""Spark destination: land stream records in Parquet tables that plain Spark reads safely.

Modules, one job each:

* ``arrow_conversion`` - JSON schema -> Arrow schema; API records -> Arrow table.
* ``arrow_columns``    - one column's values -> an Arrow array of its type (fast path, value by value).
* ``session``          - ``get_spark()``: a configured SparkSession that keeps stdout clean.
* ``table``            - ``SparkTable``: all-or-nothing commits into a Parquet file-sink folder.
* ``delta_table``      - ``DeltaLakeTable``: the same commits as Delta transactions (delta-rs or Spark).
* ``commit_parts``     - what a commit is made of, whichever the format (staged files, page rows).
* ``spark_frames``     - Spark DataFrames and column expressions over a table's rows.
* ``table_recovery``   - clean-up before writing: only an interrupted commit of ours is deleted.
* ``file_sink_log``    - Spark's ``_spark_metadata`` log format and read rules.
* ``checkpoint_folder`` - our per-commit records (state, files, rows).
* ``atomic_files``     - crash-safe small-file writes.
* ``destination``      - ``SparkDestination``: one table per stream; layout, locks, reset, truncate.
* ``buffer``, ``table_writer``, ``committer`` - records -> Arrow batches -> commit jobs -> commits.
* ``earlier_commits`` - what the table committed before this run, as the runtime asks (resume, resets, look-ups).
* ``layout``           - where a stream's table lives (names encoded into safe folder names).
* ``table_lock``       - one writer per table; clean-up waits for a commit still being written.
* ``table_schema``     - the table's schema across commits: added, widened, incompatible.
* ``jvm_cache``        - the class-data archive that halves the embedded JVM's start-up.

Usage::

    from source_framework.destinations.spark import SparkTable, arrow_schema, get_spark, records_to_arrow

    spark = get_spark()
    schema = arrow_schema(stream_json_schema)
    table = SparkTable(spark, "warehouse/demo/users")
    batch = records_to_arrow(records, schema, extracted_at_ms=now_ms, sync_id=sync_id, checkpoint=3)
    table.commit(batch, state={"updatedAt": "2025-02-01T00:00:00Z"}, seq=3)
"""

from importlib import import_module
from typing import Any

# Imported on first use: the command line imports this package for the table layout and locks,
# and should not pay for pyspark until it writes.
_EXPORTS = {
    "CommitInfo": "table",
    "SparkTable": "table",
    "arrow_schema": "arrow_conversion",
    "get_spark": "session",
    "records_to_arrow": "arrow_conversion",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    if name not in _EXPORTS:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(import_module(f"{__name__}.{_EXPORTS[name]}"), name)
