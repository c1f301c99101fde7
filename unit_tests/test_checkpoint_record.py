"""The checkpoint record: one type, one format with a version, read back the same; format 1 still reads."""

from __future__ import annotations

import json

import pytest

from source_framework.destinations.checkpoint_record import FORMAT_VERSION, CheckpointRecord, ResumeNotes, file_name


def test_a_record_reads_back_as_written():
    record = CheckpointRecord(
        seq=3, batch_id=2, state={"updatedAt": "2025-01-01T00:00:00Z"}, files=("c00000003-0-ab.parquet",), rows=10,
        replace=True, committed_at="2026-01-01T00:00:00.000000Z", start_state={}, boundary={"": {"cursor": 1, "keys": [[1]]}},
        merged_states=({"updatedAt": "2024-12-31T00:00:00Z"},), reset_id="r1", schema={"fields": []}, replaced=("old.parquet",),
    )
    text = record.to_json()
    assert json.loads(text)["format"] == FORMAT_VERSION
    assert CheckpointRecord.from_json(text) == record


@pytest.mark.parametrize("state", [
    {"id": 2**70},  # beyond 64 bits: a source's own state may hold one (orjson refuses it)
    {"name": "Zürich ✓", "when": "2025-01-01T00:00:00Z"},
    {"nested": {"b": [1, 2.5, None, True], "a": {}}},
], ids=["big-integer", "non-ascii", "nested"])
def test_a_record_of_any_json_state_reads_back_as_written(state):
    record = CheckpointRecord(seq=1, batch_id=0, state=state, merged_states=(state, {}), boundary={"p": {"cursor": state}})
    assert CheckpointRecord.from_json(record.to_json()) == record
    assert json.loads(record.to_json())["state"] == state


def test_a_format_1_record_reads_with_file_names_relative_to_the_table():
    old = {"seq": 4, "batch_id": 3, "state": {"n": 4}, "files": ["file:///w/ware%20house/demo/users/c00000004-0-ab.parquet"],
           "rows": 7, "replace": False, "committed_at": "2025-01-01T00:00:00.000000Z", "start_state": {"n": 1},
           "boundary": {}}
    record = CheckpointRecord.from_json(json.dumps(old))
    assert record.files == ("c00000004-0-ab.parquet",) and record.start_state == {"n": 1} and record.merged_states == ()


def test_a_newer_format_is_refused_with_a_clear_error():
    with pytest.raises(ValueError, match="upgrade source_framework"):
        CheckpointRecord.from_json(json.dumps({"seq": 1, "batch_id": 0, "state": None, "format": FORMAT_VERSION + 1}))


def test_covers_and_started_from():
    record = CheckpointRecord(seq=5, batch_id=5, state={"t": 7}, start_state={"t": 4}, merged_states=({"t": 5},))
    assert record.covers({"t": 7}) and record.covers({"t": 5}) and not record.covers({"t": 4})
    assert record.started_from({"t": 4}) and not record.started_from({"t": 7})
    assert not CheckpointRecord(seq=1, batch_id=1, state=None).started_from({})


def test_file_names():
    assert file_name("file:///a/b%20c/x.parquet") == "x.parquet"
    assert file_name("x.parquet") == "x.parquet"


def test_a_delta_boundary_reads_back_as_a_delta():
    record = CheckpointRecord(seq=2, batch_id=2, state={"t": 2}, boundary={"p": {"cursor": 2, "records": [[[1], "ab"]]}},
                              boundary_full=False)
    assert json.loads(record.to_json())["boundary_full"] is False
    assert CheckpointRecord.from_json(record.to_json()) == record


def test_records_from_before_deltas_hold_a_full_boundary():
    # format 1/2 records always held the whole boundary: a resume must not walk past them
    old = {"seq": 4, "batch_id": 3, "state": {"n": 4}, "files": [], "boundary": {"": {"cursor": 4, "keys": [[1]]}}, "format": 2}
    assert CheckpointRecord.from_json(json.dumps(old)).boundary_full is True
    assert ResumeNotes().boundary_full is True  # notes that say nothing of it (e.g. ``state set``) are full too
