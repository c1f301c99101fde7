"""``crash_at``: a simulated kill stops everything after it, as SIGKILL would (issue 11, item 5)."""

from __future__ import annotations

import threading

import pytest

from source_framework.helpers.faults import SimulatedCrash, crash_at, fault_point


def test_the_nth_time_a_point_is_reached_it_raises():
    with crash_at("commit.done", 2):
        fault_point("commit.done")
        fault_point("state.printed")
        with pytest.raises(SimulatedCrash, match="commit.done:2"):
            fault_point("commit.done")


def test_after_the_crash_every_point_in_every_thread_raises_as_nothing_runs_on_after_a_kill():
    """A commit still queued reaches ``commit.start`` on the committer's thread: it must die there,
    with nothing written, not finish as it did when only the crashing thread stopped."""
    outcomes = []

    def queued_commit():
        try:
            fault_point("commit.start")
            outcomes.append("committed")
        except SimulatedCrash:
            outcomes.append("abandoned")

    with crash_at("state.printed"):
        with pytest.raises(SimulatedCrash):
            fault_point("state.printed")
        worker = threading.Thread(target=queued_commit)
        worker.start()
        worker.join()
    assert outcomes == ["abandoned"]
    fault_point("commit.start")  # the next "process" runs normally


def test_a_point_calls_before_only_when_it_stops_the_process():
    """``state.printed`` flushes stdout through ``before`` when it stops there, so a kill at that
    point finds the STATE line out (lines are otherwise flushed after a run of them)."""
    calls = []
    with crash_at("state.printed", 2):
        fault_point("state.printed", before=lambda: calls.append("flushed"))
        assert calls == []
        with pytest.raises(SimulatedCrash):
            fault_point("state.printed", before=lambda: calls.append("flushed"))
    assert calls == ["flushed"]
