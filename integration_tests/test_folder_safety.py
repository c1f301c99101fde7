"""The ``parquet`` table folder under crashes and damage from outside (issue 49, items 2, 7, 8 and
15): each test is one reported defect, reproduced as a user meets it (real processes killed with
SIGKILL at fault points, files lost or cut by hand) and checked with a plain ``spark.read.parquet``
in a Spark application of its own (conftest's ``new_application``) where readers are concerned.
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

from integration_tests.conftest import API_KEY, MAIN, ROOT, all_records, catalog, config_for, kill_at, page_converters_of, write_json
from source_framework.demo.api import DemoApi
from source_framework.demo.source import DemoSource
from source_framework.destinations.spark.file_sink_log import FileSinkLog
from source_framework.destinations.spark.layout import table_path
from source_framework.testing import read

USERS = 300


@pytest.fixture
def api():
    with DemoApi(records=USERS, api_key=API_KEY, seed=23).start() as api:
        yield api


def settings(api, warehouse, **overrides):
    """The Parquet folder's tests: ``table_format: parquet`` (Delta, the default, has none of this folder's logs)."""
    config = config_for(api, warehouse, **overrides)
    config["destination"]["table_format"] = "parquet"
    return config


def users_table(warehouse) -> str:
    return table_path(str(warehouse), "demo", "users")


def listing(folder: str) -> list[tuple[str, int]]:
    """Every file under ``folder`` with its size: what a refusal must leave as it was."""
    return sorted((os.path.relpath(os.path.join(here, name), folder), os.path.getsize(os.path.join(here, name)))
                  for here, _, names in os.walk(folder) for name in names)


def ids(spark, path) -> list[int]:
    return sorted(row["id"] for row in spark.read.parquet(path).select("id").collect())


def api_ids(api) -> list[int]:
    return sorted(record["id"] for record in all_records(api, "users"))


def error_of(output) -> str:
    (error,) = [m["trace"]["error"]["message"] for m in output.messages if m["type"] == "TRACE" and m["trace"]["type"] == "ERROR"]
    return error


# -- 2. a new table's first commit is invisible until its commit point ---------------------------------------


@pytest.mark.slow  # real processes, killed
@pytest.mark.parametrize("mode", ["append", "overwrite"])
def test_item_2_a_new_tables_first_commit_killed_before_its_batch_is_not_seen_by_a_plain_reader(
    spark, api, tmp_path, new_application, mode
):
    """Killed with the first commit's data file in the table folder and no log batch yet: the folder
    used to have no ``_spark_metadata/`` at all, so a plain reader listed the file's rows."""
    warehouse = tmp_path / "warehouse"
    config_path = write_json(tmp_path / "config.json", settings(api, warehouse))
    overrides = {"users": {"sync_mode": "full_refresh", "destination_sync_mode": "overwrite"}} if mode == "overwrite" else None
    catalog_path = write_json(tmp_path / "catalog.json", catalog("users", overrides=overrides))
    killed = kill_at("commit.files_written", "read", "--config", config_path, "--catalog", catalog_path)
    assert killed.paused, killed.stderr[-2000:]
    table = users_table(warehouse)
    assert [name for name in os.listdir(table) if name.endswith(".parquet")]  # the uncommitted rows are there
    seen = new_application([table])[table]
    assert not seen.get("rows"), f"a plain reader saw {len(seen['rows'])} uncommitted rows"
    after = read(DemoSource(), settings(api, warehouse), json.load(open(catalog_path)))
    assert after.returncode == 0, after.messages[-3:]
    assert ids(spark, table) == api_ids(api)


# -- 7. a page converter that outlives its sync is waited for by the next run's clean-up ------------------------


class Main:
    """``main.py args...`` in a process of its own, its stderr watched line by line."""

    def __init__(self, *args: str, env: dict[str, str]) -> None:
        self.process = subprocess.Popen([sys.executable, MAIN, *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                        cwd=ROOT, env={**os.environ, **env})
        self.stderr: list[str] = []
        self.stdout: list[bytes] = []
        threading.Thread(target=lambda: self.stdout.extend(self.process.stdout), daemon=True).start()
        threading.Thread(target=self._watch, daemon=True).start()

    def _watch(self) -> None:
        for line in self.process.stderr:
            self.stderr.append(line.decode(errors="replace"))

    def wait_for(self, text: str, timeout: float = 120) -> None:
        deadline = time.monotonic() + timeout
        while not any(text in line for line in self.stderr):
            assert self.process.poll() is None and time.monotonic() < deadline, "".join(self.stderr)[-3000:]
            time.sleep(0.05)

    def kill(self) -> None:
        self.process.send_signal(signal.SIGKILL)
        self.process.wait(timeout=60)

    def states(self) -> list[dict]:
        messages = [json.loads(line) for line in b"".join(self.stdout).splitlines() if line.strip()]
        return [m["state"] for m in messages if m["type"] == "STATE"]


@pytest.mark.slow  # real processes, killed
def test_item_7_the_next_runs_clean_up_waits_for_a_page_converter_still_writing_a_killed_runs_commit(spark, api, tmp_path):
    """The sync killed while its page converter writes a commit's log batch: a run waiting for the
    table's lock (``--wait-for-lock``) got it at once and cleaned the commit up, and the batch then
    landed, naming files that were gone; the table was refused from then on (its readers failed).
    The converter lingers here after the kill, as a slow disk would keep it in that step."""
    warehouse = tmp_path / "warehouse"
    # One checkpoint ahead of its STATE at most: each its own commit, so there is a second commit to kill in (on a busy
    # machine the three checkpoints queued while the table opened and went in one commit, and the kill never came).
    config = settings(api, warehouse, state_checkpoint_interval=100, max_checkpoints_ahead=1)
    config_path = write_json(tmp_path / "config.json", config)
    catalog_path = write_json(tmp_path / "catalog.json", catalog("users"))
    args = ["read", "--config", config_path, "--catalog", catalog_path]
    killed = Main(*args, env={"SOURCE_FRAMEWORK_PAUSE_AT": "commit.files_written:2", "SOURCE_FRAMEWORK_LINGER_SECONDS": "5"})
    killed.wait_for("paused at commit.files_written:2")  # (said by its converter, about to write the batch)
    (converter,) = page_converters_of(killed.process.pid)
    waiter = Main(*args, "--wait-for-lock", env={"SOURCE_FRAMEWORK_PAUSE_AT": "commit.start:1"})
    waiter.wait_for("waiting for the lock of table")
    killed.kill()
    waiter.wait_for("paused at commit.start:1")  # cleaned up, read, and about to commit
    waiter.kill()
    deadline = time.monotonic() + 60
    while os.path.exists(f"/proc/{converter}") and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not os.path.exists(f"/proc/{converter}")
    # The last STATE it printed, as an orchestrator keeps it: the commits before the converter's second (one or two:
    # the first may have gone in before the converter was ready); the killed commit's STATE never left.
    states = killed.states()
    assert 1 <= len(states) <= 2, states
    after = read(DemoSource(), settings(api, warehouse, state_checkpoint_interval=100), catalog("users"), state=[states[-1]])
    assert after.returncode == 0, error_of(after)
    assert ids(spark, users_table(warehouse)) == api_ids(api)


# -- 8. a lost newest log batch stops the stream; nothing is deleted -----------------------------------------


def test_item_8_a_lost_newest_batch_stops_the_stream_and_deletes_nothing(spark, api, tmp_path):
    """The newest batch gone (its directory entry not durable at a power loss, or deleted): its
    record looked like an interrupted commit, so the next sync deleted the commit's files, took the
    state it was given (exactly that commit's) for an edited one, and exited 0 with rows missing."""
    warehouse, state_file = tmp_path / "warehouse", str(tmp_path / "state.json")
    config = settings(api, warehouse, state_checkpoint_interval=100)
    assert read(DemoSource(), config, catalog("users"), args=["--state-file", state_file]).returncode == 0
    table = users_table(warehouse)
    log = FileSinkLog(table)
    newest = log.batch_path(log.latest_batch_id())
    lost = open(newest, "rb").read()
    os.remove(newest)
    before = listing(table)
    output = read(DemoSource(), config, catalog("users"), args=["--state-file", state_file])
    assert output.returncode == 1
    error = error_of(output)
    assert table in error and f"_spark_metadata/{os.path.basename(newest)}" in error and "nothing was deleted" in error
    assert listing(table) == before
    with open(newest, "wb") as handle:  # put back, the table is whole again
        handle.write(lost)
    assert read(DemoSource(), config, catalog("users"), args=["--state-file", state_file]).returncode == 0
    assert ids(spark, table) == api_ids(api)


# -- 15. damage from outside is named, not written over -------------------------------------------------------


@pytest.mark.parametrize("cut_to", [0, 0.5], ids=["emptied", "cut in half"])
def test_item_15_a_live_data_file_cut_from_outside_stops_the_next_sync(spark, api, tmp_path, new_application, cut_to):
    """Every reader failed on the cut file, while the next append sync exited 0 (a missing file was
    refused already)."""
    warehouse = tmp_path / "warehouse"
    config = settings(api, warehouse)
    first = read(DemoSource(), config, catalog("users"))
    assert first.returncode == 0
    table = users_table(warehouse)
    victim = sorted(name for name in os.listdir(table) if name.endswith(".parquet"))[0]
    size = os.path.getsize(os.path.join(table, victim))
    os.truncate(os.path.join(table, victim), int(size * cut_to))
    assert "error" in new_application([table])[table]  # what every reader meets
    before = listing(table)
    api.touch("users", 3)
    output = read(DemoSource(), config, catalog("users"), state=first.final_state_list())
    assert output.returncode == 1
    error = error_of(output)
    assert table in error and victim in error and f"logged as {size}" in error and "state reset --tables" in error
    assert listing(table) == before


def test_item_15_a_cut_log_line_is_named_by_its_file_and_line(spark, api, tmp_path):
    warehouse = tmp_path / "warehouse"
    config = settings(api, warehouse)
    first = read(DemoSource(), config, catalog("users"))
    assert first.returncode == 0
    log = FileSinkLog(users_table(warehouse))
    newest = log.batch_path(log.latest_batch_id())
    content = open(newest, "rb").read()
    lines = content.count(b"\n") + 1
    with open(newest, "wb") as handle:
        handle.write(content[: len(content) - 40])  # its last line cut
    before = listing(users_table(warehouse))
    output = read(DemoSource(), config, catalog("users"), state=first.final_state_list())
    assert output.returncode == 1
    error = error_of(output)
    assert f"{newest}, line {lines}" in error and "cut or damaged" in error
    assert listing(users_table(warehouse)) == before
