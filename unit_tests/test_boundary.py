"""Skipping the records a resumed sync re-reads at its cursor, and nothing else.

A re-read record is skipped only if the resumed commit holds exactly it (same key, same data);
the boundary kept with each commit costs what changed since the last one, and is bounded.
"""

import logging
from collections import Counter

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from source_framework.destinations.checkpoint_record import CheckpointRecord
from source_framework.runtime.boundary import (
    FULL_EVERY,
    MAX_KEYS,
    MAX_UNBUILT_MARKS,
    MAX_UNBUILT_RECORDS,
    Boundary,
    _entry_json,
    _hashed,
    record_hash,
)
from source_framework.runtime.resume import _BoundaryWalk
from source_framework.streams.cursor import partition_key


def snapshot(boundary):
    """The oracle: the whole boundary as of now, built at once from the boundary's entries (the
    notes kept with commits are built lazily and as deltas; they must rebuild to this)."""
    return {p: _entry_json(_hashed(e, boundary._declared), boundary._keyless) for p, e in boundary._entries.items()
            if e.records or boundary._keyless}


def boundary_rebuilt(committed):
    """The newest record's full boundary, walking ``committed`` newest first as a resume does."""
    return _BoundaryWalk().finish(iter(committed))


def read(boundary, slices):
    written = []
    for stream_slice, records in slices:
        boundary.start_partition(partition_key(stream_slice))
        written += [r for r in records if not boundary.already_committed(r)]
    return written


def keys(entry):
    return [key for key, _ in entry["records"]]


def store(n):
    return {"partition": {"store": n}}


def checkpoint(boundary, unconfirmed):
    """A checkpoint whose notes are built at once (a destination that writes each commit alone)."""
    return boundary.notes(boundary.mark(), unconfirmed)


def test_snapshot_keeps_the_keys_at_the_highest_cursor_per_partition():
    boundary = Boundary(["t"], [["id"]])
    records = [{"id": 1, "t": 1}, {"id": 2, "t": 3}, {"id": 3, "t": 3}, {"id": 4, "t": 2}]
    read(boundary, [(None, records)])
    ((slot, entry),) = snapshot(boundary).items()
    assert slot.startswith("#")  # a slice that names no partition: a slot of its own for this run
    assert entry == {"cursor": 3, "records": [[[2], record_hash(records[1])], [[3], record_hash(records[2])]]}
    boundary.start_partition(partition_key({"partition": {"store": 1}}))
    boundary.already_committed({"id": 9, "t": 5})
    assert snapshot(boundary)['{"store": 1}'] == {"cursor": 5, "records": [[[9], record_hash({"id": 9, "t": 5})]]}


def test_resumed_run_skips_only_committed_keys_at_the_same_cursor():
    first = Boundary(["t"], [["id"]])
    read(first, [(None, [{"id": 1, "t": 1}, {"id": 2, "t": 3}])])
    resumed = Boundary(["t"], [["id"]], resumed=snapshot(first))
    written = read(resumed, [(None, [{"id": 2, "t": 3}, {"id": 5, "t": 3}, {"id": 2, "t": 4}])])
    # id 2 at t=3 was committed; id 5 at t=3 is new; id 2 updated to t=4 is new
    assert written == [{"id": 5, "t": 3}, {"id": 2, "t": 4}]
    assert resumed.skipped == 1


def test_date_time_cursors_and_composite_keys():
    boundary = Boundary(["u"], [["a"], ["b", "c"]])
    read(boundary, [(None, [{"a": 1, "b": {"c": 2}, "u": "2025-01-01T00:00:00Z"},
                            {"a": 1, "b": {"c": 3}, "u": "2025-01-01T00:00:00+00:00"}])])
    (snap,) = snapshot(boundary).values()
    assert snap["cursor"] == "2025-01-01T00:00:00Z" and keys(snap) == [[1, 2]]


# -- without a primary key, every record read again is for the table to tell (``already_in_table``) ----------


def test_without_primary_key_the_boundary_keeps_each_partitions_cursor_only():
    first = Boundary(["t"], [])
    read(first, [(store(1), [{"n": "a", "t": 1}, {"n": "b", "t": 2}, {"n": "b", "t": 2}]), (None, [{"n": "x", "t": 7}])])
    kept = snapshot(first)
    assert kept['{"store": 1}'] == {"cursor": 2}
    assert [entry for name, entry in kept.items() if name.startswith("#")] == [{"cursor": 7}]


def test_without_primary_key_a_record_at_or_below_the_resumed_cursor_is_for_the_table_to_tell():
    """The same data may sit in several partitions, which a boundary per partition would count
    once each: only the table can count rows with a record's data (found in review)."""
    first = Boundary(["t"], [])
    read(first, [(store(1), [{"n": "a", "t": 5}]), (None, [{"n": "x", "t": 7}])])
    resumed = Boundary(["t"], [], resumed=snapshot(first))
    resumed.start_partition(partition_key(store(1)))
    assert resumed.already_committed({"n": "a", "t": 5}) is None
    assert resumed.already_committed({"n": "a", "t": 4}) is None  # a lookback window
    assert resumed.already_committed({"n": "a", "t": 6}) is False  # above the cursor: new
    resumed.start_partition(partition_key(store(2)))  # a partition the resumed commit had not read: all new
    assert resumed.already_committed({"n": "a", "t": 5}) is False
    resumed.start_partition(partition_key(None))
    assert resumed.already_committed({"n": "x", "t": 7}) is None
    assert resumed.already_committed({"n": "y", "t": 8}) is False
    assert resumed.skipped == 0


def test_without_primary_key_a_boundary_of_an_earlier_version_is_read_as_its_cursor():
    """Earlier versions kept the records at the cursor too, numbered (``[[0], hash]``), or their keys."""
    earlier = {'{"store": 1}': {"cursor": 5, "records": [[[0], record_hash({"n": "a", "t": 5})]]},
               '{"store": 2}': {"cursor": 3, "keys": [[1]]}}
    resumed = Boundary(["t"], [], resumed=earlier)
    assert snapshot(resumed) == {'{"store": 1}': {"cursor": 5}, '{"store": 2}': {"cursor": 3}}
    resumed.start_partition(partition_key(store(2)))
    assert resumed.already_committed({"n": "b", "t": 3}) is None


# -- issue 11, defect 6: an update that kept its cursor value is not "already committed" ----------


def test_a_record_changed_at_the_same_cursor_is_written_on_resume():
    first = Boundary(["updatedAt"], [["id"]])
    read(first, [(None, [{"id": 1, "updatedAt": "2025-01-01T10:00:00Z", "name": "Ann"},
                         {"id": 2, "updatedAt": "2025-01-01T10:00:00Z", "name": "Bob"}])])
    resumed = Boundary(["updatedAt"], [["id"]], resumed=snapshot(first))
    # within the same second, Ann was renamed; Bob was not touched
    renamed = {"id": 1, "updatedAt": "2025-01-01T10:00:00Z", "name": "Anne"}
    written = read(resumed, [(None, [renamed, {"id": 2, "updatedAt": "2025-01-01T10:00:00Z", "name": "Bob"}])])
    assert written == [renamed]
    assert resumed.skipped == 1


def test_the_boundary_survives_the_checkpoint_record_and_skips_only_identical_records():
    first = Boundary(["t"], [["id"]])
    read(first, [(store(1), [{"id": 1, "t": 5, "v": [1, {"b": 2, "a": 1}]}]), (store(2), [{"id": 2, "t": 7, "v": 0.5}])])
    record = CheckpointRecord(seq=1, batch_id=1, state={}, boundary=snapshot(first))
    resumed = Boundary(["t"], [["id"]], resumed=CheckpointRecord.from_json(record.to_json()).boundary)
    # key order does not matter; 0.5 vs 0.50000001 does
    written = read(resumed, [(store(1), [{"v": [1, {"a": 1, "b": 2}], "t": 5, "id": 1}]), (store(2), [{"id": 2, "t": 7, "v": 0.50000001}])])
    assert written == [{"id": 2, "t": 7, "v": 0.50000001}]


def test_of_two_versions_of_a_key_at_one_cursor_only_the_last_committed_is_skipped():
    first = Boundary(["t"], [["id"]])
    read(first, [(None, [{"id": 1, "t": 3, "v": "old"}, {"id": 1, "t": 3, "v": "new"}])])
    resumed = Boundary(["t"], [["id"]], resumed=snapshot(first))
    # the table's latest row for id 1 is "new": a source that now says "old" must be written
    assert read(resumed, [(None, [{"id": 1, "t": 3, "v": "old"}])]) == [{"id": 1, "t": 3, "v": "old"}]
    again = Boundary(["t"], [["id"]], resumed=snapshot(first))
    assert read(again, [(None, [{"id": 1, "t": 3, "v": "new"}])]) == []


def test_a_boundary_written_before_record_hashes_skips_nothing_and_says_so(caplog):
    # format 1/2 records kept keys only: a key cannot tell the committed record from an update
    with caplog.at_level(logging.WARNING, logger="source_framework.read"):
        resumed = Boundary(["t"], [["id"]], resumed={"": {"cursor": 3, "keys": [[2], [3]]}}, stream="users")
    re_read = [{"id": 2, "t": 3}, {"id": 3, "t": 3}]
    assert read(resumed, [(None, re_read)]) == re_read
    assert resumed.skipped == 0
    assert [r.getMessage() for r in caplog.records if "users" in r.getMessage() and "before record hashes" in r.getMessage()]
    # the records written now are kept with hashes: the next resume skips them
    assert read(Boundary(["t"], [["id"]], resumed=snapshot(resumed)), [(None, re_read)]) == []


def test_a_record_without_a_canonical_json_form_is_never_skipped():
    odd = {"id": 1, "t": 3, "tags": {"a", "b"}}  # a set: no JSON form, so no hash
    assert record_hash(odd) is None
    first = Boundary(["t"], [["id"]])
    read(first, [(None, [odd])])
    assert read(Boundary(["t"], [["id"]], resumed=snapshot(first)), [(None, [odd])]) == [odd]


def test_record_hash_is_short_and_ignores_key_order():
    assert record_hash({"a": 1, "b": [1, 2]}) == record_hash({"b": [1, 2], "a": 1})
    assert record_hash({"a": 1}) != record_hash({"a": 2}) and len(record_hash({"a": 1})) == 16


@settings(max_examples=200, deadline=None)
@given(record=st.dictionaries(st.sampled_from("abcdef"), st.integers() | st.text(max_size=3), max_size=6),
       declared=st.frozensets(st.sampled_from("abcd")))
def test_record_hash_counts_only_the_declared_fields_whatever_else_a_record_carries(record, declared):
    # the hash a resumed run compares: a field outside the schema (no column holds it) never makes
    # the record another one, and a record of declared fields only hashes as its data
    declared_only = {name: value for name, value in record.items() if name in declared}
    assert record_hash(record, declared) == record_hash(declared_only) == record_hash(declared_only, declared)
    if set(record) - declared:
        changed = {**record, **{name: "other" for name in set(record) - declared}}
        assert record_hash(changed, declared) == record_hash(record, declared)


# -- issue 11, defect 15: the boundary kept with a checkpoint costs what changed, and is bounded ---


def one_record_per_partition(boundary, partitions):
    """A partitioned stream checkpointing after each partition; each commit done at once."""
    notes = []
    for n in partitions:
        read(boundary, [(store(n), [{"id": n, "t": 100 + n}])])
        notes.append(checkpoint(boundary, unconfirmed=0))
    return notes


def test_a_checkpoint_holds_only_the_partitions_changed_since_the_last_commit():
    boundary = Boundary(["t"], [["id"]])
    notes = one_record_per_partition(boundary, range(250))
    first = {'{"store": 0}': {"cursor": 100, "records": [[[0], record_hash({"id": 0, "t": 100})]]}}
    assert notes[0] == (first, True)  # the run's first commit is full
    deltas = [b for b, full in notes if not full]
    assert deltas and all(len(b) == 1 for b in deltas)
    assert notes[5][0] == {'{"store": 5}': {"cursor": 105, "records": [[[5], record_hash({"id": 5, "t": 105})]]}}
    fulls = [i for i, (_, full) in enumerate(notes) if full]
    assert fulls == [0, FULL_EVERY, 2 * FULL_EVERY]  # the walk back on resume stays short
    assert len(notes[FULL_EVERY][0]) == FULL_EVERY + 1


def test_a_delta_covers_every_commit_not_known_done():
    # queued checkpoints may be merged into one write that keeps the last one's notes only
    boundary = Boundary(["t"], [["id"]])
    one_record_per_partition(boundary, range(20))
    for n in (3, 4):
        read(boundary, [(store(n), [{"id": n, "t": 200 + n}])])
        checkpoint(boundary, unconfirmed=0)
    read(boundary, [(store(5), [{"id": 5, "t": 205}])])
    delta, full = checkpoint(boundary, unconfirmed=2)  # the commits of stores 3 and 4 are still queued
    assert not full and sorted(delta) == ['{"store": 3}', '{"store": 4}', '{"store": 5}']
    assert delta['{"store": 3}']["cursor"] == 203
    nothing_known, full = checkpoint(boundary, unconfirmed=23)  # no commit of this run known done
    assert full and nothing_known == snapshot(boundary) and len(nothing_known) == 20


def test_an_unpartitioned_stream_keeps_a_full_boundary_in_every_commit():
    boundary = Boundary(["t"], [["id"]])
    boundary.start_partition(partition_key(None))  # one slice, checkpointed every record
    for t in range(5):
        assert not boundary.already_committed({"id": t, "t": t})
        assert checkpoint(boundary, unconfirmed=0)[1]


def test_delta_records_rebuild_the_boundary_a_resume_skips():
    boundary = Boundary(["t"], [["id"]])
    notes = one_record_per_partition(boundary, range(130))
    read(boundary, [(store(7), [{"id": 70, "t": 500}, {"id": 71, "t": 500}])])  # a partition moves on
    notes.append(checkpoint(boundary, unconfirmed=0))
    records = [CheckpointRecord.from_json(CheckpointRecord(seq=i, batch_id=i, state={}, boundary=b, boundary_full=full).to_json())
               for i, (b, full) in enumerate(notes)]
    rebuilt = boundary_rebuilt(reversed(records))
    assert rebuilt == snapshot(boundary) and len(rebuilt) == 130
    resumed = Boundary(["t"], [["id"]], resumed=rebuilt)
    re_read = [(store(7), [{"id": 70, "t": 500}, {"id": 71, "t": 500}]), (store(129), [{"id": 129, "t": 229}])]
    assert read(resumed, re_read) == [] and resumed.skipped == 3


def test_the_boundary_is_bounded_and_an_overflowed_partition_skips_nothing_on_resume(caplog):
    boundary = Boundary(["day"], [["id"]], stream="events")
    read(boundary, [(store(n), [{"id": 0, "day": "2025-01-01"}]) for n in range(10, 30)])
    checkpoint(boundary, unconfirmed=0)
    same_day = [{"id": i, "day": "2025-01-02"} for i in range(MAX_KEYS + 5)]
    with caplog.at_level(logging.WARNING, logger="source_framework.read"):
        read(boundary, [(store(2), same_day)])
        read(boundary, [(store(3), [{"id": i, "day": "2025-01-02"} for i in range(MAX_KEYS + 5)])])
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1 and "events" in warnings[0] and "written again" in warnings[0]
    delta, full = checkpoint(boundary, unconfirmed=0)
    assert not full and delta['{"store": 2}'] == {"cursor": "2025-01-02", "overflow": True}
    assert len(CheckpointRecord(seq=1, batch_id=1, state={}, boundary=delta).to_json()) < 300_000
    assert '{"store": 2}' not in snapshot(boundary) and len(snapshot(boundary)) <= 21
    resumed = Boundary(["day"], [["id"]], resumed=delta)
    assert read(resumed, [(store(2), same_day[:3])]) == same_day[:3]


def test_a_partition_that_moves_on_frees_its_room_in_the_boundary():
    boundary = Boundary(["t"], [["id"]])
    read(boundary, [(store(1), [{"id": i, "t": 1} for i in range(MAX_KEYS)])])
    read(boundary, [(store(1), [{"id": 0, "t": 2}]), (store(2), [{"id": 5, "t": 9}])])
    assert {p: keys(e) for p, e in snapshot(boundary).items()} == {'{"store": 1}': [[0]], '{"store": 2}': [[5]]}


# -- slices that name no partition (substreams of plain dicts, date windows) ---------------------------


def test_records_of_every_slice_without_a_partition_are_skipped_on_resume_whatever_the_slice():
    """A substream whose slices are plain dicts: each parent's records at its own highest cursor
    are re-read on resume, under slices that differ from the first run's (their start moved)."""
    first = Boundary(["t"], [["id"]])
    parents = {1: [{"id": 10, "t": 5}, {"id": 11, "t": 7}], 2: [{"id": 20, "t": 3}], 3: [{"id": 30, "t": 9}]}
    read(first, [({"store_id": p, "since": 0}, records) for p, records in parents.items()])
    resumed = Boundary(["t"], [["id"]], resumed=snapshot(first))
    again = {1: [{"id": 11, "t": 7}], 2: [{"id": 20, "t": 3}, {"id": 21, "t": 4}], 3: [{"id": 30, "t": 9}]}
    written = read(resumed, [({"store_id": p, "since": "moved"}, records) for p, records in again.items()])
    assert written == [{"id": 21, "t": 4}] and resumed.skipped == 3


def test_slots_of_an_earlier_run_are_dropped_once_the_stream_was_read_to_its_end():
    first = Boundary(["t"], [["id"]])
    read(first, [({"store_id": 1}, [{"id": 10, "t": 5}])])
    resumed = Boundary(["t"], [["id"]], resumed=snapshot(first))
    read(resumed, [({"store_id": 1, "since": 5}, [{"id": 10, "t": 5}])])  # skipped, and kept as this run's edge
    assert len(snapshot(resumed)) == 2  # until the end, the earlier run's slot is carried too
    resumed.finish()
    (entry,) = snapshot(resumed).values()
    assert keys(entry) == [[10]]
    assert checkpoint(resumed, unconfirmed=0)[1]  # a full boundary: a delta cannot drop a slot


def test_a_record_below_where_the_resumed_partition_had_got_is_for_the_table_to_tell():
    """None: read again under the resumed state (a lookback window, a parent read from the start);
    only the table can say whether it holds that very record (``EarlierCommits.already_in_table``)."""
    first = Boundary(["t"], [["id"]])
    first.start_partition('{"store": 1}')
    for record in ({"id": 1, "t": 1}, {"id": 2, "t": 5}):
        first.already_committed(record)
    first.start_partition("")  # a date window: slots are compared with the highest of any slot
    first.already_committed({"id": 9, "t": 7})
    resumed = Boundary(["t"], [["id"]], resumed=snapshot(first))
    resumed.start_partition('{"store": 1}')
    assert resumed.already_committed({"id": 1, "t": 1}) is None
    assert resumed.already_committed({"id": 2, "t": 5}) is True  # the record at the cursor: skipped, as before
    assert resumed.already_committed({"id": 3, "t": 6}) is False  # above it: new
    resumed.start_partition('{"store": 2}')  # a partition the resumed commit had not read: all new
    assert resumed.already_committed({"id": 20, "t": 1}) is False
    resumed.start_partition("")
    assert resumed.already_committed({"id": 8, "t": 6}) is None
    assert resumed.already_committed({"id": 10, "t": 8}) is False
    assert Boundary(["t"], [["id"]]).already_committed({"id": 1, "t": 1}) is False  # nothing resumed


def test_a_record_without_a_cursor_value_is_for_the_table_to_tell_in_a_resumed_run():
    """No state ever passes such a record, so every sync reads it again (issue 49, item 13)."""
    for keys in ([["id"]], []):
        assert Boundary(["t"], keys).already_committed({"id": 1, "t": None}) is False  # nothing resumed: new
        assert Boundary(["t"], keys, resumed={}).already_committed({"id": 1, "t": None}) is None
        resumed = Boundary(["t"], keys, resumed={"#x:0": {"cursor": 5, "records": []}})
        resumed.start_partition("")
        assert resumed.already_committed({"id": 1}) is None
        assert resumed.already_committed({"id": 2, "t": 6}) is False


# -- property: any history of syncs leaves the table holding the API's records exactly -----------

# Per sync, what the API gained since the last one: per partition (None: a slice naming none), new
# records (data, cursor step); the cursor never goes back, and identical records are common.
_news = st.lists(
    st.dictionaries(st.sampled_from([None, 1, 2]), st.lists(st.tuples(st.sampled_from("abc"), st.integers(0, 1)), max_size=5)),
    min_size=1, max_size=5,
)


def model_already_in_table(table, held, this_sync, keyed, answered):
    """What ``TableWriter.already_in_table`` answers, as a model: with a key, a row equal to the record (in
    any sync), each row once per call; without one, a row of an earlier sync equal to it, each row
    once per sync (``answered``)."""
    rows = Counter(repr(row) for row, sync in table if keyed or sync != this_sync)
    answered = answered if not keyed else Counter()
    answers = []
    for record in held:
        found = rows[repr(record)] > answered[repr(record)]
        answered[repr(record)] += found
        answers.append(found)
    return answers


@given(_news, st.booleans(), st.integers(0, 2))
@settings(max_examples=200, deadline=None)
def test_any_history_of_incremental_syncs_holds_every_record_once(history, keyed, lookback):
    """Syncs read each partition from its state's cursor less ``lookback``, inclusive, as APIs
    filter (``updatedAt >= cursor``); the records the boundary leaves to the table go to a model of
    ``already_in_table``. The table must end each sync holding exactly the API's records, with a primary key
    (ids unique) or without one (identical records are separate rows)."""
    api: dict = {None: [], 1: [], 2: []}
    top = {None: 0, 1: 0, 2: 0}
    table: list = []
    state: dict = {}
    kept: dict = {}
    next_id = 0
    for sync, news in enumerate(history):
        for partition, added in news.items():
            for data, step in added:
                top[partition] += step
                next_id += 1
                record = {"n": data, "t": top[partition], "p": partition}
                api[partition].append({**record, "id": next_id} if keyed else record)
        boundary = Boundary(["t"], [["id"]] if keyed else [], resumed=kept)
        answered: Counter = Counter()
        for partition, records in api.items():
            since = state.get(partition, 0) - lookback
            boundary.start_partition(partition_key(store(partition) if partition is not None else None))
            written, held = [], []
            for record in records:
                if record["t"] < since:
                    continue
                seen = boundary.already_committed(record)
                if seen is None:
                    held.append(record)
                elif not seen:
                    written.append(record)
            written += [r for r, found in zip(held, model_already_in_table(table, held, sync, keyed, answered), strict=True) if not found]
            table += [(record, sync) for record in written]
            if records:
                state[partition] = records[-1]["t"]
        boundary.finish()
        kept = snapshot(boundary)
        expected = sorted(map(repr, (r for records in api.values() for r in records)))
        assert sorted(repr(row) for row, _ in table) == expected


# -- issue 13: notes built only for the checkpoints a destination keeps ---------------------------

_steps = st.lists(
    st.one_of(
        st.tuples(st.just("read"), st.sampled_from([None, 1, 2]), st.lists(st.tuples(st.integers(0, 4), st.integers(0, 2)), max_size=4)),
        st.tuples(st.just("mark")),
        st.tuples(st.just("hand over")),  # the last mark held is written, with its notes; the others' are dropped
        st.tuples(st.just("slow mark")),  # a checkpoint after a pause: the ones held are handed over first
        st.tuples(st.just("done")),  # the commits handed over so far complete
    ),
    max_size=40,
)


@given(_steps, st.booleans())
@settings(max_examples=300, deadline=None)
def test_notes_built_late_for_the_last_of_several_checkpoints_rebuild_the_boundary_as_it_was_at_that_checkpoint(steps, resumed):
    """A destination holds fast checkpoints and writes one commit for them, with the last one's
    notes, built when it writes it: after more records were read. Walking back the commits
    written must give exactly the boundary as it was at that checkpoint (a boundary ahead of the
    commit would have a resumed run skip records it does not hold), whichever commits were known
    done when each checkpoint was marked."""
    earlier = {"#old:0": {"cursor": 1, "records": [[[9], record_hash({"id": 9, "t": 1})]]}} if resumed else {}
    lazy, twin = Boundary(["t"], [["id"]], resumed=earlier), Boundary(["t"], [["id"]], resumed=earlier)
    twin._run = lazy._run  # (slots of slices without a partition named alike)
    written: list = []  # the commits written, oldest first
    held: list = []  # (mark, unconfirmed, the boundary then)
    handed_over = done = -1  # the last mark of the newest commit written, of the newest known done
    cursor = {None: 0, 1: 0, 2: 0}

    def mark():
        number = lazy.mark()
        twin_number = twin.mark()
        assert number == twin_number
        return number, number - done - 1, snapshot(twin)

    def hand_over():
        nonlocal handed_over
        if not held:
            return
        number, unconfirmed, expected = held[-1]
        held.clear()
        boundary, full = lazy.notes(number, unconfirmed)
        written.append(CheckpointRecord(seq=number, batch_id=number, state={}, boundary=boundary, boundary_full=full))
        assert boundary_rebuilt(reversed(written)) == expected
        handed_over = number

    for step in steps:
        if step[0] == "read":
            _, partition, records = step
            for twin_or_lazy in (lazy, twin):
                twin_or_lazy.start_partition(partition_key(store(partition) if partition is not None else None))
            for key, rise in records:
                cursor[partition] += rise
                record = {"id": key, "t": cursor[partition], "v": len(written)}
                assert lazy.already_committed(record) == twin.already_committed(record)
        elif step[0] == "mark":
            held.append(mark())
        elif step[0] == "slow mark":
            marked = mark()
            hand_over()
            held.append(marked)
        elif step[0] == "hand over":
            hand_over()
        else:
            done = handed_over
    lazy.finish()
    twin.finish()
    held.append(mark())
    hand_over()
    assert snapshot(lazy) == snapshot(twin)


def test_notes_asked_for_out_of_order_are_refused():
    boundary = Boundary(["t"], [["id"]])
    read(boundary, [(None, [{"id": 1, "t": 1}])])
    first = boundary.mark()
    read(boundary, [(None, [{"id": 2, "t": 2}])])
    second = boundary.mark()
    assert keys(next(iter(boundary.notes(second, unconfirmed=0)[0].values()))) == [[2]]
    with pytest.raises(RuntimeError, match="asked for after"):
        boundary.notes(first, unconfirmed=0)


class _Record(dict):
    """A record that can be watched for being freed (a plain dict takes no weak reference)."""


def test_a_checkpoint_keeps_no_record_alive_once_the_stream_moved_past_it():
    """What a checkpoint's notes need of the records at the partition's edge is their hashes: a
    mark holding the records themselves kept them, and whatever they hold, alive until its notes
    were built (up to MAX_UNBUILT_MARKS checkpoints where nobody asks, as with stdout), which
    slowed the whole read loop at small checkpoint intervals."""
    import weakref

    boundary = Boundary(["t"], [["id"]])
    boundary.start_partition(partition_key(None))
    watched = []
    marks = []
    for t in range(10):
        record = _Record(id=t, t=t)
        watched.append(weakref.ref(record))
        boundary.already_committed(record)
        marks.append(boundary.mark())
        del record
    assert [ref() is None for ref in watched[:-1]] == [True] * 9  # only the edge's record may live on
    notes, _ = boundary.notes(marks[-1], unconfirmed=0)
    assert list(notes.values()) == [{"cursor": 9, "records": [[[9], record_hash({"id": 9, "t": 9})]]}]


def test_marks_nobody_asks_notes_for_are_built_in_the_end_so_memory_stays_bounded():
    """A destination that keeps no notes (stdout) never asks for them: the marks' copies of the
    records must not pile up, and the newest marks' notes are still right."""
    boundary = Boundary(["t"], [["id"]])
    boundary.start_partition(partition_key(None))
    for t in range(3 * MAX_UNBUILT_MARKS):
        boundary.already_committed({"id": t, "t": t})
        boundary.mark()
    assert len(boundary._marks) <= MAX_UNBUILT_MARKS
    ties = [{"id": i, "t": 10**6} for i in range(MAX_KEYS)]
    for start in range(0, len(ties), 100):  # records at one cursor: each mark copies them all
        for record in ties[start:start + 100]:
            boundary.already_committed(record)
        last = boundary.mark()
    assert boundary._unbuilt_records <= 3 * MAX_UNBUILT_RECORDS  # (the newest two marks' copies at most)
    (entry,) = boundary.notes(last, unconfirmed=1000)[0].values()
    assert len(entry["records"]) == MAX_KEYS and entry["cursor"] == 10**6
    with pytest.raises(RuntimeError, match="asked for after"):
        boundary.notes(last - 5, unconfirmed=0)
