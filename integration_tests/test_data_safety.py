"""Nothing lost outside the happy path (issue 11): each test is one reported defect, named after
its item, reproduced the way a user met it (real Spark tables, real state files, real processes
killed with SIGKILL where the defect needs a kill) and checked with a plain ``spark.read``.

Syncs run in this process (``source_framework.testing.read``) on the test run's one Spark
session; ``state`` commands too, except where a command is killed mid-way.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import shutil
import socket
import threading
import time

import pytest
from airbyte_cdk.sources.streams import CheckpointMixin, Stream

from integration_tests.conftest import (
    API_KEY,
    all_records,
    catalog,
    config_for,
    kill_at,
    landed_rows,
    read_table,
    run_in_process,
    run_main,
    table_at,
    write_json,
)
from source_framework import IncrementalHttpStream, Source
from source_framework.demo.api import DemoApi
from source_framework.demo.source import SCHEMAS, DemoSource, Orders, Users
from source_framework.destinations.spark.layout import table_path
from source_framework.runtime.entrypoint import build_parser, run_command
from source_framework.testing import read

pytestmark = pytest.mark.slow  # many syncs, state commands and killed processes: the quick tier (-m "not slow") leaves it out

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
    return sorted((r["id"], r["updatedAt"].isoformat()) for r in landed_rows(spark, str(path)))


def ids(spark, path):
    return sorted(r["id"] for r in landed_rows(spark, str(path)))


def api_rows(api, path="users", params=None):
    """(id, updatedAt) of every record the API serves at ``path``, as ``rows`` reads a table."""
    from source_framework.streams.cursor import parse_datetime

    return sorted((r["id"], parse_datetime(r["updatedAt"]).replace(tzinfo=None).isoformat())
                  for r in all_records(api, path, params))


class UnderDemoName:
    """A demo stream's subclass synced under the demo stream's name and schema (``demo_name``),
    not the subclass's own."""

    demo_name = ""

    @property
    def name(self) -> str:
        return self.demo_name

    def get_json_schema(self):
        with open(os.path.join(SCHEMAS, f"{self.demo_name}.json")) as handle:
            return json.load(handle)


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
    """The Parquet folder's logs copied without the files they name (``table_format: parquet``)."""
    original = tmp_path / "original"
    assert sync(settings(api, original, table_format="parquet")).returncode == 0
    broken = tmp_path / "broken"
    source_table, broken_table = users_table(original), os.path.join(str(broken), "demo", "users")
    for folder in ("_spark_metadata", "_checkpoints"):
        shutil.copytree(os.path.join(source_table, folder), os.path.join(broken_table, folder))
    shutil.rmtree(original)  # the files the log names are gone for good
    before = sorted(os.listdir(broken_table))
    output = sync(settings(api, broken, table_format="parquet"))
    assert output.returncode == 1
    (error,) = [m["trace"]["error"]["message"] for m in output.messages if m["type"] == "TRACE" and m["trace"]["type"] == "ERROR"]
    assert "moved or copied without them" in error and "state reset --tables" in error
    assert sorted(os.listdir(broken_table)) == before  # nothing deleted


def test_item_1_a_table_whose_log_is_gone_is_refused_not_emptied(spark, api, tmp_path):
    """Checkpoint records without the log they belong to are no interrupted commit: clean-up used
    to take every record for one and delete every data file (the Parquet folder's ``_checkpoints/``
    and ``_spark_metadata/``: ``table_format: parquet``)."""
    warehouse = tmp_path / "warehouse"
    for _ in range(2):  # two syncs: two commits at least
        assert sync(settings(api, warehouse, table_format="parquet"),
                    args=["--state-file", str(tmp_path / "state.json")]).returncode == 0
        api.touch("users", 3)
    table = users_table(warehouse)
    shutil.rmtree(os.path.join(table, "_spark_metadata"))  # copied without it, say
    before = sorted(os.listdir(table))
    output = sync(settings(api, warehouse, table_format="parquet"), args=["--state-file", str(tmp_path / "state.json")])
    assert output.returncode == 1
    (error,) = [m["trace"]["error"]["message"] for m in output.messages if m["type"] == "TRACE" and m["trace"]["type"] == "ERROR"]
    assert table in error and "are newer than its last committed one" in error and "nothing was deleted" in error
    assert sorted(os.listdir(table)) == before


def test_item_1_state_set_on_a_moved_warehouse_reads_the_table_where_it_is(spark, api, tmp_path):
    """``state set`` opens the table as ``read`` does: a moved table's log is pointed at its files
    first (it used to read the files where they had been, and fail)."""
    before = tmp_path / "before"
    state_file = str(tmp_path / "state.json")
    assert sync(settings(api, before), args=["--state-file", state_file]).returncode == 0
    after = tmp_path / "after"
    shutil.move(str(before), str(after))
    config_path = write_json(tmp_path / "config.json", settings(api, after))
    cursor = sorted(r["updatedAt"] for r in all_records(api, "users"))[120]
    assert state_command(config_path, "set", "--state-file", state_file, "--stream", "users", "--cursor", cursor) == 0
    assert len(ids(spark, users_table(after))) == 120
    assert sync(settings(api, after), args=["--state-file", state_file]).returncode == 0
    assert rows(spark, users_table(after)) == api_rows(api)


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
def test_item_2_a_set_after_a_reset_killed_before_it_cleared_the_mark_goes_on_from_the_cursor(spark, api, tmp_path):
    """The set's commit supersedes the reset: the next read goes on from the cursor set, it does
    not apply the reset (which would replace the rows the set kept with a new full read)."""
    case = StateCommandCase(spark, api, tmp_path)
    assert state_command(case.config_path, "reset", "--state-file", case.state_file, "--stream", "users") == 0
    cursor = case.cursor()
    promised = case.after_set(cursor)
    assert promised != api_rows(api)  # applying the reset would give this instead
    killed = kill_at("state.set.committed", "state", "set", "--state-file", case.state_file, "--config", case.config_path,
                     "--stream", "users", "--cursor", cursor)
    assert killed.paused, killed.stderr[-2000:]
    assert case.read().returncode == 0
    assert rows(spark, case.table) == promised


class StateCommandCase:
    """A synced users table and its state file, then 5 users updated in the API: what a state
    command is run on. ``as_was`` and ``after_*`` are the tables the next read must end with."""

    def __init__(self, spark, api, folder, table_format="delta"):
        self.api, self.config = api, settings(api, folder / "warehouse", table_format=table_format)
        self.config_path = write_json(folder / "config.json", self.config)
        self.state_file = str(folder / "state.json")
        self.table = users_table(folder / "warehouse")
        assert self.read().returncode == 0
        self.synced = rows(spark, self.table)
        self.touched = set(api.touch("users", 5))

    def read(self):
        return sync(self.config, args=["--state-file", self.state_file])

    def cursor(self):
        """A cursor with one touched user's old version before it and another's at it: every
        outcome below then differs from the others."""
        old = sorted(t for i, t in self.synced if i in self.touched)
        assert old[0] < old[-1]
        return old[-1] + "Z"

    def as_was(self):
        """The table as it was, and the next read from the old state: the updated users added."""
        return sorted(self.synced + [row for row in api_rows(self.api) if row not in self.synced])

    def after_reset(self):
        return api_rows(self.api)

    def after_set(self, cursor):
        """The rows before the cursor kept, every record from it read again, once."""
        cut = cursor.rstrip("Z")
        return sorted([r for r in self.synced if r[1] < cut] + [r for r in api_rows(self.api) if r[1] >= cut])


# (command, fault point, count, which table the next read must end with, table format): on the default
# (Delta) tables, but for the Parquet folder's own recovery step, which a Delta table does not have
STATE_COMMAND_KILLS = [
    ("reset", "state.reset.saved", 1, "promised", "delta"),
    ("reset --tables", "state.reset.marked", 1, "as was", "delta"),
    ("reset --tables", "state.reset.saved", 1, "promised", "delta"),
    ("reset --tables", "state.reset.deleting", 1, "promised", "delta"),  # moved aside, nothing deleted yet
    ("reset --tables", "state.reset.deleting", 4, "promised", "delta"),  # some of its files deleted
    ("set", "recovery.start", 1, "as was", "parquet"),
    ("set", "commit.files_written", 1, "as was", "delta"),
    ("set", "commit.done", 1, "promised", "delta"),  # (state.set.committed: the test of item 2 above kills it there)
    ("set", "state.set.truncated", 1, "promised", "delta"),
]


@pytest.mark.slow  # real processes, killed
@pytest.mark.parametrize("command, point, count, outcome, table_format", STATE_COMMAND_KILLS,
                         ids=[f"{c}:{p}:{n}:{f}" for c, p, n, _, f in STATE_COMMAND_KILLS])
def test_item_3_a_state_command_killed_at_any_step_leaves_the_promised_table_or_the_old_one(
    spark, api, tmp_path, command, point, count, outcome, table_format
):
    case = StateCommandCase(spark, api, tmp_path, table_format)
    args = ["state", *command.split(), "--state-file", case.state_file, "--config", case.config_path, "--stream", "users"]
    if command == "set":
        cursor = case.cursor()
        args += ["--cursor", cursor]
        promised = case.after_set(cursor)
    else:
        promised = case.after_reset()
    assert promised != case.as_was()
    killed = kill_at(point, *args, count=count)
    assert killed.paused, killed.stderr[-2000:]
    after = case.read()
    assert after.returncode == 0, after.messages[-3:]
    assert rows(spark, case.table) == (promised if outcome == "promised" else case.as_was())


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


def test_item_4_a_reset_that_finds_no_table_changes_nothing_and_creates_nothing(spark, api, tmp_path):
    config_path = write_json(tmp_path / "config.json", settings(api, tmp_path / "configured"))
    elsewhere, wrong = tmp_path / "elsewhere", tmp_path / "wrong"
    state_file = str(tmp_path / "state.json")
    assert sync(settings(api, elsewhere), args=["--state-file", state_file]).returncode == 0
    with open(state_file) as handle:
        before = handle.read()

    every_stream = run_in_process("state", "reset", "--state-file", state_file, "--config", config_path)
    assert every_stream.returncode == 1  # the file has a state for users, and users has no table there
    assert "'users': no table under" in every_stream.stderr and "--no-table" in every_stream.stderr
    assert state_command(config_path, "reset", "--state-file", state_file, "--warehouse", str(wrong)) == 1
    assert state_command(config_path, "reset", "--state-file", state_file, "--stream", "users", "--tables",
                         "--warehouse", str(wrong)) == 1
    with open(state_file) as handle:
        assert handle.read() == before
    assert not os.path.exists(wrong) and not os.path.exists(tmp_path / "configured")  # not even a lock file
    assert len(ids(spark, users_table(elsewhere))) == USERS

    assert state_command(config_path, "reset", "--state-file", state_file, "--warehouse", str(elsewhere)) == 0
    assert saved_states(state_file) == {}
    assert sync(settings(api, elsewhere), args=["--state-file", state_file]).returncode == 0
    assert rows(spark, users_table(elsewhere)) == api_rows(api)  # replaced, not appended to


def test_item_4_no_table_changes_only_the_state_file(api, tmp_path):
    config_path = write_json(tmp_path / "config.json", settings(api, tmp_path / "nowhere"))
    state_file = write_json(tmp_path / "state.json", {"users": {"updatedAt": "2025-03-01T00:00:00Z"}})
    assert state_command(config_path, "reset", "--state-file", state_file, "--no-table") == 0
    assert saved_states(state_file) == {}
    assert not os.path.exists(tmp_path / "nowhere")


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
    """The Parquet folder's reclaim (``retention_hours``; a Delta table's VACUUM keeps Delta's 7 days)."""
    dedup = catalog("users", overrides={"users": {"destination_sync_mode": "append_dedup"}})
    warehouse = tmp_path / "warehouse"
    keep = settings(api, warehouse, table_format="parquet")  # the default retention: hours
    state = None
    for _ in range(3):
        api.touch("users", 5)
        output = read(DemoSource(), keep, dedup, state=state)
        assert output.returncode == 0
        state = output.final_state_list()
    table = users_table(warehouse)
    parquet = [name for name in os.listdir(table) if name.endswith(".parquet")]
    commits = len(list(table_at(None, table).committed_checkpoints()))
    # Each run committed at least once (checkpoints waiting together for the committer are one
    # commit); each dedup commit replaced the table, and every replaced file is kept for now.
    assert commits >= 3 and len(parquet) == commits

    api.touch("users", 5)
    output = read(DemoSource(), settings(api, warehouse, retention_hours=0, table_format="parquet"), dedup, state=state)
    assert output.returncode == 0
    # The files replaced before this run are gone; the one this run's commit replaced stays for
    # the next run to reclaim (a reader may be reading it right now).
    assert len([name for name in os.listdir(table) if name.endswith(".parquet")]) == 2
    assert len(_live_files(table)) == 1
    assert sorted(ids(spark, table)) == sorted(r["id"] for r in all_records(api, "users"))


def _live_files(table):
    return table_at(None, table).live_files()



# -- 6. an update that kept its cursor value is not taken for the committed record -----------------------------


class SecondsApi:
    """A small HTTP API on 127.0.0.1 with second-granularity timestamps: ``GET /items?since=T``
    answers the items with ``updatedAt >= T``, oldest first. ``items`` may be changed between syncs."""

    def __init__(self, items):
        from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
        from urllib.parse import parse_qs, urlparse

        self.items = items
        api = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def do_GET(self):
                since = parse_qs(urlparse(self.path).query).get("since", [""])[0]
                data = sorted((i for i in api.items if i["updatedAt"] >= since), key=lambda i: (i["updatedAt"], i["id"]))
                body = json.dumps({"data": data}).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_port}/"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self):
        self.server.shutdown()
        self.server.server_close()


class Items(IncrementalHttpStream):
    cursor_field = "updatedAt"
    primary_key = "id"
    json_schema = {"type": "object", "properties": {"id": {"type": "integer"}, "name": {"type": "string"},
                                                    "updatedAt": {"type": "string", "format": "date-time"}}}

    def __init__(self, url):
        super().__init__()
        self._url = url

    @property
    def url_base(self):
        return self._url

    def path(self, **kwargs):
        return "items"

    def request_params(self, stream_state=None, next_page_token=None, **kwargs):
        return {"since": (stream_state or {}).get("updatedAt", "2025-01-01T00:00:00Z")}

    def next_page_token(self, response):
        return None

    def parse_response(self, response, **kwargs):
        yield from response.json()["data"]


class ItemsSource(Source):
    spec_json = {"connectionSpecification": {"type": "object", "properties": {"url": {"type": "string"}}}}

    def check_connection(self, logger, config):
        return True, None

    def streams(self, config):
        return [Items(config["url"])]


def items_catalog(mode):
    stream = {"name": "items", "json_schema": {}, "supported_sync_modes": ["incremental"], "source_defined_cursor": True,
              "default_cursor_field": ["updatedAt"], "source_defined_primary_key": [["id"]]}
    return {"streams": [{"stream": stream, "sync_mode": "incremental", "destination_sync_mode": mode,
                         "cursor_field": ["updatedAt"], "primary_key": [["id"]]}]}


def test_item_6_an_update_that_kept_its_cursor_second_ends_in_an_append_dedup_table(spark, tmp_path):
    last = "2025-03-01T10:00:05Z"  # three items share the newest second: the boundary a resumed sync reads again
    items = [{"id": i, "name": f"v1 of {i}", "updatedAt": "2025-03-01T10:00:00Z" if i <= 3 else last} for i in range(1, 7)]
    api = SecondsApi(items)
    try:
        config = {"url": api.url, "destination": {"type": "spark", "warehouse": str(tmp_path / "warehouse"), "spark_master": "local[1]"}}
        first = read(ItemsSource(), config, items_catalog("append_dedup"))
        assert first.returncode == 0
        assert first.final_states()["items"]["stream"]["stream_state"] == {"updatedAt": last}
        api.items[4] = {"id": 5, "name": "v2 of 5", "updatedAt": last}  # changed within the same second
        resumed = read(ItemsSource(), config, items_catalog("append_dedup"), state=first.final_state_list())
        assert resumed.returncode == 0
    finally:
        api.close()
    table = read_table(spark, table_path(str(tmp_path / "warehouse"), ItemsSource().name, "items"))
    assert sorted((r["id"], r["name"]) for r in table.collect()) == sorted((i["id"], i["name"]) for i in api.items)
    # the unchanged items at that second were skipped, not written again: one record in the resumed sync
    assert sum(int(s["sourceStats"]["recordCount"]) for s in resumed.states()) == 1


# -- 10 (decide and document). A state older than the table: resumed from the table, or read as given -----------


def test_read_from_state_as_given_reads_again_from_the_given_state_and_otherwise_the_log_names_the_checkpoint(spark, api, tmp_path):
    config = settings(api, tmp_path / "warehouse") | {"state_checkpoint_interval": 100}
    config_path = write_json(tmp_path / "config.json", config)
    catalog_path = write_json(tmp_path / "catalog.json", catalog("users"))
    first = run_in_process("read", "--config", config_path, "--catalog", catalog_path, "--concurrency", "1")
    assert first.returncode == 0
    oldest = [m["state"] for m in first.of_type("STATE")][0]  # a STATE the table has committed past
    given = write_json(tmp_path / "old_state.json", [oldest])
    newest = table_at(None, users_table(tmp_path / "warehouse")).last_checkpoint()

    resumed = run_in_process("read", "--config", config_path, "--catalog", catalog_path, "--state", given)
    assert resumed.returncode == 0
    assert f"is older than the table's checkpoint {newest.seq}" in resumed.stderr
    assert f"resuming from the table's state {json.dumps(newest.state, sort_keys=True)}" in resumed.stderr
    assert len(ids(spark, users_table(tmp_path / "warehouse"))) == USERS  # nothing read twice

    as_given = run_in_process("read", "--config", config_path, "--catalog", catalog_path, "--state", given, "--from-state-as-given")
    assert as_given.returncode == 0
    assert "as given (--from-state-as-given)" in as_given.stderr
    cursor = oldest["stream"]["stream_state"]["updatedAt"]
    again = [r for r in all_records(api, "users") if r["updatedAt"] >= cursor]
    assert 0 < len(again) < USERS
    assert len(ids(spark, users_table(tmp_path / "warehouse"))) == USERS + len(again)  # an append table: read again, once more


# -- 11. one stream's table cannot be opened: that stream fails, the others complete ----------------------------


def test_item_11_a_stream_whose_table_cannot_be_opened_fails_alone(spark, api, tmp_path):
    """A Parquet folder copied without its data files (``table_format: parquet``) cannot be opened."""
    original, broken = tmp_path / "original", tmp_path / "broken"
    assert sync(settings(api, original, table_format="parquet"), "users").returncode == 0
    for folder in ("_spark_metadata", "_checkpoints"):  # the users table copied without its data files
        shutil.copytree(os.path.join(users_table(original), folder), os.path.join(users_table(broken), folder))
    shutil.rmtree(original)
    output = sync(settings(api, broken, table_format="parquet"), "users", "stores", "products")
    assert output.returncode == 1
    statuses = {m["trace"]["stream_status"]["stream_descriptor"]["name"]: m["trace"]["stream_status"]["status"]
                for m in output.messages if m["type"] == "TRACE" and m["trace"]["type"] == "STREAM_STATUS"}
    assert statuses == {"users": "INCOMPLETE", "stores": "COMPLETE", "products": "COMPLETE"}
    (error,) = [m["trace"]["error"] for m in output.messages if m["type"] == "TRACE" and m["trace"]["type"] == "ERROR"]
    assert error["stream_descriptor"]["name"] == "users" and "not in its folder" in error["message"]
    assert len(ids(spark, table_path(str(broken), "demo", "stores"))) == len(all_records(api, "stores"))


# -- 12. a number under a token-like config name is no secret --------------------------------------------------


def test_item_12_a_number_under_a_token_like_name_never_fails_a_sync_or_garbles_its_logs(spark, api, tmp_path):
    config = settings(api, tmp_path / "warehouse") | {"token_ttl_minutes": 5, "secret_rotation_days": 30}
    config_path = write_json(tmp_path / "config.json", config)
    output = run_in_process("read", "--config", config_path, "--catalog", write_json(tmp_path / "catalog.json", catalog("users")))
    assert output.returncode == 0, output.stderr[-2000:]
    assert any("5" in json.dumps(state) for state in output.states.values())  # states that hold a 5 are emitted
    assert "****" not in output.stderr and API_KEY not in output.stderr


# -- 13. the state commands mask the config's secrets in their errors -----------------------------------------------


def test_item_13_state_command_errors_mask_the_configs_secrets(api, tmp_path):
    config_path = write_json(tmp_path / "config.json", settings(api, tmp_path / "warehouse"))
    state_file = write_json(tmp_path / "state.json", [])
    for args in (("--stream", "users", "--cursor", API_KEY), ("--stream", API_KEY, "--cursor", "2025-01-01T00:00:00Z")):
        output = run_in_process("state", "set", "--state-file", state_file, "--config", config_path, "--no-table", *args)
        assert output.returncode == 2
        assert "error: " in output.stderr and "****" in output.stderr and API_KEY not in output.stderr


# -- 14. every state a run prints, its state file and the next run accept it --------------------------------------


class Halves(Stream, CheckpointMixin):
    """Three records; the state holds text with a lone surrogate ("\\ud800": valid JSON, not Unicode)."""

    primary_key = "id"
    cursor_field = "n"

    def __init__(self):
        self._n, self.started_from = 0, None

    @property
    def name(self):
        return "halves"

    @property
    def state(self):
        return {"n": self._n, "label": "\ud800 half"}

    @state.setter
    def state(self, value):
        self._n, self.started_from = value.get("n", 0), dict(value)

    def get_json_schema(self):
        return {"type": "object", "properties": {"id": {"type": "integer"}, "n": {"type": "integer"}}}

    def read_records(self, sync_mode, cursor_field=None, stream_slice=None, stream_state=None):
        for n in range(self._n + 1, 4):
            self._n = n
            yield {"id": n, "n": n}


class HalvesSource(Source):
    spec_json = {"connectionSpecification": {"type": "object", "properties": {}}}

    def __init__(self):
        super().__init__()
        self.stream = Halves()

    def check_connection(self, logger, config):
        return True, None

    def streams(self, config):
        return [self.stream]


def test_item_14_a_state_with_a_lone_surrogate_goes_through_the_state_line_the_file_and_the_next_run(tmp_path):
    catalog_path = write_json(tmp_path / "catalog.json", {"streams": [
        {"stream": {"name": "halves", "json_schema": {}, "supported_sync_modes": ["incremental"]},
         "sync_mode": "incremental", "destination_sync_mode": "append", "cursor_field": ["n"]}]})
    args = ["--config", write_json(tmp_path / "config.json", {}), "--catalog", catalog_path, "--destination", "stdout",
            "--state-file", str(tmp_path / "state.json")]
    first = run_in_process("read", *args, source=HalvesSource())
    assert first.returncode == 0, first.stderr[-2000:]
    assert first.states["halves"]["stream"]["stream_state"] == {"n": 3, "label": "\ud800 half"}
    assert b'"\\ud800 half"' in first.stdout  # the STATE line: the JSON escape
    assert saved_states(tmp_path / "state.json") == {"halves": {"n": 3, "label": "\ud800 half"}}
    source = HalvesSource()
    second = run_in_process("read", *args, source=source)
    assert second.returncode == 0, second.stderr[-2000:]
    assert source.stream.started_from == {"n": 3, "label": "\ud800 half"} and not second.of_type("RECORD")


# -- 18. the state file's name in errors; the state commands leave the connector's API alone --------------------


def test_item_18_a_bad_state_file_is_named_in_the_error(api, tmp_path):
    config_path = write_json(tmp_path / "config.json", settings(api, tmp_path / "warehouse"))
    catalog_path = write_json(tmp_path / "catalog.json", catalog("users"))
    for name, content in (("wrong_shape.json", {"users": {"cursor": "no such field"}}), ("corrupt.json", "{not json")):
        path = str(tmp_path / name)
        with open(path, "w") as handle:
            handle.write(content if isinstance(content, str) else json.dumps(content))
        output = run_in_process("read", "--config", config_path, "--catalog", catalog_path, "--state-file", path)
        assert output.returncode == 2
        assert f"state file '{path}'" in output.stderr and "'None'" not in output.stderr


def test_item_18_the_state_commands_do_not_start_the_connectors_api(spark, api, tmp_path):
    from source_framework.demo import source as demo

    state_file = str(tmp_path / "state.json")
    assert sync(settings(api, tmp_path / "warehouse"), args=["--state-file", state_file]).returncode == 0
    embedded = settings(api, tmp_path / "warehouse") | {"api_url": "embedded", "api_key": "only-for-this-test-6d1f"}
    config_path = write_json(tmp_path / "embedded.json", embedded)
    cursor = sorted(r["updatedAt"] for r in all_records(api, "users"))[100]
    commands = [["show"], ["set", "--config", config_path, "--stream", "users", "--cursor", cursor],
                ["reset", "--config", config_path, "--stream", "users", "--tables"]]
    for command in commands:
        output = run_in_process("state", *command, "--state-file", state_file)
        assert output.returncode == 0, output.stderr[-2000:]
    assert not [key for key in demo._embedded_apis if key[0] == "only-for-this-test-6d1f"]  # the demo API never started
    assert not os.path.exists(users_table(tmp_path / "warehouse"))


# -- 15. the state commands check the config as read does ------------------------------------------------------------


@pytest.mark.parametrize("action", [("reset", "--stream", "users"), ("set", "--stream", "users", "--cursor", "2025-01-01T00:00:00Z")])
def test_item_15_state_commands_refuse_a_config_the_spec_refuses_with_a_clear_error(api, tmp_path, action):
    """A config ``read`` would refuse (a page size that is not a number) is refused by ``state reset``
    and ``state set`` the same way: one line naming the config file, exit 2, the state file as it was."""
    config_path = write_json(tmp_path / "config.json", settings(api, tmp_path / "warehouse") | {"page_size": "abc"})
    state = [{"type": "STREAM", "stream": {"stream_descriptor": {"name": "users"}, "stream_state": {"updatedAt": "2025-03-01T00:00:00Z"}}}]
    state_file = write_json(tmp_path / "state.json", state)
    output = run_in_process("state", action[0], "--state-file", state_file, "--config", config_path, "--no-table", *action[1:])
    assert output.returncode == 2, output.stderr[-2000:]
    assert f"error: config file '{config_path}' does not match the connector's spec" in output.stderr
    assert "Traceback" not in output.stderr
    assert json.loads(open(state_file).read()) == state


class StreamsRaise(DemoSource):
    def streams(self, config):
        raise ValueError(f"cannot build streams for {config['api_url']}")


def test_item_15_a_source_whose_streams_raise_gets_a_clear_error_from_the_state_commands(api, tmp_path):
    config_path = write_json(tmp_path / "config.json", settings(api, tmp_path / "warehouse"))
    state_file = write_json(tmp_path / "state.json", [])
    output = run_in_process("state", "reset", "--state-file", state_file, "--config", config_path, "--no-table",
                            source=StreamsRaise())
    assert output.returncode == 2, output.stderr[-2000:]
    assert "error: the source's streams() raised ValueError: cannot build streams for http" in output.stderr
    assert "Traceback" not in output.stderr


# -- 16. a Spark Connect URL's token and headers stay out of a read's output ----------------------------------------


def test_item_16_a_spark_connect_urls_token_and_headers_never_reach_the_output(api, tmp_path):
    """pyspark refuses a token with ``=`` padding and quotes the URL in its error; a header such as
    ``;x-api-key=`` is a secret too (found in review: both were printed in clear)."""
    master = "sc://localhost:1/;x-api-key=HeaderSecret0042;token=U3VwZXJTZWNyZXRUb2tlbjQy=="
    config_path = write_json(tmp_path / "config.json", settings(api, tmp_path / "warehouse", spark_master=master, writer="spark"))
    output = run_in_process("read", "--config", config_path, "--catalog", write_json(tmp_path / "catalog.json", catalog("users")))
    assert output.returncode != 0
    shown = json.dumps(output.messages) + output.stderr
    assert "Spark did not start" in shown
    assert "HeaderSecret0042" not in shown and "U3VwZXJTZWNyZXRUb2tlbjQy" not in shown


# -- 17. a Spark Connect server that does not answer stops the sync in bounded time ------------------------------------


def test_item_17_a_spark_connect_server_that_stops_answering_ends_the_sync_instead_of_hanging(api, tmp_path):
    """pyspark's own retries wait about 10 minutes per call; each stream then waited its own
    (found in review: 13 min for one sync whose server died). Nothing listens at the URL here,
    which is what a dead server looks like to the client; ``test_spark_cluster`` kills a real one
    in the middle of a sync."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]  # closed again: connections are refused
    config_path = write_json(tmp_path / "config.json", settings(
        api, tmp_path / "warehouse", spark_master=f"sc://127.0.0.1:{port}", writer="spark", connect_retry_seconds=2))
    run = run_main("read", "--config", config_path, "--catalog", write_json(tmp_path / "catalog.json", catalog("users", "stores")),
                   timeout=150)
    assert run.returncode == 1, run.stderr[-2000:]
    assert not run.of_type("STATE")  # nothing committed, nothing claimed
    errors = [m["trace"]["error"]["message"] for m in run.of_type("TRACE") if m["trace"]["type"] == "ERROR"]
    assert len(errors) == 2 and all("Spark did not start" in error for error in errors), errors


# -- 18. a field the schema does not declare does not make a re-read record new ---------------------------------------


class UsersStampedOnRead(UnderDemoName, Users):
    """Each record read carries the moment it was read, a field the schema does not declare (as an
    ``AddFields`` of ``{{ now_utc() }}`` in a manifest does): it gets no column."""

    demo_name = "users"

    def parse_response(self, response, **kwargs):
        for record in super().parse_response(response, **kwargs):
            yield {**record, "fetched_at": time.time_ns()}


class StampedSource(DemoSource):
    def streams(self, config):
        return [UsersStampedOnRead(config)]


def test_item_18_a_re_read_record_that_differs_only_in_an_undeclared_field_is_not_written_again(spark, api, tmp_path):
    """The record at the state's cursor is read again by the next sync; its row would be identical
    column for column, but the skip compared whole records, undeclared fields included, so every
    sync wrote it once more (found in review)."""
    config = settings(api, tmp_path / "warehouse")
    first = sync(config, state=None, source=StampedSource())
    assert first.returncode == 0, first.messages[-3:]
    second = sync(config, state=first.final_state_list(), source=StampedSource())
    assert second.returncode == 0, second.messages[-3:]
    table = rows(spark, users_table(tmp_path / "warehouse"))
    assert len(table) == len(set(table)) == USERS


# -- 19. records a lookback window reads again are not written again ----------------------------------------------------


class OrdersWithLookback(UnderDemoName, Orders):
    """Each sync re-reads the five days before its state (``DateWindowStream.lookback``), as
    connectors do for records that arrive late; ``fail_after``: the sync dies after that many."""

    demo_name = "orders"
    lookback = dt.timedelta(days=5)
    fail_after: int | None = None

    def parse_response(self, response, **kwargs):
        for record in super().parse_response(response, **kwargs):
            if self.fail_after is not None:
                if self.fail_after == 0:
                    raise RuntimeError("the API went away")
                self.fail_after -= 1
            yield record


class LookbackSource(DemoSource):
    def __init__(self, fail_after: int | None = None) -> None:
        super().__init__()
        self.fail_after = fail_after

    def streams(self, config):
        orders = OrdersWithLookback(config)
        orders.fail_after = self.fail_after
        return [orders]


def order_rows(spark, warehouse):
    return rows(spark, table_path(str(warehouse), "demo", "orders"))


def api_orders(api):
    return api_rows(api, "orders", {"start": "2000-01-01T00:00:00Z", "end": "2100-01-01T00:00:00Z"})


def test_item_19_the_next_sync_writes_no_record_its_lookback_reads_again_unchanged(spark, api, tmp_path):
    """airbyte-cdk emits the lookback window's records again on every sync; in a table they were
    rows written twice. A record updated since is a new version and is written."""
    config = settings(api, tmp_path / "warehouse")
    first = sync(config, "orders", source=LookbackSource())
    assert first.returncode == 0, first.messages[-3:]
    second = sync(config, "orders", state=first.final_state_list(), source=LookbackSource())
    assert second.returncode == 0, second.messages[-3:]
    table = order_rows(spark, tmp_path / "warehouse")
    assert table == api_orders(api)  # every order once
    api.touch("orders", 3)
    third = sync(config, "orders", state=second.final_state_list(), source=LookbackSource())
    assert third.returncode == 0, third.messages[-3:]
    table = order_rows(spark, tmp_path / "warehouse")
    assert len(table) == len(set(table)) == USERS + 3 and set(api_orders(api)) <= set(table)


def test_item_19_a_sync_resumed_after_it_died_writes_nothing_its_lookback_reads_again(spark, api, tmp_path):
    config = settings(api, tmp_path / "warehouse")
    died = sync(config, "orders", source=LookbackSource(fail_after=150))
    assert died.returncode == 1 and died.final_state_list(), died.messages[-3:]
    resumed = sync(config, "orders", state=died.final_state_list(), source=LookbackSource())
    assert resumed.returncode == 0, resumed.messages[-3:]
    assert order_rows(spark, tmp_path / "warehouse") == api_orders(api)  # as one uninterrupted sync: each once


class KeylessOrdersWithLookback(OrdersWithLookback):
    """The same stream without a primary key (an event log): a record read again can be known by
    its data alone."""

    primary_key = None


class KeylessLookbackSource(LookbackSource):
    def streams(self, config):
        orders = KeylessOrdersWithLookback(config)
        orders.fail_after = self.fail_after
        return [orders]


KEYLESS = {"orders": {"primary_key": []}}


def keyless_sync(config, state=None, fail_after=None):
    return read(KeylessLookbackSource(fail_after), config, catalog("orders", overrides=KEYLESS), state=state)


def test_item_19_without_a_primary_key_the_lookback_window_is_not_written_again(spark, api, tmp_path):
    """Found in review: without a key, records read again below the cursor could not be looked up
    and every sync wrote its lookback window once more. They are now found by their data, each
    row of an earlier sync answering for one record read again."""
    config = settings(api, tmp_path / "warehouse")
    first = keyless_sync(config)
    assert first.returncode == 0, first.messages[-3:]
    second = keyless_sync(config, state=first.final_state_list())
    assert second.returncode == 0, second.messages[-3:]
    assert order_rows(spark, tmp_path / "warehouse") == api_orders(api)
    before = order_rows(spark, tmp_path / "warehouse")
    api.touch("orders", 3)  # three new versions: without a key, new rows beside the old ones
    third = keyless_sync(config, state=second.final_state_list())
    assert third.returncode == 0, third.messages[-3:]
    assert order_rows(spark, tmp_path / "warehouse") == sorted(before + [row for row in api_orders(api) if row not in before])


def test_item_19_without_a_primary_key_a_resumed_sync_writes_nothing_its_lookback_reads_again(spark, api, tmp_path):
    config = settings(api, tmp_path / "warehouse")
    died = keyless_sync(config, fail_after=150)
    assert died.returncode == 1 and died.final_state_list(), died.messages[-3:]
    resumed = keyless_sync(config, state=died.final_state_list())
    assert resumed.returncode == 0, resumed.messages[-3:]
    assert order_rows(spark, tmp_path / "warehouse") == api_orders(api)
