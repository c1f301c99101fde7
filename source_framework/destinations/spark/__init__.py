"""Spark destination: land stream records in Delta or Parquet tables that plain Spark reads safely (``destination.py``)."""

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
