"""Skipping the records a resumed sync re-reads at its cursor, and nothing else."""

from source_framework.runtime.boundary import Boundary


def read(boundary, slices):
    written = []
    for stream_slice, records in slices:
        boundary.start_slice(stream_slice)
        written += [r for r in records if not boundary.already_committed(r)]
    return written


def test_snapshot_keeps_the_keys_at_the_highest_cursor_per_partition():
    boundary = Boundary(["t"], [["id"]])
    read(boundary, [(None, [{"id": 1, "t": 1}, {"id": 2, "t": 3}, {"id": 3, "t": 3}, {"id": 4, "t": 2}])])
    assert boundary.snapshot() == {"": {"cursor": 3, "keys": [[2], [3]]}}
    boundary.start_slice({"partition": {"store": 1}})
    boundary.already_committed({"id": 9, "t": 5})
    assert boundary.snapshot()['{"store": 1}'] == {"cursor": 5, "keys": [[9]]}


def test_resumed_run_skips_only_committed_keys_at_the_same_cursor():
    first = Boundary(["t"], [["id"]])
    read(first, [(None, [{"id": 1, "t": 1}, {"id": 2, "t": 3}])])
    resumed = Boundary(["t"], [["id"]], resumed=first.snapshot())
    written = read(resumed, [(None, [{"id": 2, "t": 3}, {"id": 5, "t": 3}, {"id": 2, "t": 4}])])
    # id 2 at t=3 was committed; id 5 at t=3 is new; id 2 updated to t=4 is new
    assert written == [{"id": 5, "t": 3}, {"id": 2, "t": 4}]
    assert resumed.skipped == 1


def test_date_time_cursors_and_composite_keys():
    boundary = Boundary(["u"], [["a"], ["b", "c"]])
    read(boundary, [(None, [{"a": 1, "b": {"c": 2}, "u": "2025-01-01T00:00:00Z"}, {"a": 1, "b": {"c": 3}, "u": "2025-01-01T00:00:00+00:00"}])])
    snap = boundary.snapshot()[""]
    assert snap["cursor"] == "2025-01-01T00:00:00Z" and snap["keys"] == [[1, 2]]


def test_without_primary_key_nothing_is_skipped():
    boundary = Boundary(["t"], [], resumed={"": {"cursor": 1, "keys": [[1]]}})
    assert read(boundary, [(None, [{"id": 1, "t": 1}])]) == [{"id": 1, "t": 1}]
