"""Choosing where a sync resumes from, given the state and the table's committed checkpoints."""

from collections.abc import Iterable, Mapping
from concurrent.futures import Future
from typing import Any

import pytest
from airbyte_cdk.sources.streams import CheckpointMixin, Stream

from source_framework.destinations.base import CommitReceipt, Destination, EarlierCommits, StreamSink, StreamTarget
from source_framework.destinations.checkpoint_record import CheckpointRecord, ResumeNotes, built
from source_framework.runtime.boundary import FULL_EVERY
from source_framework.runtime.output import ProtocolOutput
from source_framework.runtime.read import read_streams
from source_framework.runtime.resume import AS_GIVEN, EDITED, STATE_AHEAD, TABLE_AHEAD, _BoundaryWalk, choose_resume_point
from source_framework.runtime.secrets import SecretFilter
from source_framework.runtime.stream_adapters import adapt
from unit_tests.conftest import EventLog, EventOutput, catalog_of, configured


def record(seq, state, start, boundary=None, merged=()):
    return CheckpointRecord(seq=seq, batch_id=seq, state=state, start_state=start, boundary=boundary or {},
                            merged_states=tuple(merged))


HISTORY = [  # newest first: run 2 started from {"t": 2} and committed t=3, t=4; run 1 from {}
    record(4, {"t": 4}, {"t": 2}, {"": {"cursor": 4, "keys": [[40]]}}),
    record(3, {"t": 3}, {"t": 2}),
    record(2, {"t": 2}, {}),
    record(1, {"t": 1}, {}),
]


def test_an_empty_table_takes_the_state_as_given():
    point = choose_resume_point({"t": 9}, [])
    assert (point.state, point.reason, point.boundary) == ({"t": 9}, AS_GIVEN, None)


def test_the_newest_commits_state_goes_on_with_its_boundary():
    point = choose_resume_point({"t": 4}, HISTORY)
    assert point.reason == AS_GIVEN and point.boundary == {"": {"cursor": 4, "keys": [[40]]}}


def test_an_older_committed_state_resumes_from_the_table():
    for older in ({"t": 3}, {"t": 2}, {"t": 1}):
        point = choose_resume_point(older, HISTORY)
        assert (point.state, point.reason, point.seq) == ({"t": 4}, TABLE_AHEAD, 4)
        assert point.boundary == {"": {"cursor": 4, "keys": [[40]]}}


def test_a_run_whose_first_state_was_never_saved_resumes_from_the_table():
    # run 1 started from nothing; its STATE lines were lost; the user runs again with no state
    point = choose_resume_point({}, HISTORY)
    assert point.reason == TABLE_AHEAD and point.state == {"t": 4}


def test_an_edited_state_is_honoured():
    point = choose_resume_point({"t": 0.5}, HISTORY)
    assert (point.state, point.reason, point.boundary) == ({"t": 0.5}, EDITED, None)


def test_a_state_merged_into_the_newest_commit_resumes_from_it():
    merged = [record(5, {"t": 7}, {"t": 4}, merged=[{"t": 5}, {"t": 6}])] + HISTORY
    point = choose_resume_point({"t": 6}, merged)
    assert (point.state, point.reason) == ({"t": 7}, TABLE_AHEAD)


# -- issue 11, defect 15: records hold boundary deltas; a resume rebuilds the newest boundary ------


def entry(cursor, *keys):
    return {"cursor": cursor, "records": [[[k], f"h{k}"] for k in keys]}


def boundary_record(seq, boundary, full):
    return CheckpointRecord(seq=seq, batch_id=seq, state={"t": seq}, start_state={}, boundary=boundary, boundary_full=full)


def newest_first_then_fail(records):
    """The table's records, newest first; reading past the last one handed out fails the test."""
    yield from records
    raise AssertionError("the walk read past the full record")


def deltas():
    """Newest first: seq 3 and 2 are deltas over the full seq 1; seq 0 is an older full one."""
    return [
        boundary_record(3, {"a": entry(30, 3)}, False),
        boundary_record(2, {"b": entry(20, 2), "a": entry(21, 9)}, False),
        boundary_record(1, {"a": entry(10, 1), "c": entry(10, 7)}, True),
        boundary_record(0, {"z": entry(1, 1)}, True),
    ]


def test_a_resume_from_delta_records_gets_the_newest_entry_of_every_partition():
    point = choose_resume_point({"t": 3}, newest_first_then_fail(deltas()[:3]))
    assert point.reason == AS_GIVEN
    assert point.boundary == {"a": entry(30, 3), "b": entry(20, 2), "c": entry(10, 7)}


def test_an_older_state_resumes_from_the_newest_rebuilt_boundary():
    point = choose_resume_point({"t": 0}, deltas())
    assert (point.reason, point.seq) == (TABLE_AHEAD, 3)
    assert point.boundary == {"a": entry(30, 3), "b": entry(20, 2), "c": entry(10, 7)}  # nothing from before the full


def test_records_gone_before_a_full_one_leave_their_partitions_unskipped():
    assert _BoundaryWalk().finish(iter(deltas()[:2])) == {"a": entry(30, 3), "b": entry(20, 2)}  # "c" is unknown: skip nothing there


# -- end to end: a partitioned stream, its table's records, a resumed run ----------------------------


class StoreOrders(Stream, CheckpointMixin):
    """Orders per store (one partition each); the state holds each store's highest ``t``; the API
    filters with ``t >= state``, so a resumed run reads each store's last records again. (Not the
    shared ``CursorStream``: partitions, and records that change between runs, are the point here.)"""

    name = "orders"
    primary_key = "id"
    cursor_field = "t"

    def __init__(self, stores: dict[int, list[dict]]) -> None:
        self._stores, self._cursors = stores, {}

    @property
    def state(self) -> Mapping[str, Any]:
        return {"stores": dict(self._cursors)}

    @state.setter
    def state(self, value: Mapping[str, Any]) -> None:
        self._cursors = dict(value.get("stores") or {})

    def get_json_schema(self) -> Mapping[str, Any]:
        return {"type": "object", "properties": {"id": {"type": "integer"}, "t": {"type": "integer"}, "v": {"type": "string"}}}

    def stream_slices(self, **kwargs: Any) -> Iterable[Mapping[str, Any]]:
        for store in self._stores:
            yield {"partition": {"store": store}}

    def read_records(self, sync_mode, cursor_field=None, stream_slice=None, stream_state=None):
        store = stream_slice["partition"]["store"]
        since = self._cursors.get(str(store))
        for record in self._stores[store]:
            if since is None or record["t"] >= since:
                self._cursors[str(store)] = record["t"]
                yield dict(record)


class CheckpointRecords(EarlierCommits):
    """The table's checkpoint records, as a later run asks for them (newest first)."""

    def __init__(self, records: list[CheckpointRecord]) -> None:
        self.records = records

    def committed(self):
        return iter(reversed(self.records))


class Table(StreamSink):
    """A table as ``spark/table_writer.py`` keeps it: one checkpoint record per write; checkpoints
    queued behind a write merge into the next one, which keeps the last one's notes. Here the
    queued commits are written together once ``merge`` of them wait (and at the end). (Not the
    shared ``RecordingSink``: that keeps no checkpoint records for a later run to resume from.)"""

    def __init__(self, records: list[CheckpointRecord], merge: int) -> None:
        self.records, self.merge = records, merge
        self.rows: list[dict] = []  # written by this run
        self._buffer: list[dict] = []
        self._queued: list[tuple[Future, Mapping[str, Any], ResumeNotes]] = []
        self.earlier_commits = CheckpointRecords(records)

    def write(self, record: Mapping[str, Any]) -> None:
        self._buffer.append(dict(record))

    def commit(self, state, notes=None) -> Future:
        future: Future = Future()
        self._queued.append((future, dict(state or {}), notes))
        self.rows += self._buffer
        self._buffer = []
        if len(self._queued) >= self.merge:
            self._write()
        return future

    def finish(self, state, notes=None) -> Future:
        future = self.commit(state, notes)
        self._write()
        return future

    def _write(self) -> None:
        queued, self._queued = self._queued, []
        if not queued:
            return
        _, state, notes = queued[-1]
        notes = built(notes)  # (only the last one's: the others' are never built)
        record = CheckpointRecord(seq=len(self.records), batch_id=len(self.records), state=state, start_state=notes.start_state,
                                  boundary=dict(notes.boundary), boundary_full=notes.boundary_full,
                                  merged_states=tuple(s for _, s, _ in queued[:-1]))
        self.records.append(CheckpointRecord.from_json(record.to_json()))
        for future, _, _ in queued:
            future.set_result(CommitReceipt(len(self.rows), len(self.records)))


class Tables(Destination):
    def __init__(self, records: list[CheckpointRecord], merge: int) -> None:
        self.records, self.merge, self.table = records, merge, None

    def open_stream(self, target: StreamTarget) -> StreamSink:
        self.table = Table(self.records, self.merge)
        return self.table


def sync_orders(records, stores, state, merge):
    entry = configured("orders", "incremental", "append_dedup")
    out = EventOutput(EventLog())
    destination = Tables(records, merge)
    result = read_streams({"orders": adapt(StoreOrders(stores), entry)}, catalog_of(entry), {"orders": state} if state else {},
                          destination, ProtocolOutput(out, SecretFilter(())))
    assert not result.streams[0].error, result.streams[0].error
    return destination.table.rows, out.states[-1]["stream"]["stream_state"], result.streams[0]


@pytest.mark.parametrize("merge", [1, 3])
def test_a_resumed_partitioned_sync_skips_exactly_the_committed_boundary(merge):
    stores = {s: [{"id": 100 * s + i, "t": i // 2, "v": "x"} for i in range(6)] for s in range(FULL_EVERY // 2)}
    records: list[CheckpointRecord] = []
    rows, state, _ = sync_orders(records, stores, None, merge)
    assert len(rows) == 6 * len(stores)
    assert any(not r.boundary_full for r in records)  # the run's checkpoints after its first hold deltas
    assert all(len(r.boundary) < len(stores) for r in records if not r.boundary_full)
    # at t=2, each store's last two records (ids ..04 and ..05) are read again; store 3's 305 changed
    stores[3][5] = {"id": 305, "t": 2, "v": "changed within the same second"}
    stores[4].append({"id": 499, "t": 3, "v": "new"})
    rows, _, result = sync_orders(records, stores, state, merge)
    assert rows == [stores[3][5], stores[4][6]]
    assert result.skipped == 2 * len(stores) - 1


# -- issue 49: a state's meaning does not depend on the records kept (5), nor on its partitions' order (12);
# a state ahead of the table is told apart from an edit (11) ---------------------------------------------


def test_a_state_only_a_reclaimed_record_passed_still_resumes_from_the_table():
    kept = HISTORY[:2]  # the records of run 1 (from {}: t=1, t=2) were reclaimed
    assert choose_resume_point({}, kept).reason == EDITED  # what the records kept alone say
    passed = [{}, {"t": 1}, {"t": 2}]
    for given in passed:
        point = choose_resume_point(given, kept, passed=lambda state: state in passed)
        assert (point.state, point.reason, point.seq) == ({"t": 4}, TABLE_AHEAD, 4)
        assert point.boundary == {"": {"cursor": 4, "keys": [[40]]}}


def per_partition(*cursors, **extra):
    return {"states": [{"partition": {"store": s}, "cursor": {"t": t}} for s, t in cursors], **extra}


def test_a_per_partition_state_in_another_order_is_the_same_state():
    newest = per_partition((1, 5), (2, 6), (3, 7))
    older = per_partition((1, 4), (2, 6), (3, 7), parent_state={"stores": per_partition((9, 1), (8, 2))})
    records = [record(2, newest, older, {"": {"cursor": 7, "keys": [[1]]}}), record(1, older, {})]
    point = choose_resume_point(per_partition((3, 7), (1, 5), (2, 6)), records)
    assert (point.reason, point.seq) == (AS_GIVEN, 2)
    reordered = per_partition((3, 7), (2, 6), (1, 4), parent_state={"stores": per_partition((8, 2), (9, 1))})
    assert choose_resume_point(reordered, records).reason == TABLE_AHEAD
    assert choose_resume_point(per_partition((3, 7), (1, 5), (2, 5)), records).reason == EDITED


@pytest.mark.parametrize("given, ahead", [
    ({"t": 5}, ["t: 5 > 4"]),
    ({"t": 3}, []),  # behind: an edit, a partial re-sync
    ({"t": "2025-01-01T00:00:00Z"}, []),  # another kind of value: nothing to compare
    (per_partition((1, 2), (2, 9)), ["partition {\"store\": 2}: 9 > 8"]),
    (per_partition((1, 2), (3, 1)), ["partition {\"store\": 3}: 1, a partition the table's state does not name"]),
    (per_partition((1, 2), state={"t": 9}), ["global: 9 > 8"]),
    (per_partition((1, 1)), []),
])
def test_a_state_ahead_of_the_tables_newest_checkpoint_is_told_apart(given, ahead):
    newest = {"t": 4} if "t" in given else per_partition((1, 3), (2, 8), state={"t": 8})
    point = choose_resume_point(given, [record(1, newest, {})], cursor_field="t")
    assert point.ahead == ahead
    assert point.reason == (STATE_AHEAD if ahead else EDITED)
    assert choose_resume_point(given, [], cursor_field="t").reason == AS_GIVEN  # an empty table takes any state


def test_date_times_are_compared_as_instants():
    newest = {"t": "2025-03-01T00:30:00Z"}
    behind = choose_resume_point({"t": "2025-03-01T01:00+02:00"}, [record(1, newest, {})], cursor_field="t")
    ahead = choose_resume_point({"t": "2025-03-01T02:00+01:00"}, [record(1, newest, {})], cursor_field="t")
    assert (behind.reason, ahead.reason) == (EDITED, STATE_AHEAD)
