"""The two halves of the Spark sink without Spark: the reading thread's buffer, the committer's
table writer (against a fake table), and the typed jobs between them."""

from __future__ import annotations

import dataclasses
import os
import threading
import time
import traceback

import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from source_framework.destinations.base import APPEND, APPEND_DEDUP, OVERWRITE, CommitReceipt, StreamTarget
from source_framework.destinations.checkpoint_record import CheckpointRecord, ResumeNotes
from source_framework.destinations.spark.arrow_conversion import arrow_schema
from source_framework.destinations.spark.buffer import StreamBuffer
from source_framework.destinations.spark.commit_parts import CommitInfo, StagedFiles
from source_framework.destinations.spark.committer import BackgroundCommitter, CommitJob
from source_framework.destinations.spark.table_writer import TableWriter
from source_framework.helpers.tuning import TUNING

JSON_SCHEMA = {"properties": {"id": {"type": "integer"}, "n": {"type": "integer"}}}
SCHEMA = arrow_schema(JSON_SCHEMA)


class FakeTable:
    """Records what the writer asks of a table: commits (with their arguments) and stages."""

    def __init__(self, fail_on_commit: int | None = None) -> None:
        self.path = "/warehouse/demo/numbers"
        self.commits: list[dict] = []
        self.staged: list[StagedFiles] = []
        self.cleared_resets = 0
        self.fail_on_commit = fail_on_commit

    def last_checkpoint(self) -> CheckpointRecord | None:
        if not self.commits:
            return None
        return CheckpointRecord(seq=self.commits[-1]["seq"], batch_id=0, state=self.commits[-1]["state"])

    def commit(self, data, state, seq, *, replace=False, notes=None, merged_states=(), reset_id=None, schema=None, staged=(),
               pages=None):
        if self.fail_on_commit == len(self.commits) + 1:
            raise OSError("disk full")
        assert pages is None  # (no page converter here)
        rows = data.num_rows + sum(item.rows for item in staged)
        self.commits.append({"seq": seq, "state": state, "replace": replace, "rows": rows, "notes": notes,
                             "merged_states": list(merged_states), "reset_id": reset_id, "staged": list(staged),
                             "checkpoints": set(data.column("_sf_checkpoint").to_pylist()), "ids": data.column("id").to_pylist()})
        return CommitInfo(seq, seq, [], rows, 1.0)

    def stage(self, data: pa.Table) -> StagedFiles:
        staged = StagedFiles(f"/staging/s-{len(self.staged)}", data.num_rows)
        self.staged.append(staged)
        return staged

    def clear_reset(self) -> None:
        self.cleared_resets += 1

    def committed_checkpoints(self):
        return iter(())

    def pending_reset(self):
        return None


def target(mode: str = APPEND, rebuild: bool = False) -> StreamTarget:
    return StreamTarget("numbers", None, JSON_SCHEMA, incremental=True, destination_sync_mode=mode,
                        primary_key=[["id"]], cursor_field=["n"], rebuild=rebuild)


def batch(ids) -> pa.Table:
    from source_framework.destinations.spark.arrow_conversion import records_to_arrow

    return records_to_arrow([{"id": i, "n": i} for i in ids], SCHEMA, extracted_at_ms=0, sync_id="s", checkpoint=-1)


def job(writer, ids, state, stage_only=False):
    data = batch(ids)
    return CommitJob(writer, [data], data.num_rows, data.nbytes, state, ResumeNotes(start_state={}), stage_only=stage_only)


# -- the table writer -----------------------------------------------------------------------------


def test_queued_checkpoints_become_one_commit_that_records_the_merged_states():
    table = FakeTable()
    writer = TableWriter(table, target(), SCHEMA)
    receipts = writer.apply([job(writer, [1, 2], {"n": 2}), job(writer, [3], {"n": 3})])
    (commit,) = table.commits
    assert commit["state"] == {"n": 3} and commit["merged_states"] == [{"n": 2}] and commit["rows"] == 3
    assert commit["checkpoints"] == {0}  # rows numbered with the commit they land in
    assert receipts == [CommitReceipt(3, 1), CommitReceipt(3, 1)]
    receipts = writer.apply([job(writer, [4], {"n": 4})])
    assert receipts == [CommitReceipt(4, 2)] and table.commits[1]["seq"] == 1


def test_queued_checkpoints_commit_their_rows_in_the_order_they_were_read():
    """Each job's records not converted yet come after its batches and before the next job's:
    ``append_dedup`` keeps the last version read of a key at one cursor (issue 49, item 9)."""
    table = FakeTable()
    writer = TableWriter(table, target(), SCHEMA)
    first = CommitJob(writer, [batch([1, 2])], 3, 0, {"n": 3}, None, records=[{"id": 3, "n": 3}], extracted_at_ms=[0])
    second = CommitJob(writer, [batch([4, 5])], 4, 0, {"n": 7}, None, records=[{"id": 6, "n": 6}, {"id": 7, "n": 7}],
                       extracted_at_ms=[0, 0])
    writer.apply([first, second])
    assert table.commits[0]["ids"] == [1, 2, 3, 4, 5, 6, 7]


def test_staged_rows_are_published_with_the_next_commit_and_counted_there():
    table = FakeTable()
    writer = TableWriter(table, target(), SCHEMA)
    staged = writer.apply([job(writer, range(5), None, stage_only=True)])
    assert staged == [table.staged[0]] and table.commits == []
    (receipt,) = writer.apply([job(writer, [9], {"n": 9})])
    assert table.commits[0]["staged"] == table.staged and receipt.rows_through == 6


def test_after_a_failed_commit_every_later_job_is_refused():
    table = FakeTable(fail_on_commit=1)
    writer = TableWriter(table, target(), SCHEMA)
    with pytest.raises(OSError):
        writer.apply([job(writer, [1], {"n": 1})])
    with pytest.raises(RuntimeError, match="an earlier commit failed"):
        writer.apply([job(writer, [2], {"n": 2})])


def test_a_reset_rebuilds_with_the_first_commit_only_and_is_recorded():
    table = FakeTable()
    writer = TableWriter(table, target(), SCHEMA)
    writer.rebuild_from_reset("reset-1")
    assert writer.rebuilding
    writer.apply([job(writer, [1], {"n": 1})])
    writer.apply([job(writer, [2], {"n": 2})])
    assert [(c["replace"], c["reset_id"]) for c in table.commits] == [(True, "reset-1"), (False, None)]
    assert table.cleared_resets == 1 and not writer.rebuilding


def test_overwrite_replaces_the_table():
    table = FakeTable()
    writer = TableWriter(table, target(OVERWRITE), SCHEMA)
    writer.apply([job(writer, [1], {"n": 1})])
    assert table.commits[0]["replace"] is True


# -- the buffer, with the real committer thread ------------------------------------------------------


@pytest.fixture
def committer():
    committer = BackgroundCommitter(lambda jobs: jobs[0].writer.apply(jobs))
    yield committer
    committer.close()


def test_the_buffer_turns_records_into_jobs_and_returns_their_futures(committer):
    table = FakeTable()
    buffer = StreamBuffer(TableWriter(table, target(), SCHEMA), committer, stage_rows=10)
    for i in range(25):
        buffer.write({"id": i, "n": i})
    receipt = buffer.commit({"n": 24}, ResumeNotes(start_state={})).result(5)
    assert receipt.rows_through == 25
    # every stage_rows the rows went to staged files ahead of the commit (queued stage jobs may share one)
    assert sum(s.rows for s in table.staged) == 20 and table.commits[0]["staged"] == table.staged
    assert table.commits[0]["rows"] == 25
    # nothing left to write: finish answers with the last commit's receipt, no empty commit
    assert buffer.finish({"n": 24}).result(5).rows_through == 25 and len(table.commits) == 1


def test_a_rebuild_replaces_the_table_once_even_with_nothing_to_write(committer):
    """The buffer knows on its own thread whether the run's first commit replaces the table: a
    rebuild with no records still replaces it at the end; after a replacing commit, nothing more."""
    empty = FakeTable()
    buffer = StreamBuffer(TableWriter(empty, target(rebuild=True), SCHEMA), committer)
    assert list(buffer.earlier_commits.committed()) == []  # a rebuild starts over: nothing in the table counts
    buffer.finish({"n": 0}).result(5)
    assert [(c["replace"], c["rows"]) for c in empty.commits] == [(True, 0)]

    table = FakeTable()
    buffer = StreamBuffer(TableWriter(table, target(rebuild=True), SCHEMA), committer)
    buffer.write({"id": 1, "n": 1})
    buffer.commit({"n": 1}).result(5)
    buffer.finish({"n": 1}).result(5)
    assert [(c["replace"], c["rows"]) for c in table.commits] == [(True, 1)]


class Clock:
    """The buffer's clock, moved by hand (seconds, as ``time.time``)."""

    def __init__(self) -> None:
        self.now = 1_000.0

    def time(self) -> float:
        return self.now


@pytest.fixture
def clock(monkeypatch):
    from source_framework.destinations.spark import buffer

    fake = Clock()
    monkeypatch.setattr(buffer, "time", fake)
    return fake


def write_ids(buffer, ids):
    for i in ids:
        buffer.write({"id": i, "n": i})


def test_checkpoints_that_come_fast_are_grouped_and_committed_as_one_each_state_after_it(committer, clock):

    table = FakeTable()
    buffer = StreamBuffer(TableWriter(table, target(), SCHEMA), committer)
    write_ids(buffer, [0])
    first = buffer.commit({"n": 0})  # the first checkpoint is never grouped: the first STATE leaves early
    assert first.result(5).rows_through == 1
    futures = []
    for i in range(1, TUNING.group_checkpoints):
        write_ids(buffer, [i])
        futures.append(buffer.commit({"n": i}))
    time.sleep(0.2)  # time for the committer, were they handed over
    assert not any(future.done() for future in futures) and len(table.commits) == 1
    write_ids(buffer, [TUNING.group_checkpoints])
    futures.append(buffer.commit({"n": TUNING.group_checkpoints}))  # the last one a job groups: all are handed over
    write_ids(buffer, [99])  # read after the last grouped checkpoint: not covered by it
    receipts = [future.result(5) for future in futures]
    assert len(table.commits) == 2  # the grouped checkpoints: one commit
    commit = table.commits[1]
    assert commit["state"] == {"n": TUNING.group_checkpoints} and commit["rows"] == TUNING.group_checkpoints
    assert commit["merged_states"] == [{"n": i} for i in range(1, TUNING.group_checkpoints)]
    assert all(receipt.rows_through == TUNING.group_checkpoints + 1 for receipt in receipts)
    assert buffer.finish({"n": 99}).result(5).rows_through == TUNING.group_checkpoints + 2
    assert table.commits[2]["rows"] == 1


def test_a_read_bounded_to_fewer_checkpoints_ahead_groups_half_as_many_and_at_1_none(committer, clock):
    """``read --max-checkpoints-ahead N``: a group is half the bound (as 64 is of the default 128),
    so one job commits while the next is read; at 1 every checkpoint commits on its own at once."""
    assert TUNING.group_size_for(None) == TUNING.group_size_for(TUNING.max_in_flight) == TUNING.group_checkpoints == 64
    assert TUNING.max_in_flight == 128 and dataclasses.replace(TUNING, max_in_flight=32).group_checkpoints == 16
    assert [TUNING.group_size_for(n) for n in (1, 2, 3, 10, 10_000)] == [1, 1, 1, 5, TUNING.group_checkpoints]
    table = FakeTable()
    buffer = StreamBuffer(TableWriter(table, target(), SCHEMA), committer, group_size=TUNING.group_size_for(1))
    for i in range(4):  # as fast as checkpoints come: none grouped
        write_ids(buffer, [i])
        assert buffer.commit({"n": i}).result(5).rows_through == i + 1
    assert [c["state"] for c in table.commits] == [{"n": i} for i in range(4)]
    buffer = StreamBuffer(TableWriter(FakeTable(), target(), SCHEMA), committer, group_size=TUNING.group_size_for(6))
    grouped = []
    for i in range(3):
        write_ids(buffer, [i])
        grouped.append(buffer.commit({"n": i}))
    time.sleep(0.2)  # time for the committer, were they handed over
    assert grouped[0].done() and not grouped[1].done()  # the first is never grouped; then three are grouped
    write_ids(buffer, [3])
    grouped.append(buffer.commit({"n": 3}))  # the third grouped: all handed over
    assert [f.result(5).rows_through for f in grouped[1:]] == [4, 4, 4]


def test_only_the_notes_of_the_last_grouped_checkpoint_are_built_on_the_reading_thread_when_it_is_handed_over(committer, clock):
    """Notes come as functions that build them (``Boundary.notes``): those of checkpoints a
    commit passes over are never built; the kept ones are built before the job leaves this thread
    (the boundary they read is this thread's, and moves on with the next record)."""

    built: list = []

    def notes(n):
        def build():
            built.append((n, threading.get_ident()))
            return ResumeNotes(start_state={}, boundary={"p": {"cursor": n}})
        return build

    table = FakeTable()
    buffer = StreamBuffer(TableWriter(table, target(), SCHEMA), committer)
    write_ids(buffer, [0])
    buffer.commit({"n": 0}, notes(0))  # not grouped: built at once
    assert built == [(0, threading.get_ident())]
    grouped = []
    for i in (1, 2, 3):
        write_ids(buffer, [i])
        grouped.append(buffer.commit({"n": i}, notes(i)))
    assert len(built) == 1  # grouped: not built yet
    clock.now += TUNING.group_ms / 1000
    write_ids(buffer, [4])  # the group is old: handed over with the last one's notes, before the record joins
    assert built[1:] == [(3, threading.get_ident())] and grouped[-1].result(5).rows_through == 4
    clock.now += 2 * TUNING.fast_ms / 1000
    buffer.commit({"n": 4}, notes(4)).result(5)  # after a pause: not grouped
    assert built == [(0, threading.get_ident()), (3, threading.get_ident()), (4, threading.get_ident())]
    # each commit keeps the notes of the state it records (the committer may merge queued jobs too)
    assert all(c["notes"].boundary == {"p": {"cursor": c["state"]["n"]}} for c in table.commits)
    assert [s for c in table.commits for s in [*c["merged_states"], c["state"]]] == [{"n": n} for n in range(5)]


def grouping_one(committer):
    """A buffer past its first checkpoint (never grouped) that groups its second, of record 1."""
    table = FakeTable()
    buffer = StreamBuffer(TableWriter(table, target(), SCHEMA), committer)
    buffer.commit({"n": 0}).result(5)
    write_ids(buffer, [1])
    return table, buffer, buffer.commit({"n": 1})


def test_a_grouped_checkpoint_is_handed_over_when_someone_waits_for_it(committer, clock):
    table, buffer, grouped = grouping_one(committer)
    write_ids(buffer, [2])
    time.sleep(0.2)
    assert not grouped.done()
    assert grouped.result(5).rows_through == 1  # waiting does not hang: the buffer hands it over
    assert table.commits[-1]["rows"] == 1 and table.commits[-1]["state"] == {"n": 1}


def test_grouped_checkpoints_fail_with_their_commit_and_run_callbacks_added_while_grouped(committer, clock):
    """The runtime reads a grouped checkpoint's outcome as it reads any commit's: a failed merged
    commit fails every checkpoint it grouped (no STATE for any), and a callback added while it was
    grouped runs once, with the checkpoint's own future."""
    table = FakeTable(fail_on_commit=2)
    buffer = StreamBuffer(TableWriter(table, target(), SCHEMA), committer)
    buffer.commit({"n": 0}).result(5)
    write_ids(buffer, [1])
    first = buffer.commit({"n": 1})
    write_ids(buffer, [2])
    second = buffer.commit({"n": 2})
    seen: list = []
    first.add_done_callback(seen.append)
    assert not first.done() and not second.done() and seen == []
    with pytest.raises(OSError, match="disk full"):
        second.result(5)  # waiting hands both over; their one commit fails
    for grouped in (first, second):
        assert grouped.done() and not grouped.cancelled() and isinstance(grouped.exception(5), OSError)
        with pytest.raises(OSError):
            grouped.result(5)
    deadline = time.monotonic() + 5
    while not seen and time.monotonic() < deadline:
        time.sleep(0.01)
    assert seen == [first]
    later: list = []
    second.add_done_callback(later.append)  # added once handed over and done: runs at once
    assert later == [second] and len(table.commits) == 1


def test_a_checkpoint_after_a_pause_is_not_grouped_and_grouped_ones_leave_once_old(committer, clock):
    """A stream reading a slow API groups none of its checkpoints; grouped ones wait at most
    ``TUNING.group_ms`` for company, until the next record comes."""

    table = FakeTable()
    buffer = StreamBuffer(TableWriter(table, target(), SCHEMA), committer)
    buffer.commit({"n": 0}).result(5)
    clock.now += 2 * TUNING.fast_ms / 1000
    write_ids(buffer, [1])
    assert buffer.commit({"n": 1}).result(5).rows_through == 1  # after a pause: handed over at once
    write_ids(buffer, [2])
    grouped = buffer.commit({"n": 2})  # came fast: grouped
    clock.now += TUNING.group_ms / 1000
    committer_commits = len(table.commits)
    write_ids(buffer, [3])  # the grouped one is old now: handed over before this record joins
    time.sleep(0.2)
    assert grouped.done() and grouped.result(5).rows_through == 2 and len(table.commits) == committer_commits + 1


def test_checkpoints_that_keep_coming_fast_stay_grouped_until_the_first_is_group_ms_old(committer, clock):
    """Where reading is slow, fast checkpoints (each within ``TUNING.fast_ms`` of the one before) go on
    joining one group for ``TUNING.group_ms``, longer than ``fast_ms``: one commit for all of them, not
    one each ``fast_ms`` (at 70,000 records/s, interval 100: 158 commits a million records, not 500)."""
    gap_ms = TUNING.fast_ms // 2
    # up to group_ms - fast_ms: well past fast_ms, short of group_ms; fewer than the count that closes a group
    count = min(TUNING.group_checkpoints - 2, (TUNING.group_ms - TUNING.fast_ms) // gap_ms)
    assert count * gap_ms > TUNING.fast_ms  # (the group outlasts fast_ms, or this would test nothing)
    table, buffer, _ = grouping_one(committer)
    grouped = []
    for i in range(2, 2 + count):
        clock.now += gap_ms / 1000
        write_ids(buffer, [i])
        grouped.append(buffer.commit({"n": i}))
    time.sleep(0.2)  # time for the committer, were they handed over
    assert not any(future.done() for future in grouped) and len(table.commits) == 1
    clock.now += TUNING.group_ms / 1000
    write_ids(buffer, [99])  # the first grouped is old now: all are handed over, as one commit
    assert [future.result(5).rows_through for future in grouped] == [count + 1] * count
    assert len(table.commits) == 2 and table.commits[1]["rows"] == count + 1


def test_a_clock_set_back_hands_grouped_checkpoints_over_at_the_next_record(committer, clock):
    table, buffer, grouped = grouping_one(committer)
    clock.now -= 3600  # the system clock set back an hour
    write_ids(buffer, [2])
    time.sleep(0.2)
    assert grouped.done() and grouped.result(5).rows_through == 1


def test_grouped_checkpoints_are_handed_over_before_a_batch_of_records_forms(committer, clock):
    table = FakeTable()
    buffer = StreamBuffer(TableWriter(table, target(), SCHEMA), committer, stage_rows=4)  # batches of 4
    buffer.commit({"n": -1}).result(5)
    write_ids(buffer, [0, 1])
    grouped = buffer.commit({"n": 1})
    write_ids(buffer, range(2, 9))  # a batch and a stage job form after the hand-over, not across it
    assert grouped.result(5).rows_through == 2 and table.commits[-1]["state"] == {"n": 1}
    receipt = buffer.commit({"n": 8}).result(5)
    assert receipt.rows_through == 9 and table.commits[-1]["state"] == {"n": 8}


def test_an_aborted_stream_commits_its_grouped_checkpoints_and_drops_the_records_after_them(committer, clock):
    """A stream that fails keeps what its checkpoints before the failure cover, grouped or not."""
    table, buffer, grouped = grouping_one(committer)
    write_ids(buffer, [2])
    buffer.abort()
    assert grouped.result(5).rows_through == 1
    assert table.commits[-1]["state"] == {"n": 1} and table.commits[-1]["rows"] == 1
    assert buffer.finish({"n": 1}).result(5).rows_through == 1 and len(table.commits) == 2  # record 2 is gone


def test_a_stream_that_fails_commits_and_prints_the_checkpoints_it_asked_for_before_the_failure(committer, clock):
    """Through ``read``: a slice-end checkpoint that came fast (grouped to share a commit) and a
    failure in the next slice, after records of it were written. The grouped checkpoint is committed
    with exactly the records before it, and its STATE is printed: the next sync starts after it.
    (``integration_tests/test_failed_partition.py`` end to end, where grouping depends on the pace;
    here the buffer's clock stands still, so the checkpoint is always grouped. A version of the
    runtime that dropped grouped checkpoints with a failed stream failed this.)"""
    from source_framework.destinations.base import Destination
    from source_framework.runtime.output import ProtocolOutput
    from source_framework.runtime.read import read_streams
    from source_framework.runtime.secrets import SecretFilter
    from source_framework.runtime.stream_adapters import adapt
    from unit_tests.conftest import CursorStream, EventLog, EventOutput, catalog_of, configured

    class Failing(CursorStream):
        def read_records(self, *args, **kwargs):
            for record in super().read_records(*args, **kwargs):
                if record["n"] == 6:
                    raise RuntimeError("the API went away")
                yield record

    table = IdsTable()

    class Buffers(Destination):
        def open_stream(self, target):
            return StreamBuffer(TableWriter(table, target, SCHEMA), committer)

    stream = Failing([[1, 2], [3, 4], [5, 6]])
    entry = configured(stream.name, "incremental", "append")
    out = EventOutput(EventLog())
    result = read_streams({stream.name: adapt(stream, entry)}, catalog_of(entry), {}, Buffers(),
                          ProtocolOutput(out, SecretFilter(())))
    assert result.failed
    assert [s["stream"]["stream_state"]["n"] for s in out.states] == [2, 4]
    # (the committer may merge the two into one write: each state is recorded either way)
    assert [s for c in table.commits for s in (*c["merged_states"], c["state"])] == [{"n": 2}, {"n": 4}]
    assert sorted(i for ids in table.ids_by_commit for i in ids) == [0, 1, 2, 3]  # not record 5 (id 4), read after it


@pytest.mark.parametrize("master", ["local[*]", "local", "local-cluster[2,1,1024]", "sc://127.0.0.1:15002", "yarn"])
def test_this_process_writes_the_commits_files_whatever_the_master_unless_told_spark(tmp_path, master):
    from source_framework.destinations.spark.destination import SparkDestination

    writes = {}
    for writer in ("auto", "arrow", "spark"):
        destination = SparkDestination(str(tmp_path / writer), default_namespace="demo", master=master, writer=writer)
        try:
            writes[writer] = destination.arrow_writes
            assert destination.table(None, "users").arrow_writes == destination.arrow_writes
        finally:
            destination.close()
    assert writes == {"auto": True, "arrow": True, "spark": False}
    with pytest.raises(ValueError, match="writer must be one of"):
        SparkDestination(str(tmp_path / "x"), default_namespace="demo", master=master, writer="hadoop")


def test_spark_is_started_once_when_streams_synced_at_once_ask_for_it_together(tmp_path):
    """Streams synced at once open their tables in threads of their own, and each may ask for Spark
    (a widened column's rewrite); a second ask while the first was starting the thread failed its
    stream with "threads can only be started once" (found in review)."""
    import threading
    import time

    from source_framework.destinations.spark.destination import SparkDestination

    class SlowToStart(threading.Thread):
        def start(self):
            time.sleep(0.2)  # the moment in which another caller still saw no thread started
            super().start()

    destination = SparkDestination(str(tmp_path), default_namespace="demo")
    destination._starting = SlowToStart(target=lambda: None, daemon=True)  # Spark itself is not the point
    errors = []

    def ask():
        try:
            destination.start_spark()
        except Exception as error:
            errors.append(error)

    askers = [threading.Thread(target=ask) for _ in range(2)]
    for asker in askers:
        asker.start()
    for asker in askers:
        asker.join()
    destination.close()
    assert errors == []


def test_a_token_in_the_spark_connect_url_is_not_shown(tmp_path):
    """``sc://host:15002/;token=...`` is how Spark Connect takes a token, under the config's
    ``spark_master``, which is no secret's name: the run's first log line printed it (found in review)."""
    from source_framework.destinations.spark.destination import SparkDestination

    destination = SparkDestination(str(tmp_path), default_namespace="demo",
                                   master="sc://user:hunter22@spark.internal:15002/;use_ssl=true;token=SUPERSECRETTOKEN123")
    try:
        shown = destination.describe()
    finally:
        destination.close()
    assert "spark.internal:15002" in shown and "use_ssl=true" in shown
    assert "SUPERSECRETTOKEN123" not in shown and "hunter22" not in shown


def test_headers_in_the_spark_connect_url_are_not_shown_and_a_url_spark_refuses_keeps_its_token_hidden(tmp_path):
    """Spark Connect sends every ``;key=value`` of its URL that it does not reserve as a gRPC header:
    custom auth headers (``;x-api-key=...``) were logged in clear. And pyspark's error for a URL it
    cannot parse quotes the token whole (found in review)."""
    from source_framework.destinations.spark.destination import SparkDestination

    shown = SparkDestination(str(tmp_path), default_namespace="demo",
                             master="sc://spark.internal:15002/;x-api-key=HeaderSecret0042;user_id=ann;token=Tok42").describe()
    assert "HeaderSecret0042" not in shown and "Tok42" not in shown
    assert "user_id=ann" in shown and "x-api-key=****" in shown

    connect_mode = os.environ.get("SPARK_CONNECT_MODE_ENABLED")
    refused = SparkDestination(str(tmp_path), default_namespace="demo",
                               master="sc://localhost:15002/;token=U3VwZXJTZWNyZXRUb2tlbjQy==")
    refused.start_spark()
    with pytest.raises(RuntimeError) as error:
        _ = refused.spark
    refused.close()
    shown_error = "".join(traceback.format_exception(error.value))
    assert "Spark did not start" in shown_error and "U3VwZXJTZWNyZXRUb2tlbjQy" not in shown_error
    # pyspark's "this process speaks Spark Connect" is not left behind by a session that never started:
    # the next local session of the process (a test's, a tool's) failed with CONTEXT_UNAVAILABLE_FOR_REMOTE_CLIENT
    assert os.environ.get("SPARK_CONNECT_MODE_ENABLED") == connect_mode


def test_the_table_tells_which_records_read_again_it_holds_row_for_row(tmp_path):
    """``already_in_table``: looked up by key in the committed files (this process's Arrow, no Spark), equal in
    every data column; each row answers for one record; a record changed since is not found."""
    from source_framework.destinations.spark.table import SparkTable

    def no_spark():
        raise AssertionError("already_in_table must not start Spark")

    table = SparkTable(no_spark, str(tmp_path / "numbers"), arrow_writes=True)
    writer = TableWriter(table, target(), SCHEMA)
    writer.apply([job(writer, [1, 2, 3], {"n": 3})])
    assert writer.already_in_table([{"id": 2, "n": 2}, {"id": 2, "n": 2}, {"id": 3, "n": 4}, {"id": 9, "n": 9}, {"id": 1, "n": 1}]) == [
        True, False, False, False, True]  # one row for two copies; an update; a new key
    assert writer.already_in_table([]) == []
    nested = TableWriter(table, StreamTarget("numbers", None, JSON_SCHEMA, incremental=True, destination_sync_mode=APPEND,
                                             primary_key=[["meta", "id"]], cursor_field=["n"]), SCHEMA)
    assert nested.already_in_table([{"id": 1, "n": 1}]) == [False]  # a nested key is not looked up: written again, never dropped
    wider = {"properties": {**JSON_SCHEMA["properties"], "label": {"type": ["null", "string"]}}}
    grown = TableWriter(table, StreamTarget("numbers", None, wider, incremental=True, destination_sync_mode=APPEND,
                                            primary_key=[["id"]], cursor_field=["n"]),
                        arrow_schema(wider), recorded_schema=table.recorded_schema())
    # files written before the column existed read as null there
    assert grown.already_in_table([{"id": 1, "n": 1}, {"id": 2, "n": 2, "label": "new"}]) == [True, False]


def test_append_dedup_rewrites_a_parquet_folder_in_this_process_one_row_per_key_the_latest_cursor(tmp_path, monkeypatch):
    """No Spark for a Parquet folder's ``append_dedup`` (Spark's own rewrite is the reference in
    ``integration_tests/test_delta_merge.py``): staged rows and the commit's merge with the table's, the latest
    cursor wins, a tie goes to the row read last, rows with a null key are all kept."""
    from source_framework.destinations.spark import table_writer
    from source_framework.destinations.spark.arrow_conversion import records_to_arrow
    from source_framework.destinations.spark.table import SparkTable

    def no_spark():
        raise AssertionError("append_dedup into a Parquet folder must not start Spark")

    def rows_of(records, state, stage_only=False):
        data = records_to_arrow(records, SCHEMA, extracted_at_ms=0, sync_id="s", checkpoint=-1)
        return CommitJob(writer, [data], data.num_rows, data.nbytes, state, ResumeNotes(start_state={}), stage_only=stage_only)

    table = SparkTable(no_spark, str(tmp_path / "numbers"), arrow_writes=True)
    writer = TableWriter(table, target(APPEND_DEDUP), SCHEMA)
    assert not writer.needs_spark
    writer.apply([rows_of([{"id": 1, "n": 5}, {"id": 2, "n": 1}, {"id": 3, "n": 1}], {"n": 1})])
    writer.apply([rows_of([{"id": 1, "n": 3}, {"id": 3, "n": 1}], None, stage_only=True)])  # older; a tie
    writer.apply([rows_of([{"id": 2, "n": 2}, {"id": None, "n": 0}, {"id": None, "n": 0}], {"n": 2})])
    landed = table.rows_where(SCHEMA, ["id", "n", "_sf_checkpoint"], None).to_pylist()
    assert sorted(landed, key=repr) == sorted([{"id": 1, "n": 5, "_sf_checkpoint": 0}, {"id": 2, "n": 2, "_sf_checkpoint": 1},
                                               {"id": 3, "n": 1, "_sf_checkpoint": 1}, {"id": None, "n": 0, "_sf_checkpoint": 1},
                                               {"id": None, "n": 0, "_sf_checkpoint": 1}], key=repr)
    assert table.last_checkpoint().state == {"n": 2} and writer.rows == 3 + 5
    wider = {"properties": {**JSON_SCHEMA["properties"], "label": {"type": ["null", "string"]}}}
    grown = TableWriter(table, StreamTarget("numbers", None, wider, incremental=True, destination_sync_mode=APPEND_DEDUP,
                                            primary_key=[["id"]], cursor_field=["n"]),
                        arrow_schema(wider), recorded_schema=table.recorded_schema())
    assert grown.needs_spark  # a first commit adding a column: Spark rewrites the table with it
    monkeypatch.setattr(table_writer, "ARROW_REWRITE_BYTES", table.live_bytes() - 1)
    assert writer.needs_spark  # a table too large to rewrite in memory: Spark merges it


def test_without_a_primary_key_each_row_an_earlier_sync_wrote_answers_for_one_record_read_again(tmp_path):
    """Keyless ``already_in_table``: rows of earlier syncs at the records' cursor values, equal in every data
    column, each answering for one record read again in the whole sync, whichever call asks; rows
    this sync wrote answer for none (one may be a record read once that an identical new one must
    not be taken for)."""
    from source_framework.destinations.spark.arrow_conversion import records_to_arrow
    from source_framework.destinations.spark.table import SparkTable

    def no_spark():
        raise AssertionError("already_in_table must not start Spark")

    def rows_job(writer, records):
        data = records_to_arrow(records, SCHEMA, extracted_at_ms=0, sync_id=writer.sync_id, checkpoint=-1)
        return CommitJob(writer, [data], data.num_rows, data.nbytes, {"n": 9}, ResumeNotes(start_state={}))

    table = SparkTable(no_spark, str(tmp_path / "events"), arrow_writes=True)
    keyless = StreamTarget("events", None, JSON_SCHEMA, incremental=True, destination_sync_mode=APPEND, primary_key=[],
                           cursor_field=["n"])
    earlier = TableWriter(table, keyless, SCHEMA, sync_id="earlier")
    earlier.apply([rows_job(earlier, [{"id": 1, "n": 1}, {"id": 2, "n": 2}, {"id": 2, "n": 2}])])
    writer = TableWriter(table, keyless, SCHEMA, recorded_schema=table.recorded_schema(), sync_id="this")
    assert writer.looks_up_rows
    writer.apply([rows_job(writer, [{"id": 3, "n": 3}])])  # this sync's own row
    assert writer.already_in_table([{"id": 2, "n": 2}, {"id": 1, "n": 1}, {"id": 3, "n": 3}, {"id": 1, "n": 2}]) == [
        True, True, False, False]
    # one of the two identical rows is left for this sync, and no row for a second id 1
    assert writer.already_in_table([{"id": 1, "n": 1}, {"id": 2, "n": 2}, {"id": 2, "n": 2}]) == [False, True, False]
    undeclared_cursor = StreamTarget("events", None, JSON_SCHEMA, incremental=True, destination_sync_mode=APPEND,
                                     primary_key=[], cursor_field=["updated"])
    blind = TableWriter(table, undeclared_cursor, SCHEMA, recorded_schema=table.recorded_schema(), sync_id="this")
    assert not blind.looks_up_rows and blind.already_in_table([{"id": 1, "n": 1}]) == [False]  # no column to look in: written


def test_rows_from_before_a_timestamp_column_became_text_answer_for_records_read_again(tmp_path):
    """A widening rewrote the table's date-times as ISO text with microseconds; a record read again
    carries its own text for the same instant. Where the table's schema says the column was a
    timestamp, the record is looked for in the rewrite's form too (by key, and without a key by
    its cursor); elsewhere text is compared as it is."""
    from source_framework.destinations.spark.arrow_conversion import records_to_arrow
    from source_framework.destinations.spark.table import SparkTable
    from source_framework.destinations.spark.table_schema import WAS_KEY, WAS_TIMESTAMP

    def no_spark():
        raise AssertionError("already_in_table must not start Spark")

    texts = {"properties": {"id": {"type": "integer"}, "at": {"type": "string"}}}
    marked = arrow_schema(texts)
    index = marked.get_field_index("at")
    marked = marked.set(index, marked.field("at").with_metadata({WAS_KEY: WAS_TIMESTAMP}))
    rewritten = [{"id": 1, "at": "2025-01-02T03:04:05.000000Z"}, {"id": 2, "at": "2025-01-02T03:04:05.250000Z"}]
    read_again = [{"id": 1, "at": "2025-01-02T03:04:05Z"}, {"id": 2, "at": "2025-01-02T05:04:05.25+02:00"},
                  {"id": 1, "at": "2025-01-02T03:04:06Z"}, {"id": 3, "at": "not a date"}]
    for name, schema, keys, expected in [
        ("marked", marked, [["id"]], [True, True, False, False]),
        ("marked-keyless", marked, [], [True, True, False, False]),
        ("text", arrow_schema(texts), [["id"]], [False, False, False, False]),  # never a timestamp: as it is
    ]:
        table = SparkTable(no_spark, str(tmp_path / name), arrow_writes=True)
        stream = StreamTarget(name, None, texts, incremental=True, destination_sync_mode=APPEND, primary_key=keys,
                              cursor_field=["at"])
        earlier = TableWriter(table, stream, schema, sync_id="earlier")
        data = records_to_arrow(rewritten, schema, extracted_at_ms=0, sync_id="earlier", checkpoint=-1)
        earlier.apply([CommitJob(earlier, [data], data.num_rows, data.nbytes, {"at": "x"}, ResumeNotes(start_state={}))])
        writer = TableWriter(table, stream, arrow_schema(texts), recorded_schema=table.recorded_schema(), sync_id="this")
        assert writer.already_in_table(read_again) == expected, name
    # the sync that widens the column, before its rewrite: the table's files still hold timestamps
    dates = {"properties": {"id": {"type": "integer"}, "at": {"type": "string", "format": "date-time"}}}
    for keys in ([["id"]], []):
        table = SparkTable(no_spark, str(tmp_path / f"widening-{len(keys)}"), arrow_writes=True)
        stream = StreamTarget("widening", None, dates, incremental=True, destination_sync_mode=APPEND, primary_key=keys,
                              cursor_field=["at"])
        earlier = TableWriter(table, stream, arrow_schema(dates), sync_id="earlier")
        data = records_to_arrow(rewritten, arrow_schema(dates), extracted_at_ms=0, sync_id="earlier", checkpoint=-1)
        earlier.apply([CommitJob(earlier, [data], data.num_rows, data.nbytes, {"at": "x"}, ResumeNotes(start_state={}))])
        widening = TableWriter(table, StreamTarget("widening", None, texts, incremental=True, destination_sync_mode=APPEND,
                                                   primary_key=keys, cursor_field=["at"]),
                               arrow_schema(texts), recorded_schema=table.recorded_schema(), sync_id="this")
        assert widening.schema_change.widened and widening.already_in_table(read_again) == [True, True, False, False], keys


class IdsTable(FakeTable):
    """A fake table that also keeps which record ids each commit published (staged ones included)."""

    def __init__(self) -> None:
        super().__init__()
        self.ids_by_commit: list[list[int]] = []
        self._staged_ids: dict[str, list[int]] = {}

    def stage(self, data: pa.Table) -> StagedFiles:
        staged = super().stage(data)
        self._staged_ids[staged.folder] = data.column("id").to_pylist()
        return staged

    def commit(self, data, state, seq, *, staged=(), **kwargs):
        info = super().commit(data, state, seq, staged=staged, **kwargs)
        self.ids_by_commit.append([i for item in staged for i in self._staged_ids[item.folder]]
                                  + data.column("id").to_pylist())
        return info


STEPS = st.lists(st.one_of(
    st.tuples(st.just("write"), st.integers(1, 12)),
    st.tuples(st.just("checkpoint"), st.just(0)),
    st.tuples(st.just("pause"), st.sampled_from([1, 5, 19, 20, 50, -3_600_000])),  # ms on the buffer's clock
    st.tuples(st.just("wait for"), st.integers(0, 50)),  # the result of an earlier checkpoint
), max_size=60)


@settings(max_examples=150, deadline=None)
@given(steps=STEPS, stage_rows=st.integers(1, 16), ends=st.sampled_from(["finish", "abort"]))
def test_grouped_or_not_every_checkpoint_commits_exactly_the_records_before_it_in_order(steps, stage_rows, ends):
    """Whatever the pace of records and checkpoints: each checkpoint's state is recorded once, in
    order, by the commit that holds every record written before it and none written after the
    last state that commit records; its future says so; after ``finish`` every record is in the
    table once, after ``abort`` exactly those its checkpoints covered."""
    from source_framework.destinations.spark import buffer as buffer_module

    clock = Clock()
    original = buffer_module.time
    buffer_module.time = clock  # type: ignore[assignment]
    committer = BackgroundCommitter(lambda jobs: jobs[0].writer.apply(jobs))
    try:
        table = IdsTable()
        buffer = StreamBuffer(TableWriter(table, target(), SCHEMA), committer, stage_rows=stage_rows)
        written, asked = 0, []  # asked: (state, records written before it, future)
        for step, value in steps:
            if step == "write":
                write_ids(buffer, range(written, written + value))
                written += value
            else:
                pace(buffer, clock, asked, written, step, value)
        end(buffer, asked, written, ends)
    finally:
        committer.close()
        buffer_module.time = original

    assert_each_checkpoint_committed_its_records(table, asked, list(range(written)), ends, in_order=True)


# -- the buffer on the page path --------------------------------------------------------------------


class LocalPageConverter:
    """``PageConverter``'s calls on the converting process's own ``Converter``, in this process, one
    at a time as the pipe delivers them (a fake of the pipe only: ``test_page_conversion.py`` runs
    the real process)."""

    def __init__(self) -> None:
        import threading

        self._converter = None
        self._pages = self._ends = 0
        self.ended_at: list[int | None] = []  # each end's ``at``, as sent
        self._pipe = threading.Lock()  # the reading thread sends, the committer's asks for writes
        self.closed = self.begun = False

    def begin(self, schema, sync_id, records_path, parquet_options, on_type_mismatch="null") -> None:
        from source_framework.destinations.spark import page_conversion_process

        self._converter = page_conversion_process.Converter(schema, sync_id, list(records_path), dict(parquet_options),
                                                            on_type_mismatch)
        self.begun = True

    def page(self, page) -> int:
        with self._pipe:
            self._pages += 1
            self._converter.page(self._pages, page.extracted_at_ms, page.body)
            return self._pages

    def runs(self, runs) -> None:
        with self._pipe:
            self._converter.runs([list(run) for run in runs])

    def drop(self, page_id) -> None:
        with self._pipe:
            self._converter.pages.pop(page_id)

    def end(self, runs=None, at=None) -> int:
        with self._pipe:
            self.ended_at.append(at)
            self._ends += 1
            self._converter.end(self._ends, [list(run) for run in runs or ()], at)
            return self._ends

    def write(self, token, seq, folder):
        from source_framework.destinations.spark.page_conversion import PageWrite

        assert not self.closed, "a job asked a closed converter for its rows"
        with self._pipe:
            answer = self._converter.write(token, seq, folder)
        return PageWrite(answer["rows"], answer["file"], answer["counts"])

    def close(self) -> None:
        self.closed = True


class LocalPool:
    """A ``ConverterPool`` of ``LocalPageConverter``s that remembers which came back."""

    def __init__(self) -> None:
        self.taken: list[LocalPageConverter] = []
        self.given_back: list[LocalPageConverter] = []

    def take(self) -> LocalPageConverter:
        self.taken.append(LocalPageConverter())
        return self.taken[-1]

    def give_back(self, converter: LocalPageConverter) -> None:
        converter.closed = True  # a write after this is a job that came too late
        self.given_back.append(converter)


class PagesTable(IdsTable):
    """An ``IdsTable`` whose staged files may also come from the page converter (real files).
    ``arrow_writes``: the converter may also write a commit's rows as part of the commit
    (``SparkTable.commit(pages=...)``); they are counted with it."""

    takes_page_commits = True  # as a Parquet folder (``SparkTable``) does

    def __init__(self, folder, arrow_writes: bool = False) -> None:
        super().__init__()
        self._folder, self._made = folder, 0
        self.arrow_writes = arrow_writes

    def staging_folder(self) -> str:
        self._made += 1
        return os.path.join(self._folder, f"s-{self._made}")

    def commit(self, data, state, seq, *, staged=(), pages=None, **kwargs):
        import pyarrow.parquet as pq

        if pages is not None:  # the converter's rows up to the token, as a file of their own
            assert self.arrow_writes and data.num_rows == 0
            folder = self.staging_folder()
            written = pages.converter.write(pages.token, seq, folder)
            assert written.rows == pages.rows
            staged = [*staged, StagedFiles(folder, written.rows, files=(written.file,))]
        for item in staged:
            if item.folder not in self._staged_ids:  # written by the converter
                files = [os.path.join(item.folder, name) for name in os.listdir(item.folder)]
                ids = [i for name in files for i in pq.read_table(name).column("id").to_pylist()]
                assert len(ids) == item.rows
                self._staged_ids[item.folder] = ids
        return super().commit(data, state, seq, staged=staged, **kwargs)


def test_page_checkpoints_merged_into_one_commit_are_written_by_the_converter_and_all_expected(tmp_path):
    """Checkpoints of the page path that queued up while a commit ran become one commit: the page
    converter writes the rows of all of them within it, and the commit expects them all."""
    import orjson

    from source_framework.helpers.raw_pages import RawPage

    converter = LocalPageConverter()
    converter.begin(SCHEMA, "s", ["data"], {})
    body = orjson.dumps({"data": [{"id": i, "n": i} for i in range(5)]})
    page = converter.page(RawPage(body, orjson.loads(body)["data"], 0))
    converter.runs([(page, 0, 2)])
    first = converter.end()
    second = converter.end([(page, 2, 5)], 5)  # its runs sent with it, and where it ends
    table = PagesTable(str(tmp_path), arrow_writes=True)
    writer = TableWriter(table, target(), SCHEMA)
    receipts = writer.apply([
        CommitJob(writer, [], 2, 0, {"n": 1}, None, pages=converter, page_token=first, page_rows=2),  # type: ignore[arg-type]
        CommitJob(writer, [], 3, 0, {"n": 4}, None, pages=converter, page_token=second, page_rows=3),  # type: ignore[arg-type]
    ])
    assert table.ids_by_commit == [[0, 1, 2, 3, 4]] and receipts == [CommitReceipt(5, 1)] * 2
    assert table.commits[0]["merged_states"] == [{"n": 1}] and table.commits[0]["state"] == {"n": 4}


def test_checkpoints_grouped_on_the_page_path_tell_the_converter_one_end_each_time_they_are_handed_over(tmp_path, clock):
    """A checkpoint after each of ten records: the first is committed at once, the nine that follow
    it fast are grouped, and the page converter hears of none of them until they are handed over (here
    at the next page, once the first is old); then of one end, the last one's, though a record
    after it was written by then; that record goes with the next commit."""
    from source_framework.helpers.raw_pages import RawPages

    converters, pages = LocalPool(), RawPages(("data",))
    committer = BackgroundCommitter(lambda jobs: jobs[0].writer.apply(jobs))
    try:
        table = PagesTable(str(tmp_path), arrow_writes=True)
        buffer = StreamBuffer(TableWriter(table, target(), SCHEMA), committer, pages=pages, converters=converters)  # type: ignore[arg-type]
        clock.now += 1  # the first checkpoint comes long after the buffer was made
        futures = []
        for item in _page(pages, range(10)):
            buffer.write(item)
            futures.append(buffer.commit({"n": item["id"]}))
            futures[0].result(5)  # (so that the committer does not merge it with the grouped ones)
        ended_at = converters.taken[0].ended_at
        assert ended_at == [1] and not futures[1].done()  # the nine grouped: nothing told yet
        clock.now += TUNING.group_ms / 1000
        second = _page(pages, range(10, 13))
        buffer.write(second[0])  # a new page, the first grouped checkpoint old: they are handed over
        assert ended_at == [1, 10]  # one end, after the tenth row
        assert [f.result(5).rows_through for f in futures] == [1] + [10] * 9
        for item in second[1:]:
            buffer.write(item)
        assert buffer.finish({"n": "final"}).result(5).rows_through == 13
    finally:
        committer.close()
    assert table.ids_by_commit == [[0], list(range(1, 10)), [10, 11, 12]]
    assert table.commits[1]["merged_states"] == [{"n": i} for i in range(1, 9)] and table.commits[1]["state"] == {"n": 9}


def _page(pages, ids):
    """A page of records ``ids``, added to ``pages``: its items, as the stream yields them."""
    import orjson

    body = orjson.dumps({"data": [{"id": i, "n": i} for i in ids]})
    items = orjson.loads(body)["data"]
    pages.add(body, items)
    return items


PAGE_STEPS = st.lists(st.one_of(
    st.tuples(st.just("page"), st.lists(st.booleans(), min_size=1, max_size=6)),  # items, written or skipped
    st.tuples(st.just("write"), st.integers(1, 3)),  # records no page holds (converted here)
    st.tuples(st.just("checkpoint"), st.just(0)),
    st.tuples(st.just("pause"), st.sampled_from([1, 19, 50, -3_600_000])),
    st.tuples(st.just("wait for"), st.integers(0, 50)),
), max_size=50)


@settings(max_examples=150, deadline=None)
@given(steps=PAGE_STEPS, stage_rows=st.integers(1, 16), ends=st.sampled_from(["finish", "abort"]), publishes=st.booleans())
def test_on_the_page_path_every_checkpoint_commits_exactly_the_records_before_it(tmp_path_factory, steps, stage_rows, ends,
                                                                                 publishes):
    """As above, with records that are items of their pages (converted from the pages' bytes by
    the page converter), some items skipped, and records no page holds in between: each state is
    recorded once, in order, by the commit holding every record written before it and none after
    the last state it records; after ``finish`` every record written is in the table once, after
    ``abort`` exactly those its checkpoints covered; the converter goes back after its last job.
    ``publishes``: the table lets the converter write a commit's rows within the commit, which is
    told how many rows to expect (those of every checkpoint the commit merges)."""
    import orjson

    from source_framework.destinations.spark import buffer as buffer_module
    from source_framework.helpers.raw_pages import RawPages

    clock = Clock()
    original = buffer_module.time
    buffer_module.time = clock  # type: ignore[assignment]
    converters = LocalPool()
    committer = BackgroundCommitter(lambda jobs: jobs[0].writer.apply(jobs))
    pages = RawPages(("data",))
    try:
        table = PagesTable(str(tmp_path_factory.mktemp("pages")), arrow_writes=publishes)
        buffer = StreamBuffer(TableWriter(table, target(), SCHEMA), committer, stage_rows=stage_rows, pages=pages,
                              converters=converters)  # type: ignore[arg-type]
        order: list[int] = []  # ids in the order written
        asked = []  # (state, records written before it, future)
        next_id = 0
        for step, value in steps:
            if step == "page":
                body = orjson.dumps({"data": [{"id": next_id + i, "n": next_id + i} for i in range(len(value))]})
                items = orjson.loads(body)["data"]
                pages.add(body, items)
                for item, written in zip(items, value, strict=True):
                    if written:
                        buffer.write(item)
                        order.append(item["id"])
                next_id += len(value)
            elif step == "write":
                for i in range(next_id, next_id + value):
                    buffer.write({"id": i, "n": i})
                    order.append(i)
                next_id += value
            else:
                pace(buffer, clock, asked, len(order), step, value)
        end(buffer, asked, len(order), ends)
    finally:
        committer.close()
        buffer_module.time = original  # type: ignore[assignment]

    assert converters.given_back == converters.taken and not pages.enabled  # after its last job
    # records of pages go in their own file, beside the others: in order within each kind only
    assert_each_checkpoint_committed_its_records(table, asked, order, ends, in_order=False)


def pace(buffer, clock, asked, written, step, value):
    """A step of the property tests other than writing: a checkpoint (``asked`` gets its state,
    the records written before it and its future), a pause on the buffer's clock, or a wait for
    an earlier checkpoint's future, which must cover the records before it."""
    if step == "checkpoint":
        state = {"n": len(asked)}
        asked.append((state, written, buffer.commit(state)))
    elif step == "pause":
        clock.now += value / 1000
    elif asked:
        _, before, future = asked[value % len(asked)]
        assert future.result(5).rows_through >= before


def end(buffer, asked, written, ends):
    """``finish`` (whose receipt counts every record) or ``abort``; then every checkpoint's future
    covers the records before it."""
    if ends == "finish":
        assert buffer.finish({"n": "final"}).result(5).rows_through == written
    else:
        buffer.abort()
    for _, before, future in asked:
        assert future.result(5).rows_through >= before


def assert_each_checkpoint_committed_its_records(table, asked, order, ends, in_order):
    """Each checkpoint's state is recorded once, in order, by the commit that holds every record
    written before it (``order``: ids as written) and none written after the last state that commit
    records; after ``finish`` every record is in the table once, after ``abort`` exactly those its
    checkpoints covered."""
    recorded = [s for commit in table.commits for s in (*commit["merged_states"], commit["state"])]
    expected = [state for state, _, _ in asked]
    covered = asked[-1][1] if asked else 0
    if ends == "finish" and len(order) > covered:  # else nothing is left to commit
        expected.append({"n": "final"})
    assert recorded[: len(expected)] == expected and all(s == {"n": "final"} for s in recorded[len(expected):])
    committed = [i for ids in table.ids_by_commit for i in ids]
    assert committed == sorted(set(committed)) if in_order else len(committed) == len(set(committed))  # none twice
    through = 0
    before_by_state = {str(state): before for state, before, _ in asked}
    for commit, ids in zip(table.commits, table.ids_by_commit, strict=True):
        assert sorted(ids) == sorted(order[through:through + len(ids)])  # the next records written, all of them
        through += len(ids)
        if str(commit["state"]) in before_by_state:  # exactly the records before its last state
            assert through == before_by_state[str(commit["state"])]
    assert through == (len(order) if ends == "finish" else covered)


def test_a_pages_records_are_let_go_once_its_last_item_is_written_and_still_land(tmp_path):
    """The page path keeps a page only while items of it are still to come: once its last item is
    written, the buffer no longer holds it, so the next page is parsed into the memory its records
    freed, not beside them (see ``buffer.NO_PAGE_ITEMS``). The records still land, once each."""
    import gc

    import orjson

    from source_framework.helpers.raw_pages import RawPages

    def page(ids):
        body = orjson.dumps({"data": [{"id": i, "n": i} for i in ids]})
        items = orjson.loads(body)["data"]
        pages.add(body, items)
        return items

    def kept_by_buffer(items):
        return any(referrer is vars(buffer) for referrer in gc.get_referrers(items))

    pages = RawPages(("data",))
    committer = BackgroundCommitter(lambda jobs: jobs[0].writer.apply(jobs))
    table = PagesTable(str(tmp_path))
    try:
        buffer = StreamBuffer(TableWriter(table, target(), SCHEMA), committer, pages=pages,
                              converters=LocalPool())  # type: ignore[arg-type]
        first = page(range(3))
        buffer.write(first[0])
        buffer.write(first[1])
        assert kept_by_buffer(first)  # its next item is expected
        buffer.write(first[2])
        assert not kept_by_buffer(first)
        second = page(range(3, 5))
        buffer.write(second[1])  # its first item skipped (already in the table on a resume)
        assert not kept_by_buffer(second)
        buffer.write({"id": 5, "n": 5})  # no page holds it: converted here
        assert buffer.finish({"n": "final"}).result(5).rows_through == 5
    finally:
        committer.close()
    assert sorted(i for ids in table.ids_by_commit for i in ids) == [0, 1, 2, 4, 5]
