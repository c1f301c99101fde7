"""compare-checkpoints: STATEs, repeated STATEs and records at risk, from a run's messages."""

import io

import orjson
import pytest

from source_framework.compare.experiment import RunFailed, _completed
from source_framework.compare.risk import ScheduleTracker
from source_framework.compare.runner import RunResult, _follow


def state(stream, value, count):
    return {
        "type": "STREAM",
        "stream": {"stream_descriptor": {"name": stream}, "stream_state": {"updatedAt": value}},
        "sourceStats": {"recordCount": float(count)},
    }


def test_records_at_risk_are_sampled_when_each_state_arrives():
    tracker = ScheduleTracker()
    # 1,040 read when the STATE covering 1,000 arrives: 1,040 were at risk just before it
    tracker.on_state("users", state("users", "a", 1000), 1000, reads={"users": 1040})
    assert tracker.max_at_risk == 1040
    tracker.on_state("users", state("users", "b", 1000), 1000, reads={"users": 2300})
    assert tracker.max_at_risk == 1300
    assert tracker.at_risk({"users": 2300}) == 300
    tracker.on_complete("users", reads={"users": 2300})
    assert tracker.at_risk({"users": 2300}) == 0
    assert tracker.states == 2 and sum(tracker.covered.values()) == 2300
    assert tracker.last_states["users"]["stream"]["stream_state"] == {"updatedAt": "b"}


def test_full_refresh_streams_are_covered_by_their_complete_status():
    tracker = ScheduleTracker()
    tracker.on_complete("products", reads={"products": 500})
    assert tracker.max_at_risk == 500 and tracker.states == 0
    assert tracker.at_risk({"products": 500}) == 0


def test_a_state_equal_to_the_streams_previous_one_counts_as_repeated():
    tracker = ScheduleTracker()
    for stream, value in [("users", "a"), ("users", "a"), ("orders", "a"), ("users", "b"), ("users", "b")]:
        tracker.on_state(stream, state(stream, value, 0), 0, reads={})
    assert tracker.states == 5 and tracker.repeated_states == 2


def test_the_cdks_record_lines_are_the_read_count():
    lines = [
        {"type": "LOG", "log": {"level": "INFO", "message": "x"}},
        *({"type": "RECORD", "record": {"stream": "users", "data": {"id": i}, "emitted_at": 1}} for i in range(3)),
        {"type": "STATE", "state": state("users", "a", 3)},
        {"type": "RECORD", "record": {"namespace": "n", "stream": "users", "data": {"id": 3}, "emitted_at": 1}},
        {"type": "STATE", "state": state("users", "b", 1)},
        {"type": "STATE", "state": state("users", "b", 0)},
        {"type": "TRACE", "trace": {"type": "STREAM_STATUS",
                                    "stream_status": {"stream_descriptor": {"name": "users"}, "status": "COMPLETE"}}},
    ]
    stdout = io.BytesIO(b"".join(orjson.dumps(m) + b"\n" for m in lines) + b"not json\n")
    tracker = ScheduleTracker()
    _follow(stdout, tracker, None)
    assert tracker.record_lines == {"users": 4}
    assert tracker.states == 3 and tracker.repeated_states == 1
    assert tracker.max_at_risk == 3 and tracker.at_risk() == 0


def test_our_runs_read_counts_come_from_the_probe():
    counts = {"orders": 0}
    stdout = io.BytesIO(orjson.dumps({"type": "STATE", "state": state("orders", "a", 100)}) + b"\n")
    counts["orders"] = 180  # the child read on while the commit ran
    tracker = ScheduleTracker()
    _follow(stdout, tracker, lambda: dict(counts))
    assert tracker.max_at_risk == 180 and tracker.at_risk(counts) == 80


def test_a_failed_runs_reason_is_taken_from_its_trace_error_on_stdout(tmp_path):
    """airbyte-cdk reports a failure on stdout; the tool showed only the (empty) end of stderr."""
    stdout = io.BytesIO(b"\n".join([
        b'{"type":"LOG","log":{"level":"INFO","message":"Starting syncing"}}',
        b'{"type":"TRACE","trace":{"type":"ERROR","emitted_at":1,"error":{"message":"this source cannot be read",'
        b'"failure_type":"system_error"}}}',
    ]))
    tracker = ScheduleTracker()
    _follow(stdout, tracker, None)
    assert tracker.errors == ["this source cannot be read"]
    stderr = tmp_path / "cdk.stderr.log"
    stderr.write_text("")
    run = RunResult(name="cdk", returncode=1, killed=False, seconds=1.0, records=0, states=0, repeated_states=0,
                    max_at_risk=0, at_risk_at_end=0, errors=tracker.errors, stderr_path=str(stderr))
    with pytest.raises(RunFailed, match="(?s)'cdk' run exited with code 1; it reported:\n  this source cannot be read"):
        _completed(run)
