"""compare-checkpoints: the text and Markdown tables, the JSON and the chart, from known results."""

import json

from source_framework.compare.commits import CommitStats
from source_framework.compare.experiment import CrashResult, SettingResult
from source_framework.compare.plot import chart_series, plot_comparison
from source_framework.compare.report import CRASH_COLUMNS, RUN_COLUMNS, Report
from source_framework.compare.runner import RunResult
from source_framework.compare.settings import Setting
from source_framework.compare.table_diff import Diff


def run(name, records, states, seconds, at_risk, killed=False, repeated=0, first_state=None, first_commit=None):
    return RunResult(name, None if killed else 0, killed, seconds, records, states, repeated, at_risk,
                     at_risk if killed else 0, first_state_seconds=first_state,
                     first_commit_seconds=first_commit)


def results():
    none = SettingResult(Setting(None), run("clean", 20000, 13, 4.0, 9000, first_state=2.25, first_commit=0.314), CommitStats(5, 5, 20000),
                         cdk=run("cdk", 20000, 20, 1.0, 1700, repeated=6))
    none.crash = CrashResult(10000, run("crash", 10400, 5, 2.0, 2400, killed=True), run("resume", 12000, 9, 3.0, 3000),
                             read_again=2400, diff=Diff(20000, 20000, 0, 0))
    hundred = SettingResult(Setting(100), run("clean", 20000, 213, 8.0, 450), CommitStats(60, 61, 20000),
                            cdk=run("cdk", 20000, 220, 1.1, 100, repeated=6))
    return [none, hundred]


def test_text_has_a_row_per_run_and_per_crash_with_aligned_columns():
    text = Report(results(), ["orders"], 0.5).text()
    lines = text.splitlines()
    assert lines[0] == (
        "Checkpoint intervals: 20,000 records per sync in 1 stream(s) (orders); crash injected after 50% of the records were read"
    )
    header = next(line for line in lines if line.startswith("interval  run"))
    assert all(column in header for column in RUN_COLUMNS)
    ours_none = next(line for line in lines if line.startswith("none") and " ours " in line)
    assert ours_none.split()[2:] == ["13", "0", "5", "5", "4.0", "2.2", "0.31", "5,000", "9,000", "-"]
    cdk_100 = next(line for line in lines if line.startswith("100") and "airbyte-cdk read" in line)
    assert cdk_100.split()[3:] == ["220", "6", "-", "-", "1.1", "-", "-", "18,182", "100", "-"]
    crash = next(line for line in lines[lines.index("Crash and resume"):] if line.startswith("none"))
    assert crash.split() == ["none", "10,400", "5", "2,400", "2,400", "3.0", "20,000", "0", "0"]
    widths = {len(line) for line in lines[lines.index("Runs") + 1: lines.index("Runs") + 7]}
    assert len(widths) == 1  # every line of the table is as wide as its header


def test_markdown_tables():
    markdown = Report(results(), ["orders"], 0.5).markdown()
    assert "| " + " | ".join(RUN_COLUMNS) + " |" in markdown
    assert "| " + " | ".join(CRASH_COLUMNS) + " |" in markdown
    assert "| none | ours | 13 | 0 | 5 | 5 | 4.0 | 2.2 | 0.31 | 5,000 | 9,000 | - |" in markdown
    assert "| 100 | airbyte-cdk read | 220 | 6 | - | - | 1.1 | - | - | 18,182 | 100 | - |" in markdown


def test_json_holds_every_measure():
    data = json.loads(json.dumps(Report(results(), ["orders"], 0.5).to_json()))
    none, hundred = data["settings"]
    assert none["interval"] is None and hundred["interval"] == 100
    assert none["ours"]["spark_commits"] == 5 and hundred["ours"]["data_files"] == 61
    assert none["ours"]["records_per_second"] == 5000.0 and none["ours"]["max_records_at_risk"] == 9000
    assert none["ours"]["first_commit_seconds"] == 0.314 and none["airbyte_cdk"]["first_commit_seconds"] is None
    assert none["airbyte_cdk"]["repeated_states"] == 6
    assert none["crash"]["records_read_again"] == 2400 and none["crash"]["records_at_risk_at_kill"] == 2400
    assert none["crash"]["final_table"] == {"rows": 20000, "reference_rows": 20000, "duplicates": 0, "missing": 0}
    assert hundred["crash"] is None


def test_the_chart_is_a_png(tmp_path):
    path = plot_comparison(results(), str(tmp_path / "chart.png"), title="orders")
    with open(path, "rb") as handle:
        assert handle.read(8) == b"\x89PNG\r\n\x1a\n"


def test_each_concurrency_level_is_its_own_line_over_the_intervals():
    """--concurrency 1,4: the chart joined all four settings into one line over four ticks, and the
    JSON did not say which level a setting ran at."""
    settings = [Setting(None, 1), Setting(None, 4), Setting(100, 1), Setting(100, 4)]
    speeds = {Setting(None, 1): 1.0, Setting(None, 4): 4.0, Setting(100, 1): 2.0, Setting(100, 4): 8.0}
    runs = [SettingResult(s, run("clean", 20000, 13, 20000 / speeds[s] / 1000, 10), CommitStats(1, 1, 20000)) for s in settings]
    labels, lines = chart_series(runs)
    assert labels == ["none", "100"]
    assert [(line.name, line.xs, line.records_per_second) for line in lines] == [
        ("ours (into Spark), concurrency 1", [0, 1], [1000.0, 2000.0]),
        ("ours (into Spark), concurrency 4", [0, 1], [4000.0, 8000.0]),
    ]
    data = Report(runs, ["orders"], None).to_json()
    assert [(s["interval"], s["concurrency"]) for s in data["settings"]] == [(None, 1), (None, 4), (100, 1), (100, 4)]


def test_each_read_ahead_bound_is_its_own_line_and_named_in_the_tables_and_json():
    """--max-checkpoints-ahead 128,1: each bound a line of the chart, its label in every table."""
    settings = [Setting(100, ahead=128), Setting(100, ahead=1), Setting(1000, ahead=128), Setting(1000, ahead=1)]
    runs = [SettingResult(s, run("clean", 20000, 13, 4.0 if s.ahead == 1 else 2.0, 300 if s.ahead == 1 else 9000),
                          CommitStats(1, 1, 20000)) for s in settings]
    for result in runs:  # as counted when each STATE arrived: reading may have asked one more meanwhile
        result.clean.max_checkpoints_ahead = 3 if result.setting.ahead == 1 else 130
    labels, lines = chart_series(runs)
    assert labels == ["100", "1000"]
    assert [(line.name, line.xs, line.max_at_risk) for line in lines] == [
        ("ours (into Spark), 128 ahead", [0, 1], [9000, 9000]),
        ("ours (into Spark), 1 ahead", [0, 1], [300, 300]),
    ]
    report = Report(runs, ["orders"], None)
    assert [row[0] for row in report.run_rows()] == ["100 a128", "100 a1", "1000 a128", "1000 a1"]
    assert "1000 a1 " in report.text() and "| 100 a1 |" in report.markdown()
    notes = dict(note.split(": ", 1) for note in report.to_json()["read_ahead"])
    assert "outran" in notes["100 a128"] and "--max-checkpoints-ahead" in notes["100 a128"]
    assert "outran" not in notes["100 a1"]  # the bound kept reading in step
    data = report.to_json()
    assert [(s["label"], s["max_checkpoints_ahead"]) for s in data["settings"]] == [
        ("100 a128", 128), ("100 a1", 1), ("1000 a128", 128), ("1000 a1", 1)]
