"""compare-checkpoints: crash-proof record counters and the probe's counting destination."""

import multiprocessing
import os
import signal
import time

import pytest

from source_framework.compare.counters import ReadCounters
from source_framework.compare.probe import CountingDestination
from source_framework.compare.runner import RunResult, first_commit_seconds
from source_framework.destinations.base import CommitReceipt, StreamTarget
from unit_tests.conftest import RecordingDestination


def test_counts_written_by_one_mapping_are_read_by_another(tmp_path):
    path = str(tmp_path / "c")
    parent = ReadCounters.create(path, ["users", "orders"])
    child = ReadCounters.open(path, ["users", "orders"])
    for _ in range(5):
        child.add(child.slot("orders"))
    child.add(child.slot("users"), 3)
    child.add(child.slot("unknown"))  # not announced: ignored
    assert parent.snapshot() == {"users": 3, "orders": 5}
    assert parent.total() == 8 and parent.read("nope") == 0
    child.close()
    parent.close()


def test_the_first_checkpoint_asked_is_noted_once(tmp_path):
    path = str(tmp_path / "c")
    parent = ReadCounters.create(path, ["orders"])
    child = ReadCounters.open(path, ["orders"])
    assert parent.first_checkpoint_at() is None
    before = time.time()
    child.mark_first_checkpoint()
    first = parent.first_checkpoint_at()
    assert first is not None and before - 0.001 <= first <= time.time() + 0.001
    child.add(0, 5)
    child.mark_first_checkpoint()  # later checkpoints leave the first one's time
    assert parent.first_checkpoint_at() == first and parent.read("orders") == 5


def _count_then_die(path):
    counters = ReadCounters.open(path, ["orders"])
    for _ in range(1234):
        counters.add(0)
    os.kill(os.getpid(), signal.SIGKILL)


def test_counts_survive_a_sigkill_of_the_writer(tmp_path):
    path = str(tmp_path / "c")
    counters = ReadCounters.create(path, ["orders"])
    process = multiprocessing.get_context("fork").Process(target=_count_then_die, args=(path,))
    process.start()
    process.join(10)
    assert process.exitcode == -signal.SIGKILL
    assert counters.read("orders") == 1234


def test_the_counting_destination_passes_everything_through_and_counts_writes(tmp_path):
    counters = ReadCounters.create(str(tmp_path / "c"), ["users"])
    inner = RecordingDestination()
    inner.spark = "the session"
    destination = CountingDestination(inner, counters)
    sink = destination.open_stream(StreamTarget(name="users", namespace=None, json_schema={}, incremental=True))
    for i in range(3):
        sink.write({"id": i})
    assert counters.first_checkpoint_at() is None
    assert sink.commit({"c": 1}, {"n": 1}).result() == CommitReceipt(rows_through=3, writes=1)  # the inner sink's
    assert counters.first_checkpoint_at() is not None
    assert sink.finish({"c": 1}, notes={"n": 2}).result() == CommitReceipt(rows_through=3, writes=1)
    destination.close()
    assert inner.sinks["users"].landed == [{"id": 0}, {"id": 1}, {"id": 2}]
    assert inner.sinks["users"].calls == [("commit", {"c": 1}, {"n": 1}), ("finish", {"c": 1}, {"n": 2})]
    assert inner.closed and destination.spark == "the session"
    assert counters.read("users") == 3


def test_the_first_commit_is_timed_to_its_own_streams_state(tmp_path):
    """A one-slice stream checkpoints only when it finishes, and its STATE pairs with its own
    checkpoint: "first commit s" paired one stream's STATE with another's checkpoint (clamped to 0)."""
    counters = ReadCounters.create(str(tmp_path / "c"), ["stores", "users"])
    destination = CountingDestination(RecordingDestination(), counters)
    stores = destination.open_stream(StreamTarget(name="stores", namespace=None, json_schema={}, incremental=False))
    users = destination.open_stream(StreamTarget(name="users", namespace=None, json_schema={}, incremental=True))
    stores.write({"id": 1})
    stores.finish({"c": 1}, notes={})  # its only checkpoint
    asked = counters.first_checkpoint_at()
    assert asked is not None and counters.first_checkpoint_stream() == "stores"
    users.commit({"c": 2}, {})
    assert counters.first_checkpoint_at() == asked and counters.first_checkpoint_stream() == "stores"

    run = RunResult(name="clean", returncode=0, killed=False, seconds=1.0, records=1, states=2,
                    repeated_states=0, max_at_risk=1, at_risk_at_end=0,
                    first_state_wall=asked + 0.5, first_state_walls={"users": asked + 0.5, "stores": asked + 2.0})
    assert first_commit_seconds(counters, run) == pytest.approx(2.0, abs=0.001)
    counters.close()


def test_a_first_checkpoint_of_a_stream_nobody_counts_pairs_with_the_first_state(tmp_path):
    counters = ReadCounters.create(str(tmp_path / "c"), [])  # the benchmark's way: no stream counted
    destination = CountingDestination(RecordingDestination(), counters)
    sink = destination.open_stream(StreamTarget(name="users", namespace=None, json_schema={}, incremental=True))
    sink.commit({"c": 1}, {})
    asked = counters.first_checkpoint_at()
    assert asked is not None and counters.first_checkpoint_stream() is None
    run = RunResult(name="b", returncode=0, killed=False, seconds=1.0, records=0, states=1,
                    repeated_states=0, max_at_risk=0, at_risk_at_end=0, first_state_wall=asked + 0.25)
    assert first_commit_seconds(counters, run) == pytest.approx(0.25, abs=0.001)
    counters.close()


def test_the_counting_sink_answers_for_earlier_commits_and_kept_values_as_the_sink_it_wraps(tmp_path):
    """Under compare-checkpoints the probe wraps each sink: a resume from a state whose record was
    reclaimed (``passed_before``) and the summary's undeclared and mismatched fields must come from
    the wrapped sink, not from the base class's defaults (they did: nothing passed, nothing counted)."""
    from source_framework.destinations.base import EarlierCommits, ValuesNotKept
    from unit_tests.conftest import RecordingSink

    class Passed(EarlierCommits):
        def passed_before(self, state):
            return state == {"c": 1}

    kept = ValuesNotKept(undeclared_fields={"extra": 2}, records_with_undeclared_fields=2,
                         mismatched_values={"n": (1, "not a number")})

    class Inner(RecordingDestination):
        def open_stream(self, target):
            sink = super().open_stream(target)
            assert isinstance(sink, RecordingSink)
            sink.earlier_commits = Passed()
            sink.values_not_kept = lambda: kept  # type: ignore[method-assign]
            return sink

    counters = ReadCounters.create(str(tmp_path / "c"), ["users"])
    sink = CountingDestination(Inner(), counters).open_stream(
        StreamTarget(name="users", namespace=None, json_schema={}, incremental=True))
    assert sink.earlier_commits.passed_before({"c": 1}) and not sink.earlier_commits.passed_before({"c": 2})
    assert sink.values_not_kept() == kept
    counters.close()
