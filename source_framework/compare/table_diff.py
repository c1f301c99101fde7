"""Rows, duplicates and missing rows of a crashed-and-resumed table against the same table written without a crash."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from source_framework.destinations.spark.destination import CommittedTable

META_PREFIX = "_sf_"


@dataclass
class Diff:
    rows: int
    reference_rows: int
    duplicates: int
    missing: int

    def __add__(self, other: Diff) -> Diff:
        return Diff(self.rows + other.rows, self.reference_rows + other.reference_rows,
                    self.duplicates + other.duplicates, self.missing + other.missing)


def diff_tables(reference_table: CommittedTable, final_table: CommittedTable, key: Sequence[str] | None = None) -> Diff:
    from pyspark.sql import functions as F

    reference, final = _committed_rows(reference_table), _committed_rows(final_table)
    if reference is None or final is None:
        reference_rows = reference.count() if reference is not None else 0
        rows = final.count() if final is not None else 0
        return Diff(rows, reference_rows, duplicates=rows, missing=reference_rows)
    columns = list(key or []) or [c for c in reference.columns if not c.startswith(META_PREFIX)]
    counts_ref, counts_final = _key_counts(reference, columns, "n_ref"), _key_counts(final, columns, "n_final")
    joined = counts_ref.join(counts_final, "_key", "full_outer").fillna(0, ["n_ref", "n_final"])
    row = joined.agg(
        F.sum("n_final").alias("rows"),
        F.sum("n_ref").alias("reference_rows"),
        F.sum(F.greatest(F.col("n_final") - F.col("n_ref"), F.lit(0))).alias("duplicates"),
        F.sum(F.greatest(F.col("n_ref") - F.col("n_final"), F.lit(0))).alias("missing"),
    ).first()
    return Diff(*(int(row[name] or 0) for name in ("rows", "reference_rows", "duplicates", "missing")))


def _committed_rows(table: CommittedTable) -> Any:
    # None without a commit: Spark could not even infer a schema.
    return None if table.last_checkpoint() is None else table.read()


def _key_counts(frame: Any, columns: list[str], name: str) -> Any:
    from pyspark.sql import functions as F

    # One JSON string per key: null-safe, and keys of any column types compare.
    key = F.to_json(F.struct(*[F.col(f"`{c}`") for c in columns]))
    return frame.groupBy(key.alias("_key")).agg(F.count(F.lit(1)).alias(name))
