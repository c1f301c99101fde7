"""``SparkTable.recover``: clean-up deletes only what it can prove an interrupted commit of ours
left (issue 11, item 1).

Tables are built by hand here, file by file, as commits leave them (a data file, its checkpoint
record, its log batch); ``recover`` reads no Parquet and starts no Spark. The same rules on real
Spark tables are in ``integration_tests/test_data_safety.py``.
"""

from __future__ import annotations

import os
import shutil
from typing import Any

import pytest

from source_framework.destinations.checkpoint_record import CheckpointRecord
from source_framework.destinations.spark.checkpoint_folder import CheckpointFolder
from source_framework.destinations.spark.file_sink_log import FileSinkLog, SinkFileStatus
from source_framework.destinations.spark.table import SparkTable
from source_framework.destinations.spark.table_recovery import InconsistentTable, LogBatchLost, TableDamaged, TableMoved
from source_framework.helpers.faults import SimulatedCrash, crash_at


def data_file(table: str, seq: int, part: int = 0) -> str:
    name = f"c{seq:08d}-{part}-x.parquet"
    with open(os.path.join(table, name), "wb") as handle:
        handle.write(b"rows of commit %d" % seq)
    return name


def commit(table: str, seq: int, files: int = 1, publish: bool = True, **record: Any) -> list[str]:
    """One commit as ``SparkTable.commit`` leaves it; ``publish=False``: killed before its batch.
    ``record``: fields of its checkpoint record (its state is ``{"n": seq}`` unless given)."""
    os.makedirs(table, exist_ok=True)
    log = FileSinkLog(table)
    names = [data_file(table, seq, part) for part in range(files)]
    batch_id = log.next_batch_id(replace=False)
    fields = {"state": {"n": seq}, "start_state": {"n": 0}, **record}
    CheckpointFolder(table).write(CheckpointRecord(seq=seq, batch_id=batch_id, files=tuple(names), rows=files, **fields))
    if publish:
        log.write_batch(batch_id, [SinkFileStatus.for_local_file(os.path.join(table, n)) for n in names], replace=False)
    return names


def listing(table: str) -> list[str]:
    return sorted(os.path.relpath(os.path.join(folder, name), table) for folder, _, names in os.walk(table) for name in names)


def test_the_newest_record_one_past_the_last_commit_is_an_interrupted_commit_and_goes(tmp_path):
    table = str(tmp_path / "users")
    kept = commit(table, 0) + commit(table, 1)
    left = commit(table, 2, files=2, publish=False)
    removed = SparkTable(None, table).recover()
    assert sorted(os.path.basename(path) for path in removed) == sorted([*left, "00000002.json"])
    assert sorted(name for name in os.listdir(table) if name.endswith(".parquet")) == sorted(kept)
    assert SparkTable(None, table).last_checkpoint().seq == 1


def test_a_first_commit_killed_before_its_batch_goes_too(tmp_path):
    table = str(tmp_path / "users")
    commit(table, 0, publish=False)
    SparkTable(None, table).recover()
    assert listing(table) == []


def test_records_without_a_log_are_refused_and_nothing_is_deleted(tmp_path):
    table = str(tmp_path / "users")
    for seq in range(3):
        commit(table, seq)
    shutil.rmtree(os.path.join(table, "_spark_metadata"))  # a copy that left the log behind
    before = listing(table)
    with pytest.raises(InconsistentTable) as refused:
        SparkTable(None, table).recover()
    assert table in str(refused.value) and "3 checkpoint records (0 to 2)" in str(refused.value)
    assert "log (_spark_metadata/) is missing" in str(refused.value) and "nothing was deleted" in str(refused.value)
    assert listing(table) == before


def test_a_log_older_than_several_records_is_refused_and_nothing_is_deleted(tmp_path):
    table = str(tmp_path / "users")
    for seq in range(4):
        commit(table, seq)
    log = FileSinkLog(table)
    for batch_id in (2, 3):  # a log restored from an older backup
        os.remove(log.batch_path(batch_id))
    before = listing(table)
    with pytest.raises(InconsistentTable) as refused:
        SparkTable(None, table).recover()
    assert "2 checkpoint records (2 to 3)" in str(refused.value) and "the last committed is 1" in str(refused.value)
    assert listing(table) == before


def test_one_uncommitted_record_that_names_another_batch_is_refused(tmp_path):
    table = str(tmp_path / "users")
    for seq in range(3):
        commit(table, seq)
    os.remove(FileSinkLog(table).batch_path(2))
    os.remove(FileSinkLog(table).batch_path(1))
    os.remove(CheckpointFolder(table).path(1))  # record 2 is the only newer one, but its batch is not next
    before = listing(table)
    with pytest.raises(InconsistentTable, match="names log batch 2, not the one its log takes next \\(1\\)"):
        SparkTable(None, table).recover()
    assert listing(table) == before


def test_a_recovery_killed_between_its_deletions_is_finished_by_the_next(tmp_path):
    table = str(tmp_path / "users")
    kept = commit(table, 0)
    commit(table, 1, files=3, publish=False)
    with crash_at("recovery.removing", 2), pytest.raises(SimulatedCrash):
        SparkTable(None, table).recover()
    assert os.path.exists(CheckpointFolder(table).path(1))  # the record still names what is left
    SparkTable(None, table).recover()
    assert sorted(name for name in os.listdir(table) if name.endswith(".parquet")) == kept
    assert [r.seq for r in SparkTable(None, table).committed_checkpoints()] == [0]


def test_a_table_missing_its_files_is_refused_before_an_interrupted_commit_is_touched(tmp_path):
    original = str(tmp_path / "original" / "users")
    commit(original, 0)
    copy = str(tmp_path / "copy" / "users")
    shutil.copytree(original, copy)
    for name in os.listdir(copy):
        if name.endswith(".parquet"):
            os.remove(os.path.join(copy, name))  # copied without its data files
    commit(copy, 1, publish=False)
    before = listing(copy)
    with pytest.raises(TableMoved):
        SparkTable(None, copy).recover()
    assert listing(copy) == before


def test_a_table_whose_files_were_deleted_in_place_is_refused(tmp_path):
    table = str(tmp_path / "users")
    (name,) = commit(table, 0)
    commit(table, 1)
    os.remove(os.path.join(table, name))
    before = listing(table)
    with pytest.raises(TableMoved, match="1 data file"):
        SparkTable(None, table).recover()
    assert listing(table) == before


# -- issue 49, item 8: a batch lost after its STATE left --------------------------------------------------------


@pytest.mark.parametrize("given", [{"n": 2}, {"n": 1.5}], ids=["its state", "a state merged into it"])
def test_a_record_whose_state_the_sync_was_given_lost_its_batch_and_nothing_is_deleted(tmp_path, given):
    """The given state could only have come from this commit's STATE, printed after its batch: the
    batch was lost, and deleting the commit's files (as an interrupted one's) lost its rows."""
    table = str(tmp_path / "users")
    commit(table, 0)
    commit(table, 1)
    commit(table, 2, files=2, merged_states=({"n": 1.5},))
    os.remove(FileSinkLog(table).batch_path(2))
    before = listing(table)
    with pytest.raises(LogBatchLost) as refused:
        SparkTable(None, table).recover(given_state=given)
    message = str(refused.value)
    assert table in message and "checkpoint record 2" in message and "_spark_metadata/2 is missing" in message
    assert "nothing was deleted" in message and "state reset --tables" in message
    assert listing(table) == before


@pytest.mark.parametrize("given", [None, {}, {"n": 0}, {"n": 1}, {"n": 7}],
                         ids=["no state known", "an empty state", "its run's start state", "the last committed state", "another"])
def test_a_record_the_given_state_does_not_prove_is_an_interrupted_commit(tmp_path, given):
    """A retry starts from the killed run's start state or from the last committed state; neither
    proves the newest commit happened (a run that did not move its state gives its start state too)."""
    table = str(tmp_path / "users")
    kept = commit(table, 0) + commit(table, 1)
    commit(table, 2, publish=False, merged_states=({"n": 1},))
    SparkTable(None, table).recover(given_state=given)
    assert sorted(name for name in os.listdir(table) if name.endswith(".parquet")) == sorted(kept)
    assert SparkTable(None, table).last_checkpoint().seq == 1


def test_a_killed_first_commit_of_a_run_that_kept_its_state_is_cleaned_up(tmp_path):
    table = str(tmp_path / "users")
    commit(table, 0, publish=False, state={"n": 0}, start_state={"n": 0})
    SparkTable(None, table).recover(given_state={"n": 0})
    assert listing(table) == []


# -- issue 49, item 15: data files cut from outside ------------------------------------------------------------


def test_a_table_whose_live_file_was_cut_is_refused_and_nothing_is_deleted(tmp_path):
    table = str(tmp_path / "users")
    (name,) = commit(table, 0)
    commit(table, 1)
    commit(table, 2, publish=False)  # an interrupted commit is left for when the table is whole again
    os.truncate(os.path.join(table, name), 3)
    before = listing(table)
    with pytest.raises(TableDamaged, match=f"{name}: 3 bytes, logged as 16"):
        SparkTable(None, table).recover()
    assert listing(table) == before


def test_a_log_line_without_a_size_is_not_taken_for_a_cut_file(tmp_path):
    """A size of 0 in the log is one not recorded (no Parquet file is empty): nothing to compare."""
    table = str(tmp_path / "users")
    os.makedirs(table)
    name = data_file(table, 0)
    log = FileSinkLog(table)
    log.write_batch(0, [SinkFileStatus(f"file://{os.path.join(table, name)}", 0, 0)], replace=False)
    CheckpointFolder(table).write(CheckpointRecord(seq=0, batch_id=0, state={"n": 0}, files=(name,), rows=1))
    assert SparkTable(None, table).recover() == []
