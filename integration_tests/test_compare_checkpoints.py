"""``python -m source_framework.compare`` end to end, on small data: real syncs into Spark, a real SIGKILL
and resume per setting, airbyte-cdk's own read for reference, and every output it promises.

Kept small (2,000 users and 2,000 orders, two settings): most of its time is Spark starting in
each of the five child processes per setting.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import pytest

from integration_tests.conftest import API_KEY, MAIN, ROOT, catalog, config_for, write_json
from source_framework.compare.report import READ_AHEAD_CHECKPOINTS
from source_framework.demo.api import DemoApi

RECORDS = 2000


@pytest.mark.slow
def test_compare_checkpoints_reports_every_setting_with_a_crash_and_resume(tmp_path):
    workdir = tmp_path / "compare"
    with DemoApi(records=RECORDS, api_key=API_KEY, seed=11).start() as api:
        config = write_json(tmp_path / "config.json", config_for(api, tmp_path / "unused-warehouse"))
        # A catalog namespace the source does not give its streams: `read` places the tables by the
        # source's (demo/users), and so must the comparison.
        configured = catalog("users", "orders")
        for entry in configured["streams"]:
            entry["stream"]["namespace"] = "catalog_ns"
        catalog_path = write_json(tmp_path / "catalog.json", configured)
        run = subprocess.run(
            [sys.executable, "-m", "source_framework.compare", "--connector", MAIN, "--config", config, "--catalog", catalog_path,
             "--intervals", "none,500", "--crash-at", "0.3", "--workdir", str(workdir)],
            capture_output=True, text=True, cwd=ROOT, timeout=600,
        )
    assert run.returncode == 0, run.stderr[-3000:]

    # stdout: the readable tables (this is not `read`: no protocol messages here)
    text = run.stdout
    assert "Runs" in text and "Crash and resume" in text
    assert "airbyte-cdk read" in text

    results = json.loads((workdir / "compare.json").read_text())
    assert [s["label"] for s in results["settings"]] == ["none", "500"]
    assert [s["concurrency"] for s in results["settings"]] == [None, None]  # the config's own level
    by_label = {s["label"]: s for s in results["settings"]}
    for setting in results["settings"]:
        ours, cdk, crash = setting["ours"], setting["airbyte_cdk"], setting["crash"]
        assert ours["records"] == 2 * RECORDS
        assert ours["states"] > 0 and ours["repeated_states"] == 0
        assert 1 <= ours["spark_commits"] <= ours["states"] + 2  # queued checkpoints may share a commit
        assert ours["data_files"] >= ours["spark_commits"]
        assert ours["committed_rows"] == 2 * RECORDS
        assert 0 < ours["max_records_at_risk"] <= 2 * RECORDS
        assert ours["records_per_second"] > 0
        # timed from the first record read, not from the process's start (imports, Spark)
        assert 0 < ours["reading_seconds"] < ours["seconds"]
        assert cdk["reading_seconds"] is not None and cdk["reading_seconds"] < cdk["seconds"]
        # how far reading ran ahead of its last STATE: measured for ours, never more checkpoints than STATEs
        assert 0 <= ours["max_checkpoints_ahead"] <= ours["states"] and cdk["max_checkpoints_ahead"] is None
        assert sum(ours["states_by_stream"].values()) == ours["states"]
        assert setting["stream_intervals"] == {"users": setting["interval"], "orders": setting["interval"]}

        assert cdk["records"] == 2 * RECORDS
        assert cdk["states"] > 0
        assert cdk["repeated_states"] > 0  # the CDK repeats a state for empty date windows and at the end

        assert crash["killed"]["killed"] is True
        assert crash["killed"]["records"] >= crash["kill_after_records"] == int(2 * RECORDS * 0.3)
        assert crash["records_at_risk_at_kill"] <= crash["killed"]["records"]
        assert crash["resumed"]["returncode"] == 0
        assert 0 <= crash["records_read_again"] <= crash["killed"]["records"]
        # exactly once after the crash and resume, by a plain Spark read
        assert crash["final_table"] == {"rows": 2 * RECORDS, "reference_rows": 2 * RECORDS, "duplicates": 0, "missing": 0}

    # the demo connector reads the interval from the config: no warning; a read-ahead note per setting
    assert results["warnings"] == [] and "WARNING" not in text and "warning:" not in run.stderr
    assert [note.split(":")[0] for note in results["read_ahead"]] == ["none", "500"]
    assert "Read-ahead" in text

    # the interval adds checkpoints inside slices; the CDK's own schedule is there to compare with
    assert by_label["500"]["ours"]["states"] > by_label["none"]["ours"]["states"]
    assert by_label["500"]["airbyte_cdk"]["max_records_at_risk"] <= 500
    assert by_label["none"]["airbyte_cdk"]["max_records_at_risk"] == RECORDS  # users is one slice

    png = (workdir / "compare.png").read_bytes()
    assert png.startswith(b"\x89PNG") and len(png) > 10_000
    # the per-setting configs held the API key; they are removed, and no result mentions it
    assert not list(workdir.glob("*/config.json"))
    assert API_KEY not in (workdir / "compare.json").read_text() and API_KEY not in text
    assert os.path.isdir(workdir / "interval-500" / "crash" / "demo" / "orders")


@pytest.mark.slow
def test_compare_runs_each_read_ahead_bound_and_shows_the_trade(tmp_path):
    """``--max-checkpoints-ahead 128,1``: one run per bound, labelled with it; at 1 reading ran at
    most about one checkpoint ahead of its last STATE, at 128 further, with the same rows."""
    workdir = tmp_path / "compare"
    with DemoApi(records=3000, api_key=API_KEY, seed=11).start() as api:
        config = write_json(tmp_path / "config.json", config_for(api, tmp_path / "unused-warehouse"))
        run = subprocess.run(
            [sys.executable, "-m", "source_framework.compare", "--connector", MAIN, "--config", config,
             "--catalog", write_json(tmp_path / "catalog.json", catalog("users")), "--intervals", "10",
             "--max-checkpoints-ahead", "128,1", "--no-crash", "--no-cdk", "--workdir", str(workdir)],
            capture_output=True, text=True, cwd=ROOT, timeout=600,
        )
    assert run.returncode == 0, run.stderr[-3000:]
    results = json.loads((workdir / "compare.json").read_text())
    assert [(s["label"], s["max_checkpoints_ahead"]) for s in results["settings"]] == [("10 a128", 128), ("10 a1", 1)]
    fast, safe = (s["ours"] for s in results["settings"])
    assert fast["records"] == safe["records"] > 0 and fast["committed_rows"] == safe["committed_rows"] == fast["records"]
    # (the tool counts the checkpoints asked when a STATE line reaches it, by when reading may have
    # asked more: test_read_ahead_bound checks the bound itself, in the reading thread)
    assert 2 * READ_AHEAD_CHECKPOINTS < fast["max_checkpoints_ahead"] and safe["max_checkpoints_ahead"] < fast["max_checkpoints_ahead"] / 4
    assert safe["max_records_at_risk"] < fast["max_records_at_risk"]
    assert "outran" in results["read_ahead"][0] and "outran" not in results["read_ahead"][1]
    assert "10 a1" in run.stdout and [note.split(":")[0] for note in results["read_ahead"]] == ["10 a128", "10 a1"]
    assert (workdir / "interval-10-a1").is_dir() and (workdir / "compare.png").read_bytes().startswith(b"\x89PNG")


def test_the_connectors_own_command_line_has_no_compare_command():
    run = subprocess.run([sys.executable, MAIN, "compare-checkpoints", "--help"], capture_output=True, text=True, cwd=ROOT)
    assert run.returncode == 2 and "invalid choice" in run.stderr


def _compare_in_process(tmp_path, capsys, *args, config=None):
    from source_framework.compare.command import main

    config = {"api_key": API_KEY, "api_url": "http://127.0.0.1:9", "start_date": "2025-01-01T00:00:00Z",
              "destination": {"type": "spark"}, **(config or {})}
    argv = ["--connector", MAIN, "--config", write_json(tmp_path / "config.json", config),
            "--catalog", write_json(tmp_path / "catalog.json", catalog("users")), "--workdir", str(tmp_path / "work"), *args]
    code = main(argv)
    return code, capsys.readouterr()


@pytest.mark.parametrize("args, config, says", [
    # no Spark table would be written: nothing to compare, where it used to report a clean pass
    ([], {"destination": {"type": "stdout"}}, "destination.type"),
    # the spec's own check, naming the user's file (it named the comparison's temporary copy, exit 1)
    ([], {"page_size": "abc"}, "does not match the connector's spec"),
    # the outputs, checked before the syncs run (they raised tracebacks after all of them)
    (["--json", "/nonexistent-folder/compare.json"], {}, "--json"),
    (["--plot", "/nonexistent-folder/compare.png"], {}, "--plot"),
    (["--concurrency", ","], {}, "--concurrency"),
    (["--max-checkpoints-ahead", "0,1"], {}, "--max-checkpoints-ahead"),
])
def test_bad_input_is_refused_before_any_sync_runs(tmp_path, capsys, args, config, says):
    code, captured = _compare_in_process(tmp_path, capsys, *args, config=config)
    assert code == 2, captured.err
    assert says in captured.err and "Traceback" not in captured.err
    assert API_KEY not in captured.err
    assert not (tmp_path / "work").exists() or not list((tmp_path / "work").rglob("*.stderr.log"))  # no sync started


def test_a_workdir_that_is_a_file_is_refused(tmp_path, capsys):
    (tmp_path / "work").write_text("not a folder")
    code, captured = _compare_in_process(tmp_path, capsys)
    assert code == 2 and "--workdir" in captured.err and "Traceback" not in captured.err
    assert str(tmp_path / "config.json") not in captured.err or "work" in captured.err


def test_a_catalog_stream_the_connector_lacks_is_refused(tmp_path, capsys):
    from source_framework.compare.command import main

    configured = catalog("users")
    configured["streams"][0]["stream"]["name"] = "no_such_stream"
    argv = ["--connector", MAIN, "--config", write_json(tmp_path / "config.json", {"api_key": API_KEY,
            "api_url": "http://127.0.0.1:9", "start_date": "2025-01-01T00:00:00Z"}),
            "--catalog", write_json(tmp_path / "catalog.json", configured), "--workdir", str(tmp_path / "work")]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "no_such_stream" in err and str(tmp_path / "catalog.json") in err


def _children(pid):
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as handle:
                    if int(handle.read().rsplit(")", 1)[1].split()[1]) == pid:
                        found.append(int(entry))
            except (OSError, ValueError, IndexError):
                pass
    return found


def _alive(pid):
    try:
        with open(f"/proc/{pid}/stat") as handle:
            return handle.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def test_sigterm_stops_the_running_sync_and_removes_the_secret_config_copy(tmp_path):
    """A scheduler's stop used to end the tool alone: its child sync ran on, and the config copy
    holding the API key stayed on disk."""
    workdir = tmp_path / "compare"
    with DemoApi(records=RECORDS, api_key=API_KEY, seed=11).start() as api:
        config = write_json(tmp_path / "config.json", config_for(api, tmp_path / "unused-warehouse"))
        compare = subprocess.Popen(
            [sys.executable, "-m", "source_framework.compare", "--connector", MAIN, "--config", config,
             "--catalog", write_json(tmp_path / "catalog.json", catalog("users")), "--intervals", "none",
             "--no-cdk", "--no-crash", "--workdir", str(workdir)],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT,
        )
        try:
            copy = workdir / "interval-none" / "config.json"
            deadline = time.monotonic() + 60
            while not (copy.exists() and _children(compare.pid)) and time.monotonic() < deadline:
                time.sleep(0.05)
            children = _children(compare.pid)
            assert children and API_KEY in copy.read_text()
            compare.send_signal(signal.SIGTERM)
            out, err = compare.communicate(timeout=60)
        finally:
            compare.kill()
    assert compare.returncode == 130, err[-2000:]
    assert "interrupted" in err and "Traceback" not in err and out == ""
    assert not any(_alive(child) for child in children)
    assert not copy.exists()


def test_a_connector_whose_spec_raises_is_named_not_a_traceback(tmp_path, capsys):
    from source_framework.compare.command import main

    script = tmp_path / "broken_main.py"
    script.write_text(
        "import sys\n"
        "from source_framework import launch\n"
        "from source_framework.demo import DemoSource\n\n\n"
        "class BrokenSpec(DemoSource):\n"
        "    def spec(self, logger):\n"
        "        raise OSError('spec.json is not where the connector looks')\n\n\n"
        "if __name__ == '__main__':\n"
        "    launch(BrokenSpec(), sys.argv[1:])\n"
    )
    argv = ["--connector", str(script), "--config", write_json(tmp_path / "config.json", {"api_key": API_KEY}),
            "--catalog", write_json(tmp_path / "catalog.json", catalog("users")), "--workdir", str(tmp_path / "work")]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "the source's spec() raised OSError: spec.json is not where the connector looks" in err and "Traceback" not in err
