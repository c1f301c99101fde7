"""Spark destination: land stream records in Parquet tables that plain Spark reads safely.

Modules, one job each:

* ``arrow_conversion`` - JSON schema -> Arrow schema; API records -> Arrow table.
* ``session``          - ``get_spark()``: a configured SparkSession that keeps stdout clean.
* ``table``            - ``SparkTable``: all-or-nothing commits of Arrow tables.
* ``file_sink_log``    - Spark's ``_spark_metadata`` log format and read rules.
* ``checkpoint_records`` - our per-commit records (state, files, rows).
* ``atomic_files``     - crash-safe small-file writes.
* ``writer``           - ``SparkDestination``: the runtime's sinks, one table per stream.

Usage::

    from source_framework.destinations.spark import SparkTable, arrow_schema, get_spark, records_to_arrow

    spark = get_spark()
    schema = arrow_schema(stream_json_schema)
    table = SparkTable(spark, "warehouse/demo/users")
    batch = records_to_arrow(records, schema, extracted_at_ms=now_ms, sync_id=sync_id, checkpoint=3)
    table.commit(batch, state={"updatedAt": "2025-02-01T00:00:00Z"}, seq=3)
"""

from source_framework.destinations.spark.arrow_conversion import (
    arrow_schema,
    records_to_arrow,
)
from source_framework.destinations.spark.session import get_spark
from source_framework.destinations.spark.table import CommitInfo, SparkTable

__all__ = ["CommitInfo", "SparkTable", "arrow_schema", "get_spark", "records_to_arrow"]
