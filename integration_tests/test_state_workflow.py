"""The state workflow: --state-file, ``state show/reset/set``, bad-state fallback, sort safety, API faults.

The commands run in this process (``run_in_process``: the same command line and runtime, on the test
run's Spark session); the kills of state commands are in ``test_data_safety.py``."""

from __future__ import annotations

import datetime as dt
import json
import os

import pytest

from integration_tests.conftest import (
    API_KEY,
    all_records,
    catalog,
    config_for,
    landed_rows,
    read_table,
    run_in_process,
    stream_states,
    table_at,
    write_json,
)
from integration_tests.test_records_read_again import Items, ItemsApi, ItemsSource, items_catalog
from source_framework.demo.api import DemoApi, Faults
from source_framework.demo.source import DemoSource

pytestmark = pytest.mark.slow  # many syncs and state commands: the quick tier (-m "not slow") leaves it out


def ids(spark, warehouse, name):
    return sorted(r["id"] for r in landed_rows(spark, os.path.join(str(warehouse), "demo", name)))


def test_state_file_reset_and_set_keep_tables_consistent(spark, demo_api, tmp_path):
    warehouse = tmp_path / "warehouse"
    config = write_json(tmp_path / "config.json", config_for(demo_api, warehouse))
    catalog_path = write_json(tmp_path / "catalog.json", catalog("users", "store_orders"))
    state_file = str(tmp_path / "state.json")
    expected_users = sorted(r["id"] for r in all_records(demo_api, "users"))

    first = run_in_process("read", "--config", config, "--catalog", catalog_path, "--state-file", state_file)
    assert first.returncode == 0, first.stderr
    with open(state_file) as handle:
        saved = {m["stream"]["stream_descriptor"]["name"]: m["stream"]["stream_state"] for m in json.load(handle)}
    assert saved["users"] == first.states["users"]["stream"]["stream_state"]
    assert not [name for name in os.listdir(tmp_path) if name.endswith(".tmp")]

    # Re-running with the same file and no bookkeeping adds nothing.
    again = run_in_process("read", "--config", config, "--catalog", catalog_path, "--state-file", state_file)
    assert again.returncode == 0 and ids(spark, warehouse, "users") == expected_users

    shown = run_in_process("state", "show", "--state-file", state_file)
    assert shown.returncode == 0
    assert {m["state"]["stream"]["stream_descriptor"]["name"] for m in shown.of_type("STATE")} == {"users", "store_orders"}

    # Reset one stream: its state goes, and its next sync replaces the table instead of adding a copy.
    reset = run_in_process("state", "reset", "--state-file", state_file, "--config", config, "--stream", "users")
    assert reset.returncode == 0, reset.stderr
    with open(state_file) as handle:
        assert [m["stream"]["stream_descriptor"]["name"] for m in json.load(handle)] == ["store_orders"]
    after_reset = run_in_process("read", "--config", config, "--catalog", catalog_path, "--state-file", state_file)
    assert after_reset.returncode == 0, after_reset.stderr
    assert ids(spark, warehouse, "users") == expected_users

    # Set the cursor back: rows from there are dropped now and read again once by the next sync.
    cursor = sorted(r["updatedAt"] for r in all_records(demo_api, "users"))[1000]
    moved = run_in_process("state", "set", "--state-file", state_file, "--config", config, "--stream", "users", "--cursor", cursor)
    assert moved.returncode == 0, moved.stderr
    assert len(ids(spark, warehouse, "users")) == 1000
    resynced = run_in_process("read", "--config", config, "--catalog", catalog_path, "--state-file", state_file)
    assert resynced.returncode == 0, resynced.stderr
    assert ids(spark, warehouse, "users") == expected_users
    assert sum(int(state["sourceStats"]["recordCount"]) for state in stream_states(resynced, "users")) == 500

    # Reset everything with the tables.
    wiped = run_in_process("state", "reset", "--state-file", state_file, "--config", config, "--tables")
    assert wiped.returncode == 0 and not os.path.exists(os.path.join(str(warehouse), "demo", "users"))


def test_state_set_after_a_crash_moves_the_partitions_the_table_committed_beyond_the_state_file(spark, tmp_path):
    """A run killed after a commit whose STATE it never printed leaves the table ahead of the state
    file, with partitions the file has not heard of (read ahead at concurrency 4, one commit took
    stores 3-10 at once). ``state set`` kept those stores' rows before the cursor but left them out
    of the new state, so the next sync read them from the start and wrote 600 of 1,500 orders twice
    (found in review)."""
    from source_framework.helpers.faults import SimulatedCrash, crash_at

    warehouse = tmp_path / "warehouse"
    state_file = str(tmp_path / "state.json")
    with DemoApi(records=1500, api_key=API_KEY, seed=7).start() as api:
        config = write_json(tmp_path / "config.json", config_for(api, warehouse, state_checkpoint_interval=1_000_000))
        catalog_path = write_json(tmp_path / "catalog.json", catalog("store_orders"))
        read = ("read", "--config", config, "--catalog", catalog_path, "--state-file", state_file, "--concurrency", "4")
        with crash_at("commit.done", 2):  # the second commit is published; its STATE never leaves
            try:
                run_in_process(*read)
            except SimulatedCrash:
                pass
        with open(state_file) as handle:
            in_file = [p["partition"] for m in json.load(handle) for p in m["stream"]["stream_state"]["states"]]
        table = os.path.join(str(warehouse), "demo", "store_orders")
        in_table = [p["partition"] for p in table_at(spark, table).last_checkpoint().state["states"]]
        assert len(in_table) > len(in_file)  # the crash this test is about

        cursors = sorted(r["updatedAt"] for r in all_records(api, "orders"))
        cursor = cursors[len(cursors) // 2]
        moved = run_in_process("state", "set", "--state-file", state_file, "--config", config,
                               "--stream", "store_orders", "--cursor", cursor)
        assert moved.returncode == 0, moved.stderr
        with open(state_file) as handle:
            moved_state = json.load(handle)[0]["stream"]["stream_state"]
        assert sorted(p["partition"]["store_id"] for p in moved_state["states"]) == sorted(p["store_id"] for p in in_table)
        assert {p["cursor"]["updatedAt"] for p in moved_state["states"]} == {cursor}

        done = run_in_process(*read)
        assert done.returncode == 0, done.stderr
        expected = sorted(r["id"] for r in all_records(api, "orders"))
    assert ids(spark, warehouse, "store_orders") == expected


class ResetUsersMeanwhile(DemoSource):
    """The demo source whose first ``streams()`` call, made by ``read`` after it loaded the state file
    and before it locked its tables, runs ``state reset --stream users --tables`` on that file."""

    def __init__(self, state_file, config):
        super().__init__()
        self.state_file, self.config, self.reset_done = state_file, config, False

    def streams(self, config):
        if not self.reset_done:
            self.reset_done = True
            reset = run_in_process("state", "reset", "--state-file", self.state_file, "--config", self.config,
                                   "--stream", "users", "--tables")
            assert reset.returncode == 0, reset.stderr
        return super().streams(config)


def test_a_reset_while_another_stream_syncs_with_the_same_state_file_is_not_undone(spark, tmp_path):
    """A cron ``read`` of orders and an operator's ``state reset --stream users --tables`` on the same
    state file: the read had loaded the file before the reset, and each of its checkpoints wrote its
    whole copy back, users' old cursor included. The next users sync then started from that cursor
    into the emptied table: 599 of its 600 rows were gone (found in review)."""
    with DemoApi(records=600, api_key=API_KEY, seed=7).start() as api:
        warehouse = tmp_path / "warehouse"
        config = write_json(tmp_path / "config.json", config_for(api, warehouse))
        users = write_json(tmp_path / "users.json", catalog("users"))
        orders = write_json(tmp_path / "orders.json", catalog("orders"))
        state_file = str(tmp_path / "state.json")
        assert run_in_process("read", "--config", config, "--catalog", users, "--state-file", state_file).returncode == 0

        meanwhile = run_in_process("read", "--config", config, "--catalog", orders, "--state-file", state_file,
                                   source=ResetUsersMeanwhile(state_file, config))
        assert meanwhile.returncode == 0, meanwhile.stderr
        with open(state_file) as handle:
            assert [m["stream"]["stream_descriptor"]["name"] for m in json.load(handle)] == ["orders"]
        again = run_in_process("read", "--config", config, "--catalog", users, "--state-file", state_file)
        assert again.returncode == 0, again.stderr
        assert ids(spark, warehouse, "users") == sorted(r["id"] for r in all_records(api, "users"))


def test_a_reset_of_the_stream_a_read_waits_to_lock_is_not_undone(spark, tmp_path):
    """A cron ``read`` of users loads the state file, then waits for the users table's lock (held by an
    operator's ``state reset --stream users --tables``). Once it had the lock, it synced from the cursor
    it had loaded into the emptied table: every row before that cursor was gone (found in review)."""
    with DemoApi(records=600, api_key=API_KEY, seed=7).start() as api:
        warehouse = tmp_path / "warehouse"
        config = write_json(tmp_path / "config.json", config_for(api, warehouse))
        users = write_json(tmp_path / "users.json", catalog("users"))
        state_file = str(tmp_path / "state.json")
        assert run_in_process("read", "--config", config, "--catalog", users, "--state-file", state_file).returncode == 0

        meanwhile = run_in_process("read", "--config", config, "--catalog", users, "--state-file", state_file,
                                   source=ResetUsersMeanwhile(state_file, config))
        assert meanwhile.returncode == 0, meanwhile.stderr
        assert "changed while this run waited for its tables" in meanwhile.stderr
        assert ids(spark, warehouse, "users") == sorted(r["id"] for r in all_records(api, "users"))


def test_bad_state_fails_by_default_and_resyncs_only_when_asked(spark, demo_api, tmp_path):
    warehouse = tmp_path / "warehouse"
    config = write_json(tmp_path / "config.json", config_for(demo_api, warehouse))
    catalog_path = write_json(tmp_path / "catalog.json", catalog("users"))
    first = run_in_process("read", "--config", config, "--catalog", catalog_path)
    assert first.returncode == 0
    bad = write_json(tmp_path / "bad.json", {"users": {"cursor": "wrong key"}})

    refused = run_in_process("read", "--config", config, "--catalog", catalog_path, "--state", bad)
    assert refused.returncode == 2 and "bad.json" in refused.stderr

    resynced = run_in_process("read", "--config", config, "--catalog", catalog_path, "--state", bad, "--on-bad-state", "resync")
    assert resynced.returncode == 0, resynced.stderr
    assert "re-syncs from scratch" in resynced.stderr
    assert ids(spark, warehouse, "users") == sorted(r["id"] for r in all_records(demo_api, "users"))


def test_a_state_file_that_does_not_exist_is_an_error_even_with_resync(demo_api, tmp_path):
    """A mistyped ``--state`` path is no bad state to rebuild every table over: it is refused."""
    config = write_json(tmp_path / "config.json", config_for(demo_api, tmp_path / "warehouse"))
    catalog_path = write_json(tmp_path / "catalog.json", catalog("users"))
    missing = str(tmp_path / "stat.json")
    for resync in ((), ("--on-bad-state", "resync")):
        run = run_in_process("read", "--config", config, "--catalog", catalog_path, "--state", missing, *resync)
        assert run.returncode == 2, run.stderr
        assert f"state file '{missing}' does not exist" in run.stderr
        assert not (tmp_path / "warehouse").exists()


def test_resync_keeps_an_unreadable_state_file_in_place_until_the_run_gets_going(spark, demo_api, tmp_path):
    """``--on-bad-state resync`` with an unreadable ``--state-file``: a run that other bad input stops
    leaves the file as it was; a run that syncs keeps it as ``.corrupt`` and starts a new one."""
    warehouse = tmp_path / "warehouse"
    config = write_json(tmp_path / "config.json", config_for(demo_api, warehouse))
    state_file = tmp_path / "state.json"
    state_file.write_text("{not json")
    users = catalog("users")
    users["streams"][0]["stream"]["name"] = "nope"
    unknown = write_json(tmp_path / "unknown.json", users)

    stopped = run_in_process("read", "--config", config, "--catalog", unknown, "--state-file", str(state_file),
                             "--on-bad-state", "resync")
    assert stopped.returncode == 2 and "names stream 'nope'" in stopped.stderr, stopped.stderr
    assert state_file.read_text() == "{not json" and not os.path.exists(f"{state_file}.corrupt")

    resynced = run_in_process("read", "--config", config, "--catalog", write_json(tmp_path / "catalog.json", catalog("users")),
                              "--state-file", str(state_file), "--on-bad-state", "resync")
    assert resynced.returncode == 0, resynced.stderr
    assert open(f"{state_file}.corrupt").read() == "{not json"
    with open(state_file) as handle:
        assert [m["stream"]["stream_state"] for m in json.load(handle)] == [resynced.states["users"]["stream"]["stream_state"]]
    assert ids(spark, warehouse, "users") == sorted(r["id"] for r in all_records(demo_api, "users"))


def test_sort_safety_with_out_of_order_pages(spark, tmp_path):
    with DemoApi(records=600, api_key=API_KEY, seed=5, faults=Faults(unsorted_pages=True)).start() as api:
        catalog_path = write_json(tmp_path / "catalog.json", catalog("users"))
        sorted_wh = tmp_path / "sorted"
        declared_sorted = write_json(tmp_path / "a.json", config_for(api, sorted_wh, state_checkpoint_interval=50))
        run = run_in_process("read", "--config", declared_sorted, "--catalog", catalog_path)
        assert run.returncode == 1
        error = [m["trace"]["error"] for m in run.of_type("TRACE") if m["trace"]["type"] == "ERROR"][0]
        assert "declared sorted" in error["message"] or "declared sorted" in error["internal_message"]
        assert not run.of_type("STATE")

        unsorted_wh = tmp_path / "unsorted"
        declared_unsorted = write_json(
            tmp_path / "b.json", config_for(api, unsorted_wh, state_checkpoint_interval=50, assume_sorted=False)
        )
        run = run_in_process("read", "--config", declared_unsorted, "--catalog", catalog_path)
        assert run.returncode == 0, run.stderr
        assert "state_checkpoint_interval (50) is not used" in run.stderr
        assert len(run.of_type("STATE")) == 1  # only when the stream (one slice) completes
        assert ids(spark, unsorted_wh, "users") == sorted(r["id"] for r in all_records(api, "users"))


def test_rate_limits_and_server_errors_are_retried(spark, tmp_path):
    # airbyte-cdk sleeps a second more than each retry asks: a handful of faults, not dozens.
    faults = Faults(rate_limit_every=11, retry_after=0.2, error_every=13)
    with DemoApi(records=200, api_key=API_KEY, seed=9, faults=faults).start() as api:
        warehouse = tmp_path / "warehouse"
        config = write_json(tmp_path / "config.json", config_for(api, warehouse))
        catalog_path = write_json(tmp_path / "k.json", catalog("users", "orders"))
        run = run_in_process("read", "--config", config, "--catalog", catalog_path)
        assert run.returncode == 0, run.stderr[-2000:]
        statuses = api.stats()["status_counts"]
        assert int(statuses.get("429", 0)) > 0 and sum(int(statuses.get(c, 0)) for c in ("500", "503")) > 0
        api.set_faults(Faults())
        assert ids(spark, warehouse, "users") == sorted(r["id"] for r in all_records(api, "users"))
        assert ids(spark, warehouse, "orders") == sorted(r["id"] for r in all_records(api, "orders"))


def test_state_set_on_a_partition_state_without_its_partition_is_a_clear_error(tmp_path, demo_api):
    """An entry of ``states`` with no ``partition`` raised a bare KeyError from ``state set``: a
    traceback and exit 1 (found in review)."""
    state_file = write_json(tmp_path / "state.json", [{"type": "STREAM", "stream": {
        "stream_descriptor": {"name": "store_orders"}, "stream_state": {"states": [{"cursor": {"updatedAt": "2025-01-01T00:00:00Z"}}]}}}])
    config = write_json(tmp_path / "config.json", config_for(demo_api, tmp_path / "warehouse"))
    moved = run_in_process("state", "set", "--state-file", state_file, "--config", config, "--stream", "store_orders",
                           "--cursor", "2025-02-01T00:00:00Z", "--no-table")
    assert moved.returncode == 2
    assert "state.json" in moved.stderr and "partition" in moved.stderr and "Traceback" not in moved.stderr


# -- issue 49, item 6: ``state set`` splits the table as the sync orders cursors ----------------------------


class TextItems(Items):
    """Items whose cursor column is text: the schema declares no date-time format."""

    json_schema = {"type": "object", "properties": {"id": {"type": "integer"}, "name": {"type": "string"},
                                                    "updatedAt": {"type": "string"}}}

    @property
    def name(self):
        return "items"


class TextItemsSource(ItemsSource):
    stream_class = TextItems


def test_item_6_state_set_on_a_text_cursor_with_offsets_keeps_the_rows_before_the_instant(spark, tmp_path):
    """The rows were compared with the cursor as text: ``…T02:00:00+05:00`` (before the cursor's
    instant) was deleted and never read again, ``…T00:30:00Z`` and ``…T23:30:00-02:00`` (after it)
    were kept and read again, twice in the table."""
    cursor = "2025-03-01T01:00+02:00"  # 2025-02-28T23:00:00Z
    api = ItemsApi([  # in the order of their instants, as the API sends them
        {"id": 4, "name": "before, basic format", "updatedAt": "20250228"},
        {"id": 2, "name": "before, east of UTC", "updatedAt": "2025-03-01T02:00:00+05:00"},
        {"id": 1, "name": "before", "updatedAt": "2025-02-28T22:30:00Z"},
        {"id": 3, "name": "before, no zone (UTC)", "updatedAt": "2025-02-28 22:59:59.5"},
        {"id": 5, "name": "at the cursor", "updatedAt": "2025-02-28T23:00:00Z"},
        {"id": 6, "name": "after", "updatedAt": "2025-03-01T00:30:00Z"},
        {"id": 7, "name": "after, west of UTC", "updatedAt": "2025-02-28T23:30:00-02:00"},
        {"id": 8, "name": "no date", "updatedAt": None},
    ])
    try:
        warehouse = tmp_path / "warehouse"
        config = write_json(tmp_path / "config.json", {"url": api.url, "destination": {
            "type": "spark", "warehouse": str(warehouse), "spark_master": "local[1]"}})
        catalog_path = write_json(tmp_path / "catalog.json", items_catalog("append"))
        state_file = str(tmp_path / "state.json")
        read = ("read", "--config", config, "--catalog", catalog_path, "--state-file", state_file)
        assert run_in_process(*read, source=TextItemsSource()).returncode == 0
        moved = run_in_process("state", "set", "--state-file", state_file, "--config", config, "--stream", "items",
                               "--cursor", cursor, source=TextItemsSource())
        assert moved.returncode == 0, moved.stderr
        path = os.path.join(str(warehouse), TextItemsSource().name, "items")
        assert sorted(r["id"] for r in read_table(spark, path).collect()) == [1, 2, 3, 4, 8]
        again = run_in_process(*read, source=TextItemsSource())
        assert again.returncode == 0, again.stderr
    finally:
        api.close()
    assert sorted(r["id"] for r in read_table(spark, path).collect()) == list(range(1, 9))


def test_item_6_state_set_on_a_timestamp_cursor_takes_an_offset_without_seconds(spark, demo_api, tmp_path):
    """Spark could not cast ``…T01:00+02:00`` to a timestamp: the command failed."""
    from source_framework.streams.cursor import parse_datetime

    warehouse = tmp_path / "warehouse"
    config = write_json(tmp_path / "config.json", config_for(demo_api, warehouse))
    catalog_path = write_json(tmp_path / "catalog.json", catalog("users"))
    state_file = str(tmp_path / "state.json")
    read = ("read", "--config", config, "--catalog", catalog_path, "--state-file", state_file)
    assert run_in_process(*read).returncode == 0
    records = all_records(demo_api, "users")
    middle = parse_datetime(sorted(r["updatedAt"] for r in records)[len(records) // 2]).replace(second=0)
    east = dt.timezone(dt.timedelta(hours=2))
    cursor = middle.astimezone(east).strftime("%Y-%m-%dT%H:%M+02:00")
    moved = run_in_process("state", "set", "--state-file", state_file, "--config", config, "--stream", "users", "--cursor", cursor)
    assert moved.returncode == 0, moved.stderr
    before = sorted(r["id"] for r in records if parse_datetime(r["updatedAt"]) < middle)
    assert ids(spark, warehouse, "users") == before
    assert run_in_process(*read).returncode == 0
    assert ids(spark, warehouse, "users") == sorted(r["id"] for r in records)


@pytest.mark.parametrize(("table_format", "writer"), [("delta", "arrow"), ("parquet", "arrow"), ("delta", "spark"),
                                                   ("delta", "arrow, too big"), ("parquet", "arrow, too big")])
def test_item_6_state_set_keeps_the_rows_before_the_cursor_and_starts_no_jvm_for_a_table_written_with_arrow(
        spark, demo_api, tmp_path, monkeypatch, table_format, writer):
    """``state set`` on a table the sync wrote with Arrow runs as a process of its own that starts no
    JVM (a stand-in ``java`` would leave a trace); on one Spark writes, or one too big to split in
    memory, in Spark. Either way the table keeps exactly the rows before the cursor, and the next
    sync reads the rest once."""
    import subprocess
    import sys

    from integration_tests.conftest import MAIN
    from integration_tests.test_tables_command import no_jvm_environment
    from source_framework.destinations.spark import destination
    from source_framework.destinations.spark.cursor_order import spark_rows_before
    from source_framework.streams.cursor import parse_datetime

    warehouse = tmp_path / "warehouse"
    settings = config_for(demo_api, warehouse)
    settings["destination"].update(table_format=table_format, writer=writer.partition(",")[0])
    config = write_json(tmp_path / "config.json", settings)
    catalog_path = write_json(tmp_path / "catalog.json", catalog("users"))
    state_file = str(tmp_path / "state.json")
    read = ("read", "--config", config, "--catalog", catalog_path, "--state-file", state_file)
    assert run_in_process(*read).returncode == 0
    records = all_records(demo_api, "users")
    cursor = sorted(r["updatedAt"] for r in records)[700]
    command = ["state", "set", "--state-file", state_file, "--config", config, "--stream", "users", "--cursor", cursor]
    if writer == "arrow":
        env, marker = no_jvm_environment(tmp_path)
        moved = subprocess.run([sys.executable, MAIN, *command], capture_output=True, env=env, timeout=300)
        assert moved.returncode == 0, moved.stderr.decode(errors="replace")[-3000:]
        assert not marker.exists(), f"state set started Java: {marker.read_text()}"
    else:
        split_by_spark = []
        monkeypatch.setattr(destination, "spark_rows_before", lambda *args: split_by_spark.append(args) or spark_rows_before(*args))
        if writer.endswith("too big"):
            monkeypatch.setattr(destination, "ARROW_REWRITE_BYTES", 1000)  # (less than any Parquet file of 1,000 users)
        assert run_in_process(*command).returncode == 0
        assert len(split_by_spark) == 1
    assert ids(spark, warehouse, "users") == sorted(r["id"] for r in records if parse_datetime(r["updatedAt"]) < parse_datetime(cursor))
    assert run_in_process(*read).returncode == 0
    assert ids(spark, warehouse, "users") == sorted(r["id"] for r in records)


ODD_CURSORS = [
    None, "", "abc", "Z", "9abc", "12345", "2025", "20250301", "20250301T010000Z", "2025-03-01", "2025-02-28",
    "2025-03-01T01:00+02:00", "2025-03-01T01:00:00+02:00", "2025-03-01 00:59:59", "2025-02-28T23:00:00.000001Z",
    "2025-02-28T22:59:59.999999Z", "2025-02-28T23:00:00,5Z", "2025-02-28T23:00:00.1234567Z", "2025-03-01T01:00:00+19:00",
    "2025-03-01T18:00:00+19:00", "2025-02-30T00:00:00Z", "2025-03-01T24:00:00", "0000-01-01", "0001-01-01T00:00:00Z",
    "9999-12-31T23:59:59Z", "٢٠٢٥-01-01", "2025-03-01x01:00", "2025-03-01T01", "2025-03-01T0100+0200",
    "2025-02-28T23:00:00.000000Z", "2025-02-28T23:00:00-00:00", "ünïcode", "~", "2025-02-28T23:00Z",
]


@pytest.mark.parametrize("cursor", ["2025-03-01T01:00+02:00", "2025-02-28T23:00:00Z", "20250301", "abd", "9"])
def test_item_6_a_text_columns_rows_before_a_cursor_are_those_the_sync_orders_before_it(spark, cursor):
    """Whatever a text cursor column holds, the rows ``state set`` keeps are exactly those
    ``cursor_sort_key`` orders before the cursor (and those without a value): split by Spark (a table
    Spark writes) and by Arrow (a table written with Arrow) alike."""
    import pyarrow as pa

    from source_framework.destinations.spark.cursor_order import arrow_rows_before, spark_rows_before
    from source_framework.streams.cursor import cursor_sort_key

    frame = spark.createDataFrame([(i, value) for i, value in enumerate(ODD_CURSORS)], "i int, updatedAt string")
    kept = sorted(row["i"] for row in spark_rows_before(frame, "updatedAt", cursor).collect())
    key = cursor_sort_key(cursor)
    assert kept == [i for i, value in enumerate(ODD_CURSORS) if value is None or cursor_sort_key(value) < key]
    rows = pa.table({"i": pa.array(range(len(ODD_CURSORS)), pa.int32()), "updatedAt": pa.array(ODD_CURSORS, pa.string())})
    assert sorted(arrow_rows_before(rows, "updatedAt", cursor)["i"].to_pylist()) == kept


_UTC = dt.UTC
TYPED_CURSORS = {
    "updatedAt": [None, dt.datetime(1, 1, 1, tzinfo=_UTC), dt.datetime(2025, 2, 28, 22, 59, 59, 999999, tzinfo=_UTC),
                  dt.datetime(2025, 2, 28, 23, tzinfo=_UTC), dt.datetime(2025, 2, 28, 23, 0, 0, 1, tzinfo=_UTC),
                  dt.datetime(2025, 3, 1, tzinfo=_UTC), dt.datetime(9999, 12, 31, 23, 59, 59, tzinfo=_UTC)],
    "version": [None, -5, 0, 8, 9, 10, 12345],
    "score": [None, -1.5, 0.0, 2.4999, 2.5, 2.5001, 1e300],
}


@pytest.mark.parametrize(("column", "cursor"), [
    ("updatedAt", "2025-03-01T01:00+02:00"), ("updatedAt", "2025-02-28T23:00:00Z"), ("updatedAt", "2025-02-28T23:00:00.000001Z"),
    ("updatedAt", "abd"), ("updatedAt", "9"), ("version", "9"), ("version", "-5"), ("version", "12346"), ("score", "2.5"),
    ("score", "-2"),
])
def test_item_6_time_stamp_and_number_columns_split_alike_by_spark_and_by_arrow(spark, tmp_path, column, cursor):
    """The same Parquet file split at the same cursor: the rows Spark keeps (``spark_rows_before``) are
    the rows Arrow keeps (``arrow_rows_before``), nulls included."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from source_framework.destinations.spark.arrow_columns import TIMESTAMP
    from source_framework.destinations.spark.cursor_order import arrow_rows_before, spark_rows_before

    values = TYPED_CURSORS[column]
    kind = {"updatedAt": TIMESTAMP, "version": pa.int64(), "score": pa.float64()}[column]
    rows = pa.table({"i": pa.array(range(len(values)), pa.int32()), column: pa.array(values, kind)})
    pq.write_table(rows, tmp_path / "rows.parquet")
    frame = spark.read.parquet(str(tmp_path / "rows.parquet"))
    by_spark = sorted(row["i"] for row in spark_rows_before(frame, column, cursor).select("i").collect())
    assert by_spark[:1] == [0], by_spark  # (a row without a value is kept)
    assert sorted(arrow_rows_before(pq.read_table(tmp_path / "rows.parquet"), column, cursor)["i"].to_pylist()) == by_spark
