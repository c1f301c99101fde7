"""compare-checkpoints: what the report says when the interval did not matter, and why.

- a connector that fixes its streams' interval gives the same STATEs at every setting: say so;
- against an API that answers at once, reading runs many checkpoints ahead of its last STATE and
  that read-ahead, not the interval, sets the records at risk: say how far, and what a crash cost;
- records/s counts from the first record read, not from the process's start.
"""

import io
import time

import orjson
import pytest

from source_framework.compare.commits import CommitStats
from source_framework.compare.counters import ReadCounters
from source_framework.compare.experiment import CrashResult, SettingResult
from source_framework.compare.plot import chart_notes
from source_framework.compare.probe import CountingDestination
from source_framework.compare.report import RUN_COLUMNS, Report, interval_warnings, read_ahead_notes
from source_framework.compare.risk import ScheduleTracker
from source_framework.compare.runner import RunResult, _follow
from source_framework.compare.settings import Setting
from source_framework.compare.table_diff import Diff
from source_framework.destinations.base import StreamTarget
from unit_tests.conftest import RecordingDestination


def run(records, states_by_stream, at_risk=0, ahead=None, seconds=10.0, reading=None, reads=None):
    return RunResult(
        name="clean", returncode=0, killed=False, seconds=seconds, records=records,
        states=sum(states_by_stream.values()), repeated_states=0, max_at_risk=at_risk, at_risk_at_end=0,
        reads=reads or {}, states_by_stream=dict(states_by_stream),
        max_checkpoints_ahead=ahead, reading_seconds=reading,
    )


def setting(interval, states_by_stream, intervals=None, concurrency=None, reads=None, **kwargs):
    reads = reads or {"users": 2000, "orders": 2000}
    result = SettingResult(Setting(interval, concurrency), run(sum(reads.values()), states_by_stream, reads=reads, **kwargs),
                           CommitStats(1, 1, sum(reads.values())))
    result.stream_intervals = dict(intervals or {})
    return result


# --- 1. the setting changed nothing ---------------------------------------------------------------


def test_identical_state_counts_at_different_intervals_are_a_warning_naming_the_streams():
    results = [setting(None, {"users": 3, "orders": 40}), setting(1000, {"users": 3, "orders": 41}),
               setting(100, {"users": 3, "orders": 60})]
    warnings = interval_warnings(results)
    assert len(warnings) == 1
    assert "users" in warnings[0] and "orders" not in warnings[0]
    assert "none, 1000, 100" in warnings[0] and "changed nothing" in warnings[0]
    report = Report(results, ["users", "orders"], None)
    assert warnings[0] in report.text() and warnings[0] in report.markdown()
    assert report.to_json()["warnings"] == warnings
    assert any("users" in note for note in chart_notes(results))


def test_a_stream_whose_interval_did_not_follow_the_setting_is_named():
    """The connector set the interval in its class: the adapters said 5000 at every setting."""
    results = [setting(None, {"users": 3}, {"users": 5000}, reads={"users": 2000}),
               setting(100, {"users": 3}, {"users": 5000}, reads={"users": 2000})]
    (warning,) = interval_warnings(results)
    assert "users" in warning and "5000" in warning and "state_checkpoint_interval" in warning


def test_no_warning_when_the_interval_mattered_or_could_not():
    followed = [setting(None, {"users": 3}, {"users": None}), setting(100, {"users": 23}, {"users": 100})]
    assert interval_warnings(followed) == []
    # 50 records: no interval compared could add a STATE inside a slice, so equal counts say nothing
    small = [setting(None, {"users": 1}, reads={"users": 50}), setting(100, {"users": 1}, reads={"users": 50})]
    assert interval_warnings(small) == []
    # 40 slices of 50 records: interval 100 cannot split them either
    windows = [setting(None, {"orders": 40}, reads={"orders": 2000}), setting(100, {"orders": 40}, reads={"orders": 2000})]
    assert interval_warnings(windows) == []
    # one interval per concurrency level: nothing to compare
    levels = [setting(100, {"users": 3}, concurrency=1), setting(100, {"users": 3}, concurrency=4)]
    assert interval_warnings(levels) == []


# --- 2. read-ahead, not the interval ----------------------------------------------------------------


def fast_api_results():
    thousand = setting(1000, {"orders": 4}, at_risk=3800, ahead=3, reads={"orders": 4000})
    hundred = setting(100, {"orders": 40}, at_risk=3700, ahead=36, reads={"orders": 4000})
    hundred.crash = CrashResult(2000, run(2000, {"orders": 2}, ahead=18), run(3900, {"orders": 38}),
                                read_again=1900, diff=Diff(4000, 4000, 0, 0))
    return [thousand, hundred]


def test_the_report_says_how_far_reading_ran_ahead_and_what_the_crash_cost():
    results = fast_api_results()
    report = Report(results, ["orders"], 0.5)
    assert "ckpts ahead" in RUN_COLUMNS
    ours_100 = next(line for line in report.text().splitlines() if line.startswith("100 ") and " ours " in line)
    assert ours_100.split()[-2:] == ["3,700", "36"]
    notes = read_ahead_notes(results)
    hundred = next(note for note in notes if note.startswith("100:"))
    assert "36 checkpoints" in hundred and "3,700 records" in hundred and "1,900 records read again" in hundred
    assert "not the interval" in hundred
    for note in notes:
        assert note in report.text() and note in report.markdown()
    data = report.to_json()
    assert data["settings"][1]["ours"]["max_checkpoints_ahead"] == 36
    assert data["read_ahead"] == notes
    assert any("36" in note for note in chart_notes(results))


def test_no_read_ahead_explanation_when_commits_kept_up():
    results = [setting(1000, {"orders": 4}, at_risk=1000, ahead=0, reads={"orders": 4000}),
               setting(100, {"orders": 40}, at_risk=100, ahead=1, reads={"orders": 4000})]
    assert not any("not the interval" in note for note in read_ahead_notes(results))


def test_checkpoints_ahead_are_counted_when_each_state_arrives():
    tracker = ScheduleTracker()
    state = {"type": "STREAM", "stream": {"stream_descriptor": {"name": "orders"}, "stream_state": {"u": 1}},
             "sourceStats": {"recordCount": 100.0}}
    # the probe had 7 checkpoints asked when the first STATE arrived: 6 still wait for theirs
    tracker.on_state("orders", state, 100, reads={"orders": 700}, asked={"orders": 7})
    tracker.on_state("orders", state, 100, reads={"orders": 800}, asked={"orders": 8})
    assert tracker.max_checkpoints_ahead == 6 and tracker.states_by_stream == {"orders": 2}


def test_the_probe_counts_checkpoints_asked_per_stream(tmp_path):
    counters = ReadCounters.create(str(tmp_path / "c"), ["users", "orders"])
    destination = CountingDestination(RecordingDestination(), counters)
    sink = destination.open_stream(StreamTarget(name="orders", namespace=None, json_schema={}, incremental=True))
    for i in range(3):
        sink.write({"id": i})
        sink.commit({"c": i}, {})
    assert counters.checkpoints_asked() == {"users": 0, "orders": 3}
    counters.close()


def test_the_runner_passes_checkpoints_asked_to_the_tracker():
    line = {"type": "STATE", "state": {"type": "STREAM", "stream": {"stream_descriptor": {"name": "orders"},
                                                                     "stream_state": {"u": 1}},
                                       "sourceStats": {"recordCount": 100.0}}}
    tracker = ScheduleTracker()
    _follow(io.BytesIO(orjson.dumps(line) + b"\n"), tracker, lambda: {"orders": 500}, lambda: {"orders": 5})
    assert tracker.max_checkpoints_ahead == 4


# --- 3. records/s from the first record ---------------------------------------------------------------


def test_records_per_second_count_from_the_first_record():
    slow_start = run(1000, {"orders": 1}, seconds=10.0, reading=2.0)
    assert slow_start.records_per_second == 500.0
    assert run(1000, {"orders": 1}, seconds=10.0).records_per_second == 100.0  # not known: the whole run
    data = Report([SettingResult(Setting(None), slow_start, CommitStats(1, 1, 1000))], ["orders"], None).to_json()
    assert data["settings"][0]["ours"]["reading_seconds"] == 2.0


def test_the_first_record_is_noted_once_by_the_probe(tmp_path):
    counters = ReadCounters.create(str(tmp_path / "c"), ["orders"])
    destination = CountingDestination(RecordingDestination(), counters)
    sink = destination.open_stream(StreamTarget(name="orders", namespace=None, json_schema={}, incremental=True))
    assert counters.first_record_at() is None
    before = time.time()
    sink.write({"id": 1})
    first = counters.first_record_at()
    assert first is not None and before - 0.001 <= first <= time.time() + 0.001
    time.sleep(0.01)
    sink.write({"id": 2})
    assert counters.first_record_at() == first and counters.read("orders") == 2
    counters.close()


def test_the_cdks_first_record_line_is_timed():
    tracker = ScheduleTracker()
    before = time.time()
    tracker.on_record("users")
    first = tracker.first_record_wall
    assert first is not None and first >= before - 0.001
    tracker.on_record("users")
    assert tracker.first_record_wall == first


@pytest.mark.parametrize("name", ["clean"])
def test_run_result_fields_default_to_unknown(name):
    result = RunResult(name, 0, False, 1.0, 10, 1, 0, 0, 0)
    assert result.max_checkpoints_ahead is None and result.reading_seconds is None and result.states_by_stream == {}


def test_the_checks_before_the_syncs_note_each_streams_interval_per_setting():
    """What ``read`` builds under each setting's config: the demo's orders follow the config key,
    a users stream that fixes its interval in the connector does not."""
    import argparse

    from source_framework.compare.command import checked_tables
    from source_framework.demo.source import DemoSource
    from unit_tests.conftest import catalog_of, configured

    class FixedUsers(DemoSource):
        def streams(self, config):
            streams = super().streams(config)
            streams[0].state_checkpoint_interval = 5000  # ignores the config, as the misled user's did
            return streams

    parsed = argparse.Namespace(config="config.json", catalog="catalog.json")
    config = {"api_key": "k" * 12, "api_url": "http://127.0.0.1:9", "start_date": "2025-01-01T00:00:00Z"}
    tables = checked_tables(FixedUsers(), config, catalog_of(configured("users"), configured("orders")),
                            [Setting(None), Setting(100)], parsed)
    intervals = {table.name: table.intervals for table in tables}
    assert intervals == {"users": {"none": 5000, "100": 5000}, "orders": {"none": None, "100": 100}}
