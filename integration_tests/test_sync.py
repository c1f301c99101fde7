"""End-to-end syncs: ``main.py read`` against the real demo API into real Spark tables (in this
process, on the test run's Spark session: the command line and runtime are the same)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from integration_tests.conftest import (
    MAIN,
    all_records,
    catalog,
    config_for,
    read_table,
    run_in_process,
    stream_states,
    table_at,
    write_json,
)

pytestmark = pytest.mark.slow  # many syncs: the quick tier (-m "not slow") leaves it out

STREAMS = ["users", "orders", "stores", "store_orders", "products"]


def table(spark, warehouse, name):
    return read_table(spark, os.path.join(str(warehouse), "demo", name))


def ids(frame):
    return sorted(row["id"] for row in frame.select("id").collect())


@pytest.fixture
def full_sync(tmp_path, demo_api):
    warehouse = tmp_path / "warehouse"
    config = write_json(tmp_path / "config.json", config_for(demo_api, warehouse))
    catalog_path = write_json(tmp_path / "catalog.json", catalog())
    run = run_in_process("read", "--config", config, "--catalog", catalog_path)
    assert run.returncode == 0, run.stderr
    return run, warehouse, config, catalog_path


def test_full_sync_writes_every_record_once(spark, demo_api, full_sync):
    run, warehouse, _, _ = full_sync
    expected = {
        "users": all_records(demo_api, "users"),
        "orders": all_records(demo_api, "orders"),
        "stores": all_records(demo_api, "stores"),
        "products": all_records(demo_api, "products", {"limit": 1000}),
    }
    for name, records in expected.items():
        assert ids(table(spark, warehouse, name)) == sorted(r["id"] for r in records), name
    store_orders = table(spark, warehouse, "store_orders")
    assert ids(store_orders) == sorted(r["id"] for r in expected["orders"])

    users = table(spark, warehouse, "users")
    types = dict(users.dtypes)
    assert types["updatedAt"] == "timestamp" and types["id"] == "bigint"
    assert {"_sf_extracted_at", "_sf_sync_id", "_sf_checkpoint"} <= set(types)
    assert users.select("_sf_sync_id").distinct().count() == 1
    # Checkpoints are numbered commits; queued checkpoints may be merged into one Spark write,
    # so there are at most as many commits as STATEs, and the newest holds the final state.
    user_states = stream_states(run, "users")
    assert 1 <= users.select("_sf_checkpoint").distinct().count() <= len(user_states)
    newest = table_at(spark, os.path.join(str(warehouse), "demo", "users")).last_checkpoint()
    assert newest is not None
    assert newest.state == user_states[-1]["stream"]["stream_state"]

    statuses = [
        (m["trace"]["stream_status"]["stream_descriptor"]["name"], m["trace"]["stream_status"]["status"])
        for m in run.of_type("TRACE")
        if m["trace"]["type"] == "STREAM_STATUS"
    ]
    for name in STREAMS:
        assert [s for n, s in statuses if n == name] == ["STARTED", "RUNNING", "COMPLETE"]
    # Every stdout line is a protocol message; records went to Spark, not stdout.
    assert {m["type"] for m in run.messages} <= {"STATE", "TRACE", "LOG"}
    counted = sum(int(state["sourceStats"]["recordCount"]) for state in stream_states(run, "users"))
    assert counted == len(expected["users"])


@pytest.mark.parametrize(("table_format", "orders"), [("delta", "append"), ("delta", "append_dedup"), ("parquet", "append_dedup")])
def test_a_sync_whose_rows_the_page_converter_writes_never_imports_pandas_or_pyspark(demo_api, tmp_path, table_format, orders):
    """pandas costs a sync 0.2-0.5 s to import and none of it is needed when the page converter
    converts every stream's records (the demo's): the sync's process, and the converter's, start
    and commit without it (``PYTHONPROFILEIMPORTTIME`` has every Python process list the modules
    it imports, on stderr), merges by key included (Arrow's, and delta-rs's MERGE). Nor pyspark
    (0.1 s), where no table needs Spark."""
    warehouse = tmp_path / "warehouse"
    settings = config_for(demo_api, warehouse)
    settings["destination"]["table_format"] = table_format
    config = write_json(tmp_path / "config.json", settings)
    catalog_path = write_json(tmp_path / "catalog.json", catalog(overrides={"orders": {"destination_sync_mode": orders}}))
    done = subprocess.run([sys.executable, MAIN, "read", "--config", config, "--catalog", catalog_path],
                          capture_output=True, timeout=300, env={**os.environ, "PYTHONPROFILEIMPORTTIME": "1"})
    stderr = done.stderr.decode(errors="replace")
    assert done.returncode == 0, stderr[-3000:]
    imported = [line.rpartition("|")[2].strip() for line in stderr.splitlines() if line.startswith("import time:")]
    assert imported.count("pyarrow") == 2  # the list is there, for both processes
    # (an import the page converter refuses is listed as ``pandas`` alone; a real one, by its modules)
    assert not [name for name in imported if name.startswith("pandas.")]
    assert not [name for name in imported if name == "pyspark" or name.startswith("pyspark.")]
    assert done.stdout.count(b'"type":"STATE"') >= len(STREAMS)


def test_second_sync_from_the_final_state_reads_only_what_changed(spark, demo_api, full_sync, tmp_path):
    first, warehouse, config, catalog_path = full_sync
    state = first.state_file(str(tmp_path / "state.json"))
    before = {name: table(spark, warehouse, name).count() for name in ("users", "orders", "store_orders")}

    second = run_in_process("read", "--config", config, "--catalog", catalog_path, "--state", state)
    assert second.returncode == 0, second.stderr
    for name in ("users", "orders", "store_orders"):
        assert table(spark, warehouse, name).count() == before[name], f"{name}: an unchanged API added rows"

    touched_users = demo_api.touch("users", 7)
    touched_orders = demo_api.touch("orders", 5)
    state = second.state_file(str(tmp_path / "state2.json"))
    third = run_in_process("read", "--config", config, "--catalog", catalog_path, "--state", state)
    assert third.returncode == 0, third.stderr

    users = table(spark, warehouse, "users")
    new_users = users.where(users["_sf_sync_id"] != users.select("_sf_sync_id").first()[0])
    newest_sync = sorted(r[0] for r in users.select("_sf_sync_id").distinct().collect())[-1]
    picked_up = sorted(r["id"] for r in users.where(users["_sf_sync_id"] == newest_sync).select("id").collect())
    assert picked_up == sorted(touched_users)
    assert new_users.count() >= len(touched_users)

    for name in ("orders", "store_orders"):
        frame = table(spark, warehouse, name)
        newest = sorted(r[0] for r in frame.select("_sf_sync_id").distinct().collect())[-1]
        assert sorted(r["id"] for r in frame.where(frame["_sf_sync_id"] == newest).select("id").collect()) == sorted(touched_orders), name

    # The touched records moved forward, and the state with them.
    assert third.states["users"]["stream"]["stream_state"]["updatedAt"] > second.states["users"]["stream"]["stream_state"]["updatedAt"]


def test_stdout_destination_prints_records_and_writes_no_table(demo_api, tmp_path):
    warehouse = tmp_path / "warehouse"
    config = write_json(tmp_path / "config.json", config_for(demo_api, warehouse))
    catalog_path = write_json(tmp_path / "k.json", catalog("users", "stores"))
    run = run_in_process("read", "--config", config, "--catalog", catalog_path, "--destination", "stdout")
    assert run.returncode == 0, run.stderr
    records = run.of_type("RECORD")
    assert len([r for r in records if r["record"]["stream"] == "users"]) == 1500
    assert len([r for r in records if r["record"]["stream"] == "stores"]) == 10
    assert not warehouse.exists()
    # Each STATE comes after the records it covers.
    seen = 0
    for message in run.messages:
        if message["type"] == "RECORD" and message["record"]["stream"] == "users":
            seen += 1
        if message["type"] == "STATE" and message["state"]["stream"]["stream_descriptor"]["name"] == "users":
            cursor = message["state"]["stream"]["stream_state"]["updatedAt"]
            before = [
                m["record"]["data"]["updatedAt"]
                for m in run.messages[: run.messages.index(message)]
                if m["type"] == "RECORD" and m["record"]["stream"] == "users"
            ]
            assert max(before) == cursor


def test_spec_check_and_discover(demo_api, tmp_path):
    spec = run_in_process("spec")
    assert spec.returncode == 0
    assert spec.of_type("SPEC")[0]["spec"]["connectionSpecification"]["properties"]["api_key"]["airbyte_secret"] is True

    good = write_json(tmp_path / "good.json", config_for(demo_api, tmp_path / "w"))
    check = run_in_process("check", "--config", good)
    assert check.of_type("CONNECTION_STATUS")[0]["connectionStatus"]["status"] == "SUCCEEDED"
    bad = write_json(tmp_path / "bad.json", config_for(demo_api, tmp_path / "w", api_key="wrong-key"))
    check = run_in_process("check", "--config", bad)
    status = check.of_type("CONNECTION_STATUS")[0]["connectionStatus"]
    assert status["status"] == "FAILED" and "wrong-key" not in check.stdout.decode()

    discover = run_in_process("discover", "--config", good)
    streams = {s["name"]: s for s in discover.of_type("CATALOG")[0]["catalog"]["streams"]}
    assert sorted(streams) == sorted(STREAMS)
    assert streams["users"]["default_cursor_field"] == ["updatedAt"]
    assert "incremental" in streams["store_orders"]["supported_sync_modes"]
    assert streams["products"]["supported_sync_modes"] == ["full_refresh"]
    assert streams["users"]["source_defined_primary_key"] == [["id"]]


def test_auth_failure_fails_the_streams_with_a_config_error_and_no_secret(demo_api, tmp_path):
    config = write_json(tmp_path / "config.json", config_for(demo_api, tmp_path / "w", api_key="nope-not-the-key"))
    run = run_in_process("read", "--config", config, "--catalog", write_json(tmp_path / "k.json", catalog("users")))
    assert run.returncode != 0
    errors = [m["trace"]["error"] for m in run.of_type("TRACE") if m["trace"]["type"] == "ERROR"]
    assert errors and errors[0]["failure_type"] == "config_error"
    assert "nope-not-the-key" not in run.stdout.decode() and "nope-not-the-key" not in run.stderr
    assert not run.of_type("STATE")


def test_parquet_written_by_this_process_reads_as_spark_written_parquet(spark, tmp_path, demo_api):
    """``destination.writer``: the files Arrow's writer makes here (the default with a local master)
    and those Spark's writer makes give a reader the same table: schema, rows and values, in every
    sync mode (``append_dedup`` merges with Spark either way)."""
    overrides = {"orders": {"destination_sync_mode": "append_dedup"}}
    catalog_path = write_json(tmp_path / "catalog.json", catalog(overrides=overrides))
    tables = {}
    for writer in ("arrow", "spark"):
        warehouse = tmp_path / writer
        config = config_for(demo_api, warehouse)
        config["destination"]["writer"] = writer
        run = run_in_process("read", "--config", write_json(tmp_path / f"{writer}.json", config), "--catalog", catalog_path)
        assert run.returncode == 0, run.stderr
        tables[writer] = {name: table(spark, warehouse, name) for name in STREAMS}
    varying = {"_sf_extracted_at", "_sf_sync_id", "_sf_checkpoint"}  # when, which run, which commit
    for name in STREAMS:
        arrow, spark_written = tables["arrow"][name], tables["spark"][name]
        assert arrow.dtypes == spark_written.dtypes, name
        columns = [c for c in arrow.columns if c not in varying]
        rows = {writer: sorted(map(tuple, tables[writer][name].select(*columns).collect()), key=repr)
                for writer in tables}
        assert rows["arrow"] == rows["spark"] and rows["arrow"], name
