"""Exactly-once under SIGKILL: kill ``main.py read`` again and again, resume from the last STATE
it printed, and end with tables equal, row for row, to one uninterrupted run's. The killed runs
read four slices at once, the uninterrupted one a slice at a time.

Kills land at timed moments (while Spark starts, while reading, inside writes) and at exact
points reached through ``SOURCE_FRAMEWORK_PAUSE_AT`` (the process pauses there and the test
kills it): after a commit's files are written, after its checkpoint record, after the commit
and before its STATE line, right after a STATE line, and while a table is being recovered.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time

import pytest

from integration_tests.conftest import API_KEY, MAIN, catalog, config_for, write_json
from source_framework.demo.api import DemoApi, Faults

pytestmark = pytest.mark.slow  # 34 real processes killed and resumed: bash scripts/test.sh -m "not slow" leaves it out

MODES = {"users": "append", "orders": "append_dedup", "store_orders": "append", "products": "overwrite", "stores": "overwrite"}

# (kind, point or seconds, count): 34 kills spread over the whole recovery.
KILLS: list[tuple[str, object, int]] = [
    ("time", 2.0, 0), ("pause", "commit.done", 1), ("pause", "commit.files_written", 2),
    ("time", 6.0, 0), ("pause", "recovery.start", 2), ("pause", "commit.record_written", 1),
    ("pause", "state.printed", 3), ("time", 7.5, 0), ("pause", "commit.done", 3),
    ("pause", "commit.files_written", 1), ("time", 4.0, 0), ("pause", "commit.done", 2),
    ("pause", "recovery.start", 4), ("time", 8.0, 0), ("pause", "commit.record_written", 3),
    ("pause", "state.printed", 1), ("time", 5.0, 0), ("pause", "commit.done", 1),
    ("pause", "commit.files_written", 3), ("time", 9.0, 0), ("pause", "commit.record_written", 2),
    ("pause", "commit.done", 4), ("time", 3.0, 0), ("pause", "state.printed", 2),
    ("pause", "recovery.start", 1), ("time", 6.5, 0), ("pause", "commit.done", 2),
    ("pause", "commit.files_written", 2), ("time", 8.5, 0), ("pause", "commit.record_written", 1),
    ("pause", "commit.done", 3), ("time", 7.0, 0), ("pause", "state.printed", 4),
    ("pause", "commit.done", 1),
]


class Orchestrator:
    """Plays the part of whatever runs the connector: keeps the last STATE per stream it saw."""

    def __init__(self, config: str, catalog_path: str, state_path: str) -> None:
        self.config, self.catalog, self.state_path = config, catalog_path, state_path
        self.states: dict[str, dict] = {}

    def run(self, kill: tuple[str, object, int] | None) -> tuple[int | None, str]:
        args = [sys.executable, MAIN, "read", "--config", self.config, "--catalog", self.catalog, "--quiet"]
        if self.states:
            with open(self.state_path, "w") as handle:
                json.dump(list(self.states.values()), handle)
            args += ["--state", self.state_path]
        env = dict(os.environ)
        if kill and kill[0] == "pause":
            env["SOURCE_FRAMEWORK_PAUSE_AT"] = f"{kill[1]}:{kill[2]}"
        process = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
        paused = threading.Event()

        def read_stdout() -> None:
            for line in process.stdout:
                message = json.loads(line)
                if message["type"] == "STATE":
                    self.states[message["state"]["stream"]["stream_descriptor"]["name"]] = message["state"]

        def read_stderr() -> None:
            for line in process.stderr:
                if line.startswith(b"paused at "):
                    paused.set()

        readers = [threading.Thread(target=read_stdout), threading.Thread(target=read_stderr)]
        for reader in readers:
            reader.start()
        outcome = "completed"
        if kill and kill[0] == "time":
            deadline = time.monotonic() + float(kill[1])
            while time.monotonic() < deadline and process.poll() is None:
                time.sleep(0.05)
            if process.poll() is None:
                process.send_signal(signal.SIGKILL)
                outcome = f"killed after {kill[1]}s"
        elif kill:
            while not paused.is_set() and process.poll() is None:
                time.sleep(0.02)
            if paused.is_set():
                process.send_signal(signal.SIGKILL)
                outcome = f"killed at {kill[1]}:{kill[2]}"
        code = process.wait(timeout=600)
        for reader in readers:
            reader.join()
        return (None if outcome != "completed" else code), outcome


def table_rows(spark, warehouse: str, name: str) -> list[tuple]:
    frame = spark.read.parquet(os.path.join(warehouse, "demo", name))
    columns = sorted(c for c in frame.columns if not c.startswith("_sf_"))
    return sorted(tuple(row) for row in frame.select(*columns).collect())


def test_killed_and_resumed_syncs_equal_one_uninterrupted_sync(spark, tmp_path):
    overrides = {
        name: {"destination_sync_mode": mode, **({"sync_mode": "full_refresh"} if mode == "overwrite" else {})}
        for name, mode in MODES.items()
    }
    catalog_path = write_json(tmp_path / "catalog.json", catalog(overrides=overrides))
    with DemoApi(records=2000, api_key=API_KEY, seed=3, faults=Faults(delay_ms=2)).start() as api:
        reference = str(tmp_path / "reference")
        # The reference reads one slice after another; the killed runs read four at once.
        config = write_json(tmp_path / "ref.json", config_for(api, reference, state_checkpoint_interval=200, concurrency_level=1))
        started = time.monotonic()
        code, _ = Orchestrator(config, catalog_path, str(tmp_path / "ref_state.json")).run(None)
        assert code == 0
        reference_seconds = time.monotonic() - started

        faulted = str(tmp_path / "faulted")
        # Rows are also written to staged files ahead of their checkpoint (every 150 rows), so
        # kills land between staging and commit too; the tables must still equal the reference's.
        destination = {"type": "spark", "warehouse": faulted, "spark_master": "local[1]", "stage_rows": 150}
        config = write_json(
            tmp_path / "faulted.json",
            config_for(api, faulted, state_checkpoint_interval=200, destination=destination, concurrency_level=4),
        )
        orchestrator = Orchestrator(config, catalog_path, str(tmp_path / "state.json"))
        outcomes = []
        for kill in KILLS:
            code, outcome = orchestrator.run(kill)
            outcomes.append(outcome)
            if code is not None:
                assert code == 0, outcome
        final_code, _ = orchestrator.run(None)
        assert final_code == 0

    kills = [o for o in outcomes if o.startswith("killed")]
    assert len(kills) >= 30, f"only {len(kills)} kills landed: {outcomes}"
    for point in ("commit.done", "commit.files_written", "commit.record_written", "state.printed", "recovery.start"):
        assert any(point in o for o in kills), f"no kill at {point}: {outcomes}"

    for name in MODES:
        expected, actual = table_rows(spark, reference, name), table_rows(spark, faulted, name)
        assert len(actual) == len(expected), f"{name}: {len(actual)} rows after recovery, {len(expected)} without kills"
        assert actual == expected, f"{name}: rows differ from the uninterrupted run"
    ids = [row[0] for row in spark.read.parquet(os.path.join(faulted, "demo", "orders")).select("id").collect()]
    assert len(ids) == len(set(ids)), "append_dedup left two rows for one key"
    print(f"reference run {reference_seconds:.1f}s; {len(kills)} kills: {outcomes}")
