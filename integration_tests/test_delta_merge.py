"""``append_dedup`` into a Delta table is a Delta MERGE by delta-rs (``delta_merge.py``); the
reference is the Parquet folder's merge, the table rewritten by Spark (``TableWriter._merged``).
The same commits go through both, and the tables must hold the same rows."""

from __future__ import annotations

import random

import pytest

from source_framework.destinations.base import APPEND_DEDUP, StreamTarget
from source_framework.destinations.checkpoint_record import ResumeNotes
from source_framework.destinations.spark.arrow_conversion import arrow_schema
from source_framework.destinations.spark.committer import CommitJob
from source_framework.destinations.spark.delta_table import DeltaLakeTable
from source_framework.destinations.spark.table import SparkTable
from source_framework.destinations.spark.table_writer import TableWriter

pytestmark = pytest.mark.slow  # many Delta merges through Spark and delta-rs: the quick tier (-m "not slow") leaves it out

SCHEMA = {"properties": {"Id": {"type": ["null", "integer"]}, "a.b": {"type": ["null", "string"]},
                         "updatedAt": {"type": ["null", "string"], "format": "date-time"}, "v": {"type": "integer"}}}


def commits_of(seed: int) -> list[list[dict]]:
    """Six commits of 40 records: keys from a small range (repeats within and across commits), some
    null keys, cursors with ties, nulls, and ones older than the table's."""
    rng = random.Random(seed)
    counter = iter(range(10_000))

    def record() -> dict:
        key = rng.choice([None, 1, 2, 3, 4, 5, 6, 7, 8])
        second = rng.choice([None, "x", "y"])
        day = rng.choice([None, 1, 2, 3, 3, 4])
        return {"Id": key, "a.b": second, "updatedAt": None if day is None else f"2025-01-0{day}T00:00:00Z", "v": next(counter)}

    return [[record() for _ in range(40)] for _ in range(6)]


def merged_rows(table, commits, keys, cursor) -> list[tuple]:
    target = StreamTarget("t", None, SCHEMA, incremental=True, destination_sync_mode=APPEND_DEDUP,
                          primary_key=[[key] for key in keys], cursor_field=cursor)
    table.recover()
    writer = TableWriter(table, target, arrow_schema(SCHEMA), recorded_schema=table.recorded_schema())
    for number, records in enumerate(commits):
        batch = writer.to_arrow(records, [1000] * len(records))
        writer.apply([CommitJob(writer, [batch], batch.num_rows, batch.nbytes, {"n": number}, ResumeNotes(start_state={}))])
    frame = table.read()
    return sorted((tuple(row) for row in frame.select("Id", "`a.b`", "updatedAt", "v", "_sf_checkpoint").collect()), key=repr)


@pytest.mark.parametrize("seed", [1, 2])
@pytest.mark.parametrize(("keys", "cursor"), [(["Id"], ["updatedAt"]), (["Id", "a.b"], ["updatedAt"]), (["Id"], [])])
def test_a_delta_merge_keeps_the_rows_the_spark_rewrite_keeps(spark, tmp_path, seed, keys, cursor):
    from deltalake import DeltaTable

    commits = commits_of(seed)
    reference = merged_rows(SparkTable(spark, str(tmp_path / "parquet"), arrow_writes=True), commits, keys, cursor)
    delta = DeltaLakeTable(spark, str(tmp_path / "delta"), arrow_writes=True)
    assert merged_rows(delta, commits, keys, cursor) == reference
    operations = [entry["operation"] for entry in DeltaTable(str(tmp_path / "delta")).history()]
    assert operations.count("MERGE") == len(commits) - 1  # the first commit creates the table
    null_keys = sum(1 for records in commits for r in records if any(r[k] is None for k in keys))
    assert sum(1 for row in reference if row[0] is None or (len(keys) > 1 and row[1] is None)) == null_keys


def test_a_merge_that_changes_no_row_still_commits_its_checkpoint(spark, tmp_path):
    """Records read again, none newer than the table's: delta-rs's MERGE then commits nothing, and
    the checkpoint's state must still be committed (found by the SIGKILL test)."""
    table = DeltaLakeTable(spark, str(tmp_path / "delta"), arrow_writes=True)
    records = [{"Id": 1, "a.b": "x", "updatedAt": "2025-01-02T00:00:00Z", "v": 1}]
    older = [{"Id": 1, "a.b": "x", "updatedAt": "2025-01-01T00:00:00Z", "v": 2}]
    rows = merged_rows(table, [records, older, []], ["Id"], ["updatedAt"])
    assert [row[3] for row in rows] == [1]
    newest = table.last_checkpoint()
    assert newest is not None and newest.seq == 2 and newest.state == {"n": 2}
