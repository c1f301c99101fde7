"""Spark destination: land stream records in Delta or Parquet tables that plain Spark reads safely.

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

# Imported on first use: the command line imports this package for the table layout and locks, not pyspark.
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
