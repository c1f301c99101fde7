"""``SparkTable.commit`` with ``arrow_writes``: a table remembers its own last commit instead of
reading its folders again each time, and that memory never outlives another writer's commit.

No Spark: this process writes the Parquet files; the log is read back as Spark would read it."""

from __future__ import annotations

import os

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from source_framework.destinations.spark.file_sink_log import FileSinkLog
from source_framework.destinations.spark.table import SparkTable


def rows(first: int, count: int = 3) -> pa.Table:
    return pa.table({"id": pa.array(range(first, first + count), pa.int64())})


def logged_rows(path: str, compact_interval: int = 10) -> list[int]:
    """The rows a Spark reader sees: those of the files the log lists, read from a fresh log."""
    files = [status.path.removeprefix("file://") for status in FileSinkLog(path, compact_interval).live_files()]
    return sorted(value for file in files for value in pq.read_table(file).column("id").to_pylist())


def test_a_commit_after_another_objects_commit_sees_it(tmp_path):
    path = str(tmp_path / "users")
    first, second = SparkTable(None, path, arrow_writes=True), SparkTable(None, path, arrow_writes=True)
    first.commit(rows(0), {"n": 0}, 0)
    second.commit(rows(3), {"n": 1}, 1)
    # ``first`` remembers seq 0 as its last commit; seq 1 must still be refused, not overwrite
    # the record ``second`` wrote
    with pytest.raises(ValueError, match="greater than the last committed seq 1"):
        first.commit(rows(6), {"n": 1}, 1)
    info = first.commit(rows(6), {"n": 2}, 2)
    assert info.batch_id == 2
    assert SparkTable(None, path).last_checkpoint().state == {"n": 2}
    assert logged_rows(path) == list(range(9))


def test_many_commits_keep_the_log_spark_reads_whole_across_compactions(tmp_path):
    path = str(tmp_path / "users")
    table = SparkTable(None, path, arrow_writes=True, compact_interval=4)
    for seq in range(11):
        info = table.commit(rows(seq * 3), {"n": seq}, seq)
        assert info.rows == 3 and info.batch_id == seq
    assert logged_rows(path, 4) == list(range(33))
    assert {"3.compact", "7.compact", "10"} <= set(os.listdir(os.path.join(path, "_spark_metadata")))
    # a replace after remembered commits leaves only its rows
    table.commit(rows(100), {"n": 11}, 11, replace=True)
    assert logged_rows(path, 4) == [100, 101, 102]
    assert table.last_checkpoint().seq == 11


def test_a_commit_writes_no_staging_folder(tmp_path):
    path = str(tmp_path / "users")
    SparkTable(None, path, arrow_writes=True).commit(rows(0), {"n": 0}, 0)
    assert sorted(os.listdir(path)) == ["_checkpoints", "_spark_metadata", *[n for n in os.listdir(path) if n.endswith(".parquet")]]
