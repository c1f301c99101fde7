"""Nothing lost outside the happy path (issue 11): each test is one reported defect, named after
its item, reproduced the way a user met it (real Spark tables, real state files, real processes
killed with SIGKILL where the defect needs a kill) and checked with a plain ``spark.read``.

Syncs run in this process (``source_framework.testing.read``) on the test run's one Spark
session; ``state`` commands too, except where a command is killed mid-way.
"""

from __future__ import annotations

import json
import os
import shutil
import threading

import pytest

from integration_tests.conftest import API_KEY, all_records, catalog, config_for, kill_at, write_json
from source_framework.demo.api import DemoApi
from source_framework.demo.source import SCHEMAS, DemoSource, Users
from source_framework.destinations.spark.layout import table_path
from source_framework.destinations.spark.table import SparkTable
from source_framework.runtime.entrypoint import build_parser, run_command
from source_framework.testing import read

USERS = 300


@pytest.fixture
def api():
    with DemoApi(records=USERS, api_key=API_KEY, seed=11).start() as api:
        yield api


def settings(api, warehouse, **destination):
    return config_for(api, warehouse, destination={"type": "spark", "warehouse": str(warehouse), "spark_master": "local[1]", **destination})


def sync(config, *streams, state=None, args=(), source=None):
    return read(source or DemoSource(), config, catalog(*(streams or ("users",))), state=state, args=list(args))


def state_command(config_path, *args, source=None):
    parsed = build_parser().parse_args(["state", *args, "--config", config_path] if args[0] != "show" else ["state", *args])
    return run_command(source or DemoSource(), parsed)


def rows(spark, path):
    """(id, updatedAt) of every row of a table, duplicates kept."""
    return sorted((r["id"], r["updatedAt"].isoformat()) for r in spark.read.parquet(str(path)).select("id", "updatedAt").collect())


def ids(spark, path):
    return sorted(r["id"] for r in spark.read.parquet(str(path)).select("id").collect())


def api_rows(api):
    from source_framework.streams.cursor import parse_datetime

    return sorted((r["id"], parse_datetime(r["updatedAt"]).replace(tzinfo=None).isoformat()) for r in all_records(api, "users"))


def users_table(warehouse):
    return table_path(str(warehouse), "demo", "users")


def saved_states(state_file):
    with open(state_file) as handle:
        return {m["stream"]["stream_descriptor"]["name"]: m["stream"]["stream_state"] for m in json.load(handle)}


# -- 1. moved, copied or symlinked warehouses keep their data ------------------------------------------


def test_item_1_a_warehouse_reached_through_a_symlink_keeps_its_data(spark, api, tmp_path):
    real = tmp_path / "real"
    first = sync(settings(api, real))
    assert first.returncode == 0
    os.symlink(real, tmp_path / "link")
    api.touch("users", 5)
    second = sync(settings(api, tmp_path / "link"), state=first.final_state_list())
    assert second.returncode == 0, second.messages[-3:]
    table = rows(spark, users_table(real))
    assert set(table) >= set(api_rows(api)) and len(table) == len(set(table))
    assert len(table) == USERS + 5  # the 5 updated users as second versions, nothing lost, nothing twice


def test_item_1_a_copied_warehouse_reads_its_own_files_and_leaves_the_original_alone(spark, api, tmp_path):
    original = tmp_path / "original"
    first = sync(settings(api, original))
    assert first.returncode == 0
    copy = tmp_path / "copy"
    shutil.copytree(original, copy)
    api.touch("users", 4)
    second = sync(settings(api, copy), state=first.final_state_list())
    assert second.returncode == 0
    assert len(ids(spark, users_table(original))) == USERS  # untouched
    shutil.rmtree(original)  # the copy no longer needs anything of the original
    assert len(rows(spark, users_table(copy))) == USERS + 4


def test_item_1_a_moved_warehouse_keeps_its_data(spark, api, tmp_path):
    before = tmp_path / "before"
    first = sync(settings(api, before))
    assert first.returncode == 0
    shutil.move(str(before), str(tmp_path / "after"))
    api.touch("users", 3)
    second = sync(settings(api, tmp_path / "after"), state=first.final_state_list())
    assert second.returncode == 0
    assert len(rows(spark, users_table(tmp_path / "after"))) == USERS + 3


def test_item_1_a_table_copied_without_its_data_files_is_refused_not_emptied(spark, api, tmp_path):
    original = tmp_path / "original"
    assert sync(settings(api, original)).returncode == 0
    broken = tmp_path / "broken"
    source_table, broken_table = users_table(original), os.path.join(str(broken), "demo", "users")
    for folder in ("_spark_metadata", "_checkpoints"):
        shutil.copytree(os.path.join(source_table, folder), os.path.join(broken_table, folder))
    shutil.rmtree(original)  # the files the log names are gone for good
    before = sorted(os.listdir(broken_table))
    output = sync(settings(api, broken))
    assert output.returncode == 1
    (error,) = [m["trace"]["error"]["message"] for m in output.messages if m["type"] == "TRACE" and m["trace"]["type"] == "ERROR"]
    assert "moved or copied without them" in error and "state reset --tables" in error
    assert sorted(os.listdir(broken_table)) == before  # nothing deleted


# -- 2, 3. state commands: a reset marker applies only to what the reset saved; every command is crash-safe ----


def test_item_2_reset_then_set_reads_from_the_cursor_and_loses_nothing(spark, api, tmp_path):
    config = settings(api, tmp_path / "warehouse")
    config_path = write_json(tmp_path / "config.json", config)
    state_file = str(tmp_path / "state.json")
    assert sync(config, args=["--state-file", state_file]).returncode == 0
    assert state_command(config_path, "reset", "--state-file", state_file, "--stream", "users") == 0
    cursor = sorted(r["updatedAt"] for r in all_records(api, "users"))[200]
    assert state_command(config_path, "set", "--state-file", state_file, "--stream", "users", "--cursor", cursor) == 0
    after = sync(config, args=["--state-file", state_file])
    assert after.returncode == 0
    assert rows(spark, users_table(tmp_path / "warehouse")) == api_rows(api)


@pytest.mark.slow  # a real process, killed
def test_item_2_a_reset_killed_before_it_saved_the_state_changes_nothing(spark, api, tmp_path):
    config = settings(api, tmp_path / "warehouse")
    config_path = write_json(tmp_path / "config.json", config)
    state_file = str(tmp_path / "state.json")
    assert sync(config, args=["--state-file", state_file]).returncode == 0
    before = saved_states(state_file)
    killed = kill_at("state.reset.marked", "state", "reset", "--state-file", state_file, "--config", config_path, "--stream", "users")
    assert killed.paused
    assert saved_states(state_file) == before
    api.touch("users", 5)
    again = sync(config, args=["--state-file", state_file])
    assert again.returncode == 0
    table = rows(spark, users_table(tmp_path / "warehouse"))
    assert len(table) == USERS + 5 and set(table) >= set(api_rows(api))  # the old state applied, the marker dropped


@pytest.mark.slow  # a real process, killed
def test_item_3_reset_tables_killed_after_saving_the_state_still_rebuilds_the_table(spark, api, tmp_path):
    config = settings(api, tmp_path / "warehouse")
    config_path = write_json(tmp_path / "config.json", config)
    state_file = str(tmp_path / "state.json")
    assert sync(config, args=["--state-file", state_file]).returncode == 0
    killed = kill_at("state.reset.saved", "state", "reset", "--state-file", state_file, "--config", config_path, "--tables")
    assert killed.paused and "users" not in saved_states(state_file)
    assert len(ids(spark, users_table(tmp_path / "warehouse"))) == USERS  # not deleted yet
    api.touch("users", 5)
    after = sync(config, args=["--state-file", state_file])
    assert after.returncode == 0
    assert rows(spark, users_table(tmp_path / "warehouse")) == api_rows(api)  # rebuilt, once


@pytest.mark.slow  # a real process, killed
def test_item_3_state_set_killed_after_the_rewrite_resumes_from_the_new_cursor(spark, api, tmp_path):
    config = settings(api, tmp_path / "warehouse")
    config_path = write_json(tmp_path / "config.json", config)
    state_file = str(tmp_path / "state.json")
    assert sync(config, args=["--state-file", state_file]).returncode == 0
    cursor = sorted(r["updatedAt"] for r in all_records(api, "users"))[100]
    killed = kill_at("state.set.truncated", "state", "set", "--state-file", state_file, "--config", config_path,
                     "--stream", "users", "--cursor", cursor)
    assert killed.paused, killed.stderr[-2000:]
    assert saved_states(state_file)["users"] != {"updatedAt": cursor}  # the file was not saved
    after = sync(config, args=["--state-file", state_file])
    assert after.returncode == 0
    assert rows(spark, users_table(tmp_path / "warehouse")) == api_rows(api)


# -- 4. the state commands find tables as read does, and say when they find none ---------------------------


def test_item_4_state_commands_take_the_warehouse_flag_and_refuse_to_set_a_cursor_without_a_table(spark, api, tmp_path):
    config = settings(api, tmp_path / "configured")
    config_path = write_json(tmp_path / "config.json", config)
    elsewhere = str(tmp_path / "elsewhere")
    state_file = str(tmp_path / "state.json")
    assert sync(config, args=["--state-file", state_file, "--warehouse", elsewhere]).returncode == 0
    before = saved_states(state_file)
    cursor = sorted(r["updatedAt"] for r in all_records(api, "users"))[150]

    assert state_command(config_path, "set", "--state-file", state_file, "--stream", "users", "--cursor", cursor) == 1
    assert saved_states(state_file) == before  # no table where the config says: nothing changed

    assert state_command(config_path, "set", "--state-file", state_file, "--stream", "users", "--cursor", cursor,
                         "--warehouse", elsewhere) == 0
    assert len(ids(spark, users_table(elsewhere))) == 150
    after = sync(config, args=["--state-file", state_file, "--warehouse", elsewhere])
    assert after.returncode == 0 and rows(spark, users_table(elsewhere)) == api_rows(api)

    assert state_command(config_path, "set", "--state-file", state_file, "--stream", "users", "--cursor", cursor,
                         "--no-table") == 0  # the table is elsewhere on purpose: only the file changes
    assert saved_states(state_file)["users"] == {"updatedAt": cursor}


# -- 5. incremental + overwrite ---------------------------------------------------------------------------------


def test_item_5_incremental_with_overwrite_is_refused_before_anything_is_written(api, tmp_path):
    config = settings(api, tmp_path / "warehouse")
    output = read(DemoSource(), config, catalog("users", overrides={"users": {"destination_sync_mode": "overwrite"}}))
    assert output.returncode == 2
    (error,) = [m for m in output.messages if m["type"] == "TRACE"]
    assert "incremental with destination_sync_mode overwrite" in error["trace"]["error"]["message"]
    assert not os.path.exists(tmp_path / "warehouse")


# -- 7. two reads on one table --------------------------------------------------------------------------------


@pytest.mark.slow  # a real process, killed
def test_item_7_a_second_read_on_a_table_fails_fast_naming_the_first_and_waits_when_asked(spark, api, tmp_path):
    config = settings(api, tmp_path / "warehouse")
    config_path = write_json(tmp_path / "config.json", config)
    catalog_path = write_json(tmp_path / "catalog.json", catalog("users"))
    seen = {}

    def second_read_while_the_first_holds_the_table(process):
        seen["second"] = sync(config)
        waiting = {}
        thread = threading.Thread(target=lambda: waiting.setdefault("output", sync(config, args=["--wait-for-lock"])))
        thread.start()
        thread.join(2)
        seen["still_waiting"] = thread.is_alive()
        seen["waiter"] = (thread, waiting)

    killed = kill_at("commit.files_written", "read", "--config", config_path, "--catalog", catalog_path,
                     hold=second_read_while_the_first_holds_the_table)
    assert killed.paused
    second = seen["second"]
    assert second.returncode == 1
    (error,) = [m["trace"]["error"]["message"] for m in second.messages if m["type"] == "TRACE"]
    assert "is being written by process" in error and "--wait-for-lock" in error
    assert seen["still_waiting"]  # --wait-for-lock waited while the first held the table
    thread, waiting = seen["waiter"]
    thread.join(300)  # the first was killed: the waiter got the table, recovered it and synced
    assert waiting["output"].returncode == 0
    assert rows(spark, users_table(tmp_path / "warehouse")) == api_rows(api)


# -- 9. stream names never resolve outside the warehouse ------------------------------------------------------


class DotDot(Users):
    """The users again, under a name that is a path."""

    @property
    def name(self) -> str:
        return ".."

    def get_json_schema(self):
        with open(os.path.join(SCHEMAS, "users.json")) as handle:
            return json.load(handle)


class SneakySource(DemoSource):
    def streams(self, config):
        return [DotDot(config), Users(config)]


def test_item_9_a_stream_named_dot_dot_gets_its_own_folder_and_reset_tables_deletes_only_it(spark, api, tmp_path):
    warehouse = tmp_path / "warehouse"
    config = settings(api, warehouse)
    config_path = write_json(tmp_path / "config.json", config)
    entries = catalog("users")["streams"]
    sneaky = json.loads(json.dumps(entries[0]))
    sneaky["stream"]["name"] = ".."
    output = read(SneakySource(), config, {"streams": [sneaky, entries[0]]})
    assert output.returncode == 0, output.messages[-3:]
    dot_dot = table_path(str(warehouse), "demo", "..")
    assert os.path.basename(dot_dot) == "~2E." and len(ids(spark, dot_dot)) == USERS
    state_file = write_json(tmp_path / "state.json", [])
    assert state_command(config_path, "reset", "--state-file", state_file, "--stream", "..", "--tables", source=SneakySource()) == 0
    assert not os.path.exists(dot_dot)
    assert len(ids(spark, users_table(warehouse))) == USERS and os.path.isdir(warehouse / "demo")


# -- 10. replaced files are reclaimed after the retention period ------------------------------------------------


def test_item_10_replaced_files_are_deleted_once_the_retention_period_is_over(spark, api, tmp_path):
    dedup = catalog("users", overrides={"users": {"destination_sync_mode": "append_dedup"}})
    warehouse = tmp_path / "warehouse"
    keep = settings(api, warehouse)  # the default retention: hours
    state = None
    for _ in range(3):
        api.touch("users", 5)
        output = read(DemoSource(), keep, dedup, state=state)
        assert output.returncode == 0
        state = output.final_state_list()
    table = users_table(warehouse)
    parquet = [name for name in os.listdir(table) if name.endswith(".parquet")]
    commits = len(list(SparkTable(None, table).committed_checkpoints()))
    # Each run committed at least once (checkpoints waiting together for the committer are one
    # commit); each dedup commit replaced the table, and every replaced file is kept for now.
    assert commits >= 3 and len(parquet) == commits

    api.touch("users", 5)
    output = read(DemoSource(), settings(api, warehouse, retention_hours=0), dedup, state=state)
    assert output.returncode == 0
    # The files replaced before this run are gone; the one this run's commit replaced stays for
    # the next run to reclaim (a reader may be reading it right now).
    assert len([name for name in os.listdir(table) if name.endswith(".parquet")]) == 2
    assert len(_live_files(table)) == 1
    assert sorted(ids(spark, table)) == sorted(r["id"] for r in all_records(api, "users"))


def _live_files(table):
    return SparkTable(None, table).live_files()

