"""What the syncs left in their warehouses: commits and files, and rows checked with Spark.

- ``commit_stats`` reads the tables' ``_checkpoints`` records (no Spark needed): Spark commits
  and data files that are committed.
- ``TableDiff`` compares a table after a crash and a resume with the same table written by an
  uninterrupted run, with a plain ``spark.read.parquet`` (what any reader sees): rows, duplicate
  rows (a key more often than in the reference) and missing rows (less often). The key is the
  stream's primary key, or every data column when it has none.

Usage::

    stats = commit_stats(table_path)                      # CommitStats(commits=12, files=12, rows=200000)
    diff = TableDiff(spark).compare(reference_path, final_path, key=["id"])
    diff.rows, diff.duplicates, diff.missing
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from source_framework.destinations.spark.table import SparkTable

META_PREFIX = "_sf_"


@dataclass
class CommitStats:
    commits: int = 0
    files: int = 0
    rows: int = 0

    def __add__(self, other: CommitStats) -> CommitStats:
        return CommitStats(self.commits + other.commits, self.files + other.files, self.rows + other.rows)


def commit_stats(table_path: str) -> CommitStats:
    """The committed checkpoints of one table: Spark commits, data files, rows."""
    if not os.path.isdir(table_path):
        return CommitStats()
    table = SparkTable(_no_spark, table_path)  # reading our own records needs no Spark session
    stats = CommitStats()
    for record in table.committed_checkpoints():
        stats.commits += 1
        stats.files += len(record.files)
        stats.rows += record.rows
    return stats


def _no_spark() -> Any:
    raise RuntimeError("commit_stats only reads checkpoint records; it never writes")


@dataclass
class Diff:
    rows: int
    reference_rows: int
    duplicates: int
    missing: int

    def __add__(self, other: Diff) -> Diff:
        return Diff(self.rows + other.rows, self.reference_rows + other.reference_rows,
                    self.duplicates + other.duplicates, self.missing + other.missing)


class TableDiff:
    """Row-level comparison of two tables of the same stream."""

    def __init__(self, spark: Any) -> None:
        self.spark = spark

    def compare(self, reference_path: str, final_path: str, key: Sequence[str] | None = None) -> Diff:
        from pyspark.sql import functions as F

        reference, final = self._read(reference_path), self._read(final_path)
        if reference is None or final is None:
            # A table that was never committed: every row of the other side is extra or missing.
            reference_rows = reference.count() if reference is not None else 0
            rows = final.count() if final is not None else 0
            return Diff(rows, reference_rows, duplicates=rows, missing=reference_rows)
        columns = list(key or []) or _data_columns(reference)
        counts_ref, counts_final = _key_counts(reference, columns, "n_ref"), _key_counts(final, columns, "n_final")
        joined = counts_ref.join(counts_final, "_key", "full_outer").fillna(0, ["n_ref", "n_final"])
        row = joined.agg(
            F.sum("n_final").alias("rows"),
            F.sum("n_ref").alias("reference_rows"),
            F.sum(F.greatest(F.col("n_final") - F.col("n_ref"), F.lit(0))).alias("duplicates"),
            F.sum(F.greatest(F.col("n_ref") - F.col("n_final"), F.lit(0))).alias("missing"),
        ).first()
        return Diff(*(int(row[name] or 0) for name in ("rows", "reference_rows", "duplicates", "missing")))

    def _read(self, path: str) -> Any:
        if not os.path.isdir(path) or SparkTable(_no_spark, path).last_checkpoint() is None:
            return None  # no commit yet: Spark could not even infer a schema
        return self.spark.read.parquet(path)


def _key_counts(frame: Any, columns: list[str], name: str) -> Any:
    from pyspark.sql import functions as F

    # One JSON string per key: null-safe, and keys of any column types compare.
    key = F.to_json(F.struct(*[F.col(f"`{c}`") for c in columns]))
    return frame.groupBy(key.alias("_key")).agg(F.count(F.lit(1)).alias(name))


def _data_columns(frame: Any) -> list[str]:
    return [c for c in frame.columns if not c.startswith(META_PREFIX)]
