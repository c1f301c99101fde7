"""Spark destination: land stream records in Delta or Parquet tables that plain Spark reads safely (``destination.py``)."""
