"""``read --max-checkpoints-ahead N`` (config ``max_checkpoints_ahead``): how far reading may run ahead
of its last STATE. Seen as a user would: at each STATE line, the records the destination had been
handed beyond it (what a crash then costs), and the tables and STATEs, which no bound changes.
"""

from __future__ import annotations

import io
import json
import os

import pytest

from integration_tests.conftest import API_KEY, catalog, config_for, read_table, run_in_process, write_json
from source_framework.compare.counters import ReadCounters
from source_framework.compare.probe import CountingDestination
from source_framework.compare.risk import ScheduleTracker
from source_framework.demo.api import DemoApi

INTERVAL = 10  # small, so that reading a checkpoint's records takes less than its commit
RUN_COLUMNS = {"_sf_extracted_at", "_sf_sync_id", "_sf_checkpoint"}  # differ from run to run


class StateWatch(io.BytesIO):
    """The read's stdout: at each STATE line, the records read and checkpoints asked so far (the
    compare tool's counters and tracker, sampled in the reading thread as it prints the line)."""

    def __init__(self, counters: ReadCounters) -> None:
        super().__init__()
        self.counters, self.tracker = counters, ScheduleTracker()

    def write(self, data) -> int:  # type: ignore[override]
        for line in bytes(data).splitlines():
            message = json.loads(line) if line.strip() else {}
            if message.get("type") == "STATE":
                state = message["state"]
                self.tracker.on_state(state["stream"]["stream_descriptor"]["name"], state,
                                      state["sourceStats"]["recordCount"], reads=self.counters.snapshot(),
                                      asked=self.counters.checkpoints_asked())
        return super().write(data)


def watched_read(tmp_path, api, label, *flags, **config_keys):
    """``main.py read`` of the users stream in this process; returns its exit code, its STATE
    lines, the tracker and the warehouse."""
    from source_framework.demo.source import DemoSource
    from source_framework.runtime.entrypoint import build_parser, run_read

    warehouse = tmp_path / f"warehouse-{label}"
    config = write_json(tmp_path / f"config-{label}.json",
                        config_for(api, warehouse, state_checkpoint_interval=INTERVAL, **config_keys))
    catalog_path = write_json(tmp_path / "catalog.json", catalog("users"))
    counters = ReadCounters.create(str(tmp_path / f"{label}.counters"), ["users"])
    watch = StateWatch(counters)
    parsed = build_parser().parse_args(["read", "--config", config, "--catalog", catalog_path, "--quiet", *flags])
    code = run_read(DemoSource(), parsed, protocol_out=watch,
                    wrap_destination=lambda inner: CountingDestination(inner, counters))
    lines = [json.loads(line) for line in watch.getvalue().splitlines() if line.strip()]
    states = [(m["state"]["stream"]["stream_state"], m["state"]["sourceStats"]["recordCount"])
              for m in lines if m["type"] == "STATE"]
    counters.close()
    return code, states, watch.tracker, warehouse


def table_rows(spark, warehouse):
    frame = read_table(spark, os.path.join(str(warehouse), "demo", "users"))
    columns = sorted(c for c in frame.columns if c not in RUN_COLUMNS)
    return sorted(json.dumps(row.asDict(), sort_keys=True, default=str) for row in frame.select(*columns).collect())


@pytest.mark.slow  # three syncs of over 100 checkpoints each
def test_at_most_one_checkpoint_ahead_costs_a_crash_at_most_two_intervals_and_changes_no_row(spark, tmp_path):
    with DemoApi(records=3000, api_key=API_KEY, seed=31).start() as api:
        code, states, default, warehouse = watched_read(tmp_path, api, "default")
        assert code == 0
        code_one, states_one, one, warehouse_one = watched_read(tmp_path, api, "one", "--max-checkpoints-ahead", "1")
        assert code_one == 0
        code_key, states_key, by_key, _ = watched_read(tmp_path, api, "key", max_checkpoints_ahead=1)
        assert code_key == 0
    assert len(states) > 100  # a checkpoint every INTERVAL records
    # The default lets reading outrun the commits of an API that answers at once...
    assert default.max_checkpoints_ahead > 2, default.max_checkpoints_ahead
    # ...at 1, no STATE line found more than one checkpoint asked beyond it: what was read and not
    # covered never reached two intervals' records (one checkpoint committing, the next being read).
    largest = max(count for _, count in states)  # INTERVAL, or more where cursor values tie
    for tracker in (one, by_key):
        assert tracker.max_checkpoints_ahead == 1
        assert tracker.max_at_risk <= 2 * largest, (tracker.max_at_risk, largest)
    assert states_one == states_key == states
    assert table_rows(spark, warehouse_one) == table_rows(spark, warehouse)


@pytest.mark.parametrize("value", ["0", "x", "-1", "1.5"])
def test_a_bad_bound_on_the_command_line_is_refused_before_anything_runs(tmp_path, capsys, value):
    with pytest.raises(SystemExit) as stopped:
        run_in_process("read", "--config", "c.json", "--catalog", "k.json", "--max-checkpoints-ahead", value)
    assert stopped.value.code == 2
    assert "--max-checkpoints-ahead" in capsys.readouterr().err


@pytest.mark.parametrize("value", [0, "x", True, 2.5])
def test_a_bad_bound_in_the_config_names_the_file_and_writes_nothing(demo_api, tmp_path, value):
    warehouse = tmp_path / "w"
    config = write_json(tmp_path / "config.json", config_for(demo_api, warehouse, max_checkpoints_ahead=value))
    run = run_in_process("read", "--config", config, "--catalog", write_json(tmp_path / "k.json", catalog("users")))
    assert run.returncode == 2
    errors = [m["trace"]["error"] for m in run.of_type("TRACE") if m["trace"]["type"] == "ERROR"]
    assert errors and errors[0]["failure_type"] == "config_error"
    assert str(config) in errors[0]["message"] and "max_checkpoints_ahead" in errors[0]["message"]
    assert "whole number of 1 or more" in errors[0]["message"]
    assert not run.of_type("RECORD") and not run.of_type("STATE") and not warehouse.exists()


def test_the_flag_wins_over_the_config(demo_api, tmp_path):
    """A bad config value is not looked at when the flag gives the bound."""
    warehouse = tmp_path / "w"
    config = write_json(tmp_path / "config.json", config_for(demo_api, warehouse, max_checkpoints_ahead=0))
    run = run_in_process("read", "--config", config, "--catalog", write_json(tmp_path / "k.json", catalog("users")),
                         "--max-checkpoints-ahead", "2", "--destination", "stdout")
    assert run.returncode == 0, run.stderr[-2000:]
    assert run.of_type("RECORD") and run.of_type("STATE")
