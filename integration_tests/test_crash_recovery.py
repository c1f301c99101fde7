"""Exactly-once under SIGKILL: kill ``main.py read`` again and again, resume from the last STATE
it printed, and end with tables equal, row for row, to one uninterrupted run's. The killed runs
read four slices at once, the uninterrupted one a slice at a time.

Kills land at timed moments (fractions of an uninterrupted run's duration: while Spark starts,
while reading, inside writes) and at exact
points reached through ``SOURCE_FRAMEWORK_PAUSE_AT`` (the process pauses there and the test
kills it): after a commit's files are written, after its checkpoint record, after the commit
and before its STATE line, right after a STATE line, while a table is being recovered and
between the deletions of that clean-up. Between the reads the orchestrator also runs ``state
reset`` (with and without ``--tables``) and ``state set`` (a cursor back) on its saved states,
killed at their steps, and starts two reads at once on the same tables: one is refused, the other
killed. Every one of those ends with the tables of the uninterrupted run: in a ``parquet``
folder, in Delta tables on disk, and in Delta tables on a local S3 server.
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

from integration_tests.conftest import API_KEY, MAIN, catalog, config_for, landed_rows, read_table, write_json
from source_framework.demo.api import DemoApi, Faults

pytestmark = pytest.mark.slow  # 36 real processes killed and resumed: bash scripts/test.sh -m "not slow" leaves it out

MODES = {"users": "append", "orders": "append_dedup", "store_orders": "append", "products": "overwrite", "stores": "overwrite"}

# (kind, point or moment, count): 36 kills spread over the whole recovery. "reset", "reset --tables"
# and "set" are state commands on users; "two" starts two reads at once and kills the one that runs.
# A "time" kill lands that fraction of the uninterrupted run's duration after the start: a resumed
# run has less to do, and fixed moments (2 to 7.5 s) outlived the runs of a faster machine or build
# (five of eight completed first: resumed runs took 5.2-5.7 s against the reference's 6.4 s).
KILLS: list[tuple[str, object, int]] = [
    ("time", 0.2, 0), ("pause", "commit.done", 1), ("pause", "commit.files_written", 2),
    ("pause", "recovery.removing", 1), ("time", 0.6, 0), ("pause", "recovery.start", 2),
    ("pause", "commit.record_written", 1), ("pause", "state.printed", 3), ("set", "commit.done", 1),
    ("time", 0.75, 0), ("pause", "commit.done", 3), ("reset", "state.reset.saved", 1),
    ("pause", "commit.files_written", 1), ("time", 0.4, 0), ("pause", "commit.done", 2),
    ("pause", "recovery.start", 4), ("two", "commit.done", 2), ("pause", "commit.record_written", 3),
    ("pause", "state.printed", 1), ("time", 0.5, 0), ("reset --tables", "state.reset.deleting", 3),
    ("pause", "commit.done", 1), ("pause", "commit.files_written", 3), ("pause", "recovery.removing", 1),
    ("pause", "commit.record_written", 2), ("set", "state.set.committed", 1), ("pause", "commit.done", 4),
    ("time", 0.3, 0), ("pause", "state.printed", 2), ("pause", "recovery.start", 1), ("time", 0.65, 0),
    ("pause", "commit.done", 2), ("pause", "commit.files_written", 2), ("pause", "commit.record_written", 1),
    ("time", 0.7, 0), ("pause", "state.printed", 4),
]
STATE_COMMANDS = ("reset", "reset --tables", "set")
# A Delta table's commit is one transaction written by delta-rs (or Spark): no record or recovery
# steps of our own to stop between, so its kills land before and after the transaction instead.
DELTA_KILLS: list[tuple[str, object, int]] = [
    ("time", 0.2, 0), ("pause", "commit.done", 1), ("pause", "commit.files_written", 2), ("time", 0.6, 0),
    ("pause", "state.printed", 3), ("set", "commit.done", 1), ("time", 0.75, 0), ("pause", "commit.done", 3),
    ("reset", "state.reset.saved", 1), ("pause", "commit.files_written", 1), ("time", 0.4, 0),
    ("two", "commit.done", 2), ("pause", "state.printed", 1), ("time", 0.5, 0), ("reset --tables", "state.reset.deleting", 3),
    ("pause", "commit.files_written", 3), ("set", "state.set.committed", 1), ("pause", "commit.done", 4), ("time", 0.3, 0),
    ("pause", "state.printed", 2),
]
KILLED_AT = {
    "parquet": ("commit.done", "commit.files_written", "commit.record_written", "state.printed", "recovery.start",
                "recovery.removing", "reset killed at state.reset.saved", "reset --tables killed at state.reset.deleting",
                "set killed at commit.done", "set killed at state.set.committed", "two reads: one refused"),
    "delta": ("commit.done", "commit.files_written", "state.printed", "reset killed at state.reset.saved",
              "reset --tables killed at state.reset.deleting", "set killed at commit.done", "set killed at state.set.committed",
              "two reads: one refused"),
}
# On an object store no lock is held (Delta's conflict check stands in for it, tested on its own in
# ``test_object_store.py``), so its kills start no second read: that step is one more kill instead.
# And ``reset --tables`` deletes a stored table in two steps (its log, then its data files): one
# point between them, where a local table has one per file.
S3_KILLS = [("pause", "commit.done", 2) if kind == "two" else (kind, point, 1) if kind == "reset --tables" else (kind, point, count)
            for kind, point, count in DELTA_KILLS]
KILLED_AT["delta-s3"] = tuple(point for point in KILLED_AT["delta"] if not point.startswith("two reads"))
KILLS_OF = {"parquet": KILLS, "delta": DELTA_KILLS, "delta-s3": S3_KILLS}


class Orchestrator:
    """Plays the part of whatever runs the connector: keeps the last STATE per stream it saw, and
    runs the state commands on a file of those states."""

    def __init__(self, config: str, catalog_path: str, state_path: str, run_seconds: float = 0.0) -> None:
        self.config, self.catalog, self.state_path = config, catalog_path, state_path
        # An uninterrupted run's duration: "time" kills land within it. A run that completes sets it
        # anew: resumed runs have less left to read, and a kill timed for a whole sync came after
        # they had ended (5 of the 8 at times, once syncs started faster).
        self.run_seconds = run_seconds
        self.states: dict[str, dict] = {}

    def run(self, kill: tuple[str, object, int] | None) -> tuple[int | None, str]:
        """One step; returns the exit code of a run that completed (None if killed) and what happened."""
        if kill and kill[0] in STATE_COMMANDS:
            return self.state_command(*kill)
        args = ["read", "--config", self.config, "--catalog", self.catalog, "--quiet"]
        if self.states:
            self.save_states()
            args += ["--state", self.state_path]
        pause = f"{kill[1]}:{kill[2]}" if kill and kill[0] in ("pause", "two") else None
        if kill and kill[0] == "two":
            return self.two_at_once(args, pause)
        started = time.monotonic()
        process = Run(args, pause, self.saw_state)
        if kill and kill[0] == "time":
            outcome = process.kill_after(round(float(kill[1]) * self.run_seconds, 1))
        else:
            outcome = process.kill_when_paused() if pause else process.finish()
        if outcome == "completed":
            self.run_seconds = min(self.run_seconds, time.monotonic() - started)
        self.last_stderr = process.stderr.decode(errors="replace")[-4000:]  # (for a failing run's message)
        return process.code if outcome == "completed" else None, outcome

    def saw_state(self, message: dict) -> None:
        self.states[message["state"]["stream"]["stream_descriptor"]["name"]] = message["state"]

    def save_states(self) -> None:
        with open(self.state_path, "w") as handle:
            json.dump(list(self.states.values()), handle)

    def state_command(self, command: str, point: object, count: int) -> tuple[int | None, str]:
        """``state reset|set`` of users on the saved states, killed at ``point``; the saved states
        are then what the command left in the file."""
        self.save_states()
        args = ["state", *command.split(), "--stream", "users", "--state-file", self.state_path, "--config", self.config]
        if command == "set":
            args += ["--cursor", self.cursor_back()]
        outcome = Run(args, f"{point}:{count}").kill_when_paused()
        with open(self.state_path) as handle:
            self.states = {m["stream"]["stream_descriptor"]["name"]: m for m in json.load(handle)}
        return None, f"{command} {outcome}"

    def cursor_back(self) -> str:
        """Half way back from users' cursor to the start: the set re-reads the second half, once."""
        from source_framework.streams.cursor import parse_datetime

        start = parse_datetime("2025-01-01T00:00:00Z")
        users = self.states.get("users", {}).get("stream", {}).get("stream_state") or {}
        cursor = parse_datetime(users.get("updatedAt", "2025-01-01T00:00:00Z"))
        return (start + (cursor - start) / 2).strftime("%Y-%m-%dT%H:%M:%SZ")

    def two_at_once(self, args: list[str], pause: str | None) -> tuple[int | None, str]:
        """Two reads started together on the same tables: one holds them, the other is refused at
        once; the one that holds them is killed at ``pause`` (once the other has given up)."""
        runs = [Run(args, pause, self.saw_state), Run(args, pause, self.saw_state)]
        while not all(run.paused.is_set() or run.process.poll() is not None for run in runs):
            time.sleep(0.02)
        outcomes = [run.kill_when_paused() for run in runs]
        refused = [run for run in runs if run.code == 1 and b"is being written by process" in run.stderr]
        assert len(refused) == 1, f"two reads at once: {outcomes}, {[run.stderr[-500:] for run in runs]}"
        (other,) = [outcome for run, outcome in zip(runs, outcomes, strict=True) if run not in refused]
        return None, f"two reads: one refused, the other {other}"


class Run:
    """``main.py args`` in a process of its own, paused at ``pause`` (``point:count``) if given;
    every STATE line it prints goes to ``on_state``."""

    def __init__(self, args: list[str], pause: str | None = None, on_state=lambda message: None) -> None:
        env = dict(os.environ)
        if pause:
            env["SOURCE_FRAMEWORK_PAUSE_AT"] = pause
        self.process = subprocess.Popen([sys.executable, MAIN, *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
        self.paused, self.stderr, self.code = threading.Event(), b"", None
        self.point = pause

        def read_stdout() -> None:
            for line in self.process.stdout:
                message = json.loads(line)
                if message["type"] == "STATE":
                    on_state(message)

        def read_stderr() -> None:
            for line in self.process.stderr:
                self.stderr += line
                if line.startswith(b"paused at "):
                    self.paused.set()

        self.readers = [threading.Thread(target=read_stdout), threading.Thread(target=read_stderr)]
        for reader in self.readers:
            reader.start()

    def finish(self) -> str:
        self.code = self.process.wait(timeout=600)
        for reader in self.readers:
            reader.join()
        return "completed"

    def kill_when_paused(self) -> str:
        while not self.paused.is_set() and self.process.poll() is None:
            time.sleep(0.02)
        if self.paused.is_set():
            self.process.send_signal(signal.SIGKILL)
            self.finish()
            return f"killed at {self.point}"
        return self.finish()

    def kill_after(self, seconds: float) -> str:
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline and self.process.poll() is None:
            time.sleep(0.05)
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGKILL)
            self.finish()
            return f"killed after {seconds}s"
        return self.finish()


def table_rows(spark, warehouse: str, name: str, through_spark: bool = True) -> list[tuple]:
    """The rows of a demo table, ours columns left out: read by Spark, or else by delta-rs (``landed_rows``); the two
    tables of a comparison are read alike."""
    path = os.path.join(warehouse, "demo", name)
    rows = [row.asDict() for row in read_table(spark, path).collect()] if through_spark else landed_rows(spark, path)
    columns = sorted(c for c in (rows[0] if rows else {}) if not c.startswith("_sf_"))
    return sorted(tuple(row[c] for c in columns) for row in rows)


@pytest.mark.parametrize("table_format", ["parquet", "delta", "delta-s3"])
def test_killed_and_resumed_syncs_equal_one_uninterrupted_sync(spark, tmp_path, table_format, request):
    """``delta-s3``: the killed runs' Delta tables are on the local S3 server (the reference's on disk)."""
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

        faulted = request.getfixturevalue("s3_warehouse") if table_format == "delta-s3" else str(tmp_path / "faulted")
        # Rows are also written to staged files ahead of their checkpoint (every 150 rows), so
        # kills land between staging and commit too; the tables must still equal the reference's.
        destination = {"type": "spark", "warehouse": faulted, "spark_master": "local[1]", "stage_rows": 150,
                       "table_format": table_format.removesuffix("-s3")}
        config = write_json(
            tmp_path / "faulted.json",
            config_for(api, faulted, state_checkpoint_interval=200, destination=destination, concurrency_level=4),
        )
        orchestrator = Orchestrator(config, catalog_path, str(tmp_path / "state.json"), run_seconds=reference_seconds)
        outcomes = []
        for kill in KILLS_OF[table_format]:
            code, outcome = orchestrator.run(kill)
            outcomes.append(outcome)
            if code is not None:
                assert code == 0, f"{outcome}\n{orchestrator.last_stderr}"
        final_code, _ = orchestrator.run(None)
        assert final_code == 0, f"{outcomes}\n{orchestrator.last_stderr}"

    kills = [o for o in outcomes if "killed" in o]
    assert len(kills) >= (32 if table_format == "parquet" else 17), f"only {len(kills)} kills landed: {outcomes}"
    for point in KILLED_AT[table_format]:
        assert any(point in o for o in kills), f"no kill at {point}: {outcomes}"

    for name in MODES:
        # (Spark where the killed runs' table is a Parquet folder, which only Spark reads right)
        through_spark = table_format == "parquet"
        expected, actual = table_rows(spark, reference, name, through_spark), table_rows(spark, faulted, name, through_spark)
        assert len(actual) == len(expected), f"{name}: {len(actual)} rows after recovery, {len(expected)} without kills"
        assert actual == expected, f"{name}: rows differ from the uninterrupted run"
    if table_format == "delta":  # (on S3, reading the tables above went through their Delta log)
        assert os.path.isdir(os.path.join(faulted, "demo", "orders", "_delta_log"))
    ids = [row["id"] for row in landed_rows(spark, os.path.join(faulted, "demo", "orders"))]
    assert len(ids) == len(set(ids)), "append_dedup left two rows for one key"
    print(f"reference run {reference_seconds:.1f}s; {len(kills)} kills: {outcomes}")


@pytest.mark.parametrize(("mode", "snapshots"), [("append", 2), ("overwrite", 1)])
def test_a_full_refresh_killed_after_its_commit_and_retried_appends_a_snapshot_per_attempt(spark, tmp_path, mode, snapshots):
    """What the README promises for a full refresh ("Exactly once", the sync modes): it has no
    checkpoint to resume from, and an orchestrator's retry starts from the state the killed attempt
    was given, as a new sync starts from the marker a completed one printed: nothing tells the
    two apart. So an attempt killed after its one commit and before its STATE, then retried,
    leaves two snapshots in an ``append`` table (as Airbyte's own destinations append one per
    attempt), and one in an ``overwrite`` table, the exactly-once choice for a full refresh."""
    from integration_tests.conftest import all_records, kill_at, run_in_process

    overrides = {"products": {"sync_mode": "full_refresh", "destination_sync_mode": mode}}
    catalog_path = write_json(tmp_path / "catalog.json", catalog("products", overrides=overrides))
    with DemoApi(records=300, api_key=API_KEY, seed=5).start() as api:
        config = write_json(tmp_path / "config.json", config_for(api, tmp_path / "warehouse"))
        killed = kill_at("commit.done", "read", "--config", config, "--catalog", catalog_path)
        assert killed.paused, killed.stderr[-2000:]
        assert not [m for m in killed.messages if m["type"] == "STATE"], "killed after its STATE, not before"
        retried = run_in_process("read", "--config", config, "--catalog", catalog_path)  # the same (no) state
        assert retried.returncode == 0, retried.stderr[-2000:]
        products = sorted(record["id"] for record in all_records(api, "products"))
    table = sorted(row.id for row in read_table(spark, str(tmp_path / "warehouse" / "demo" / "products")).select("id").collect())
    assert products and table == sorted(products * snapshots)
