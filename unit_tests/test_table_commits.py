"""``SparkTable.commit`` with ``arrow_writes``: a table remembers its own last commit instead of
reading its folders again each time, and that memory never outlives another writer's commit.

No Spark: this process writes the Parquet files; the log is read back as Spark would read it."""

from __future__ import annotations

import errno
import os

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from source_framework.destinations.spark import atomic_files
from source_framework.destinations.spark.atomic_files import write_atomically
from source_framework.destinations.spark.commit_parts import ARROW_PARQUET_OPTIONS, StagedFiles
from source_framework.destinations.spark.file_sink_log import FileSinkLog
from source_framework.destinations.spark.table import SparkTable
from source_framework.destinations.spark.table_lock import TableLock
from source_framework.helpers.faults import SimulatedCrash, crash_at


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


def test_files_their_writer_counted_are_published_by_name_with_the_rows_it_counted(tmp_path):
    """A staged folder that names its files (the page converter's: counted in their footers and
    fsynced in its process) has exactly those published, its rows taken as counted; anything else
    left in the folder is not published, and the folder is gone."""
    path = str(tmp_path / "users")
    table = SparkTable(None, path, arrow_writes=True)
    folder = table.staging_folder()
    os.makedirs(folder)
    pq.write_table(rows(0, 4), os.path.join(folder, "part-00000-a.parquet"), **ARROW_PARQUET_OPTIONS)
    pq.write_table(rows(50, 2), os.path.join(folder, "part-00000-stray.parquet"), **ARROW_PARQUET_OPTIONS)
    info = table.commit(rows(10, 0), {"n": 0}, 0, staged=[StagedFiles(folder, 4, files=("part-00000-a.parquet",))])
    assert info.rows == 4 and len(info.files) == 1
    assert logged_rows(path) == [0, 1, 2, 3]
    assert not os.path.exists(folder)
    assert table.last_checkpoint().rows == 4


def test_a_staged_folder_without_names_has_all_its_files_published_and_counted_in_their_footers(tmp_path):
    path = str(tmp_path / "users")
    table = SparkTable(None, path, arrow_writes=True)
    staged = table.stage(rows(0, 4))
    more = StagedFiles(staged.folder, 1_000)  # a count not taken on trust: the footers say 4
    info = table.commit(rows(10, 2), {"n": 0}, 0, staged=[more])
    assert info.rows == 6
    assert logged_rows(path) == [0, 1, 2, 3, 10, 11]
    assert not os.path.exists(staged.folder)


@pytest.mark.parametrize("overwrite", [True, False])
def test_an_atomic_write_makes_its_folder_and_leaves_no_temporary_file(tmp_path, overwrite):
    target = tmp_path / "new" / "folder" / "7"
    write_atomically(str(target), b"first", overwrite=overwrite)
    assert target.read_bytes() == b"first" and os.listdir(target.parent) == ["7"]
    if overwrite:
        write_atomically(str(target), b"second")
        assert target.read_bytes() == b"second"
    else:  # an exclusive write never replaces what another writer published
        with pytest.raises(FileExistsError):
            write_atomically(str(target), b"second", overwrite=False)
        assert target.read_bytes() == b"first"
    assert os.listdir(target.parent) == ["7"]


def test_a_new_tables_first_commit_makes_its_log_folder_before_any_data_file_enters(tmp_path):
    """Issue 49, item 2, on the path without the page converter: a folder without ``_spark_metadata``
    is listed by plain readers, so the data file killed before its batch used to be read."""
    path = str(tmp_path / "users")
    with crash_at("commit.files_written"), pytest.raises(SimulatedCrash):
        SparkTable(None, path, arrow_writes=True).commit(rows(0), {"n": 0}, 0)
    assert [name for name in os.listdir(path) if name.endswith(".parquet")]
    assert os.listdir(os.path.join(path, "_spark_metadata")) == []  # read through: no batch, no rows


def test_every_folder_a_new_table_makes_is_fsynced_in_its_parent(tmp_path, monkeypatch):
    """Issue 49, item 7: a folder's entry is on disk only once its parent is fsynced; the namespace
    folder (made with the table's lock), the table folder, its log's and its records' were not."""
    synced = []
    real = atomic_files.fsync_directory
    monkeypatch.setattr(atomic_files, "fsync_directory", lambda folder: (synced.append(os.path.abspath(folder)), real(folder)))
    warehouse = tmp_path / "warehouse"
    path = str(warehouse / "demo" / "users")
    with TableLock(path):
        SparkTable(None, path, arrow_writes=True).commit(rows(0), {"n": 0}, 0)
    made = [str(warehouse), str(warehouse / "demo"), path, *(os.path.join(path, name) for name in ("_checkpoints", "_spark_metadata"))]
    assert {os.path.dirname(folder) for folder in made} <= set(synced)


def test_a_failed_folder_fsync_is_an_error_and_an_unsupported_one_is_not(tmp_path, monkeypatch):
    """Issue 49, item 8: ``fsync_directory`` ignored every error, so a commit point whose entry never
    reached the disk (EIO) passed as durable."""
    def failing(code):
        def fsync(fd):
            raise OSError(code, os.strerror(code))
        return fsync

    monkeypatch.setattr(atomic_files.os, "fsync", failing(errno.EIO))
    with pytest.raises(OSError, match="Input/output error"):
        atomic_files.fsync_directory(str(tmp_path))
    with pytest.raises(OSError):
        write_atomically(str(tmp_path / "_spark_metadata" / "0"), b"v1", overwrite=False)
    monkeypatch.setattr(atomic_files.os, "fsync", failing(errno.EINVAL))  # a file system that cannot
    atomic_files.fsync_directory(str(tmp_path))
    monkeypatch.undo()
    with pytest.raises(FileNotFoundError):
        atomic_files.fsync_directory(str(tmp_path / "gone"))
