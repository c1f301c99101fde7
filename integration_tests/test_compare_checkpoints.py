"""``python -m source_framework.compare`` end to end, on small data: real syncs into Spark, a real SIGKILL
and resume per setting, airbyte-cdk's own read for reference, and every output it promises.

Kept small (2,000 users and 2,000 orders, two settings): most of its time is Spark starting in
each of the five child processes per setting.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from integration_tests.conftest import API_KEY, MAIN, ROOT, catalog, config_for, write_json
from source_framework.demo.api import DemoApi

RECORDS = 2000


@pytest.mark.slow
def test_compare_checkpoints_reports_every_setting_with_a_crash_and_resume(tmp_path):
    workdir = tmp_path / "compare"
    with DemoApi(records=RECORDS, api_key=API_KEY, seed=11).start() as api:
        config = write_json(tmp_path / "config.json", config_for(api, tmp_path / "unused-warehouse"))
        catalog_path = write_json(tmp_path / "catalog.json", catalog("users", "orders"))
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


def test_the_connectors_own_command_line_has_no_compare_command():
    run = subprocess.run([sys.executable, MAIN, "compare-checkpoints", "--help"], capture_output=True, text=True, cwd=ROOT)
    assert run.returncode == 2 and "invalid choice" in run.stderr
