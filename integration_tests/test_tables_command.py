"""``main.py tables``: a real sync of the demo connector into a Delta and into a Parquet-folder
warehouse, then ``tables`` run as a process of its own, its report checked against the tables as
their own readers see them (``deltalake``, the Parquet files the folder's log lists, the tables'
checkpoint records) and against what the API served, and shown to start no JVM."""

from __future__ import annotations

import json
import os
import re
import stat
import subprocess
import sys

import pytest

from integration_tests.conftest import MAIN, ROOT, all_records, catalog, config_for, run_in_process, stream_states, write_json

SYNCED = ("users", "stores")  # an incremental stream that appends, a full refresh that overwrites


def no_jvm_environment(tmp_path):
    """The environment for a ``tables`` process in which any attempt at a JVM leaves a trace.

    Why this way: pyspark starts its JVM through ``spark-submit``, which runs ``$JAVA_HOME/bin/java``
    (or the ``java`` on ``PATH``). Both point at a stand-in here that writes a marker file and fails,
    so a started JVM cannot go unnoticed (the marker), nor be caught and passed over by the command
    (the marker is written before anything can catch the failure), and the test does not depend on
    whether this machine has Java. The process also runs with ``-X importtime``, so its stderr names
    every module it imported: the test checks that pyspark is not even imported."""
    fake_home = tmp_path / "no-java"
    (fake_home / "bin").mkdir(parents=True, exist_ok=True)
    marker = tmp_path / "java-was-started"
    java = fake_home / "bin" / "java"
    java.write_text(f"#!/bin/sh\necho \"$@\" >> {marker}\nexit 1\n")
    java.chmod(java.stat().st_mode | stat.S_IXUSR)
    env = {**os.environ, "JAVA_HOME": str(fake_home), "PATH": f"{fake_home / 'bin'}{os.pathsep}{os.environ.get('PATH', '')}"}
    return env, marker


def run_tables(tmp_path, *args):
    """``main.py tables args...`` as a real process, checked to have started no JVM and imported
    no pyspark; its stdout."""
    env, marker = no_jvm_environment(tmp_path)
    process = subprocess.run([sys.executable, "-X", "importtime", MAIN, "tables", *args], capture_output=True, cwd=ROOT,
                             env=env, timeout=300)
    stderr = process.stderr.decode(errors="replace")
    assert process.returncode == 0, stderr[-3000:]
    assert not marker.exists(), f"tables started Java: {marker.read_text()}"
    imported = re.findall(r"^import time:.*\|\s+(pyspark\S*)\s*$", stderr, flags=re.M)
    assert not imported, f"tables imported pyspark: {imported[:5]}"
    return process.stdout.decode()


def tables_in_process(*args):
    """``main.py tables args...`` in this process (the checks that need no process of their own):
    (exit code, stdout, stderr). Not ``run_in_process``: its stdout is no JSON lines."""
    import contextlib
    import io

    from source_framework.demo.source import DemoSource
    from source_framework.runtime.entrypoint import build_parser, run_command

    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = run_command(DemoSource(), build_parser().parse_args(["tables", *args]))
    return code, out.getvalue(), err.getvalue()


def sync(tmp_path, api, table_format):
    config = config_for(api, tmp_path / "warehouse")
    config["destination"]["table_format"] = table_format
    config_path = write_json(tmp_path / "config.json", config)
    run = run_in_process("read", "--config", config_path, "--catalog", write_json(tmp_path / "catalog.json", catalog(*SYNCED)))
    assert run.returncode == 0, run.stderr
    return run, config_path


def as_readers_see_it(path, table_format):
    """(rows, the ``_sf_checkpoint`` of each row, column names, the table's own last record), read
    without our command: through the Delta log with ``deltalake``, or the files the folder's log lists."""
    import pyarrow.dataset as ds
    import pyarrow.parquet as pq

    from source_framework.destinations.spark.delta_table import DeltaLakeTable
    from source_framework.destinations.spark.file_sink_log import local_path
    from source_framework.destinations.spark.table import SparkTable

    def no_spark():
        raise AssertionError("no Spark here")

    if table_format == "delta":
        from deltalake import DeltaTable

        dataset = DeltaTable(path).to_pyarrow_dataset()
        record = DeltaLakeTable(no_spark, path).last_checkpoint()
        assert DeltaTable(path).version() == record.batch_id  # our last commit is the table's newest version
    else:
        table = SparkTable(no_spark, path)
        files = [local_path(uri) for uri in table.live_files()]
        dataset = ds.dataset(files, schema=pq.read_schema(files[0]), format="parquet")
        record = table.last_checkpoint()
    checkpoints = dataset.to_table(columns=["_sf_checkpoint"]).column(0).to_pylist()
    return dataset.count_rows(), checkpoints, dataset.schema.names, record


@pytest.mark.parametrize("table_format", ["delta", "parquet"])
def test_tables_shows_each_tables_rows_last_commit_state_and_schema_without_a_jvm(demo_api, tmp_path, table_format):
    run, config_path = sync(tmp_path, demo_api, table_format)
    warehouse = os.path.realpath(tmp_path / "warehouse")

    report = json.loads(run_tables(tmp_path, "--config", config_path, "--json"))
    assert report["warehouse"] == warehouse and report["source"] == "demo"
    tables = {table["stream"]: table for table in report["tables"]}
    assert list(tables) == ["users", "orders", "stores", "store_orders", "products"]  # the source's streams, in its order
    served = {"users": len(all_records(demo_api, "users")), "stores": len(all_records(demo_api, "stores"))}
    for name in SYNCED:
        shown = tables[name]
        path = os.path.join(warehouse, "demo", name)
        rows, checkpoints, columns, record = as_readers_see_it(path, table_format)
        assert (shown["path"], shown["exists"], shown["format"], shown["pending_reset"]) == (path, True, table_format, False)
        assert shown["rows"] == rows == served[name]  # a first sync: each record served, once
        commit = shown["last_commit"]
        assert (commit["seq"], commit["committed_at"], commit["replace"]) == (record.seq, record.committed_at, name == "stores")
        assert commit["delta_version" if table_format == "delta" else "log_batch"] == record.batch_id
        assert commit["rows"] == checkpoints.count(record.seq) > 0  # the rows that commit wrote carry its seq
        assert shown["state"] == record.state == stream_states(run, name)[-1]["stream"]["stream_state"]  # the last STATE
        assert [column["name"] for column in shown["schema"]] == columns
    types = {column["name"]: column["type"] for column in tables["users"]["schema"]}
    assert types["id"] == "bigint" and types["updatedAt"] == "timestamp" and types["_sf_checkpoint"] == "bigint"
    assert types["address"] == "string (JSON text)"  # a nested object, stored as JSON text
    for name in ("orders", "store_orders", "products"):
        assert tables[name] == {"stream": name, "namespace": "demo", "path": os.path.join(warehouse, "demo", name), "exists": False}

    text = run_tables(tmp_path, "--config", config_path)
    users = tables["users"]
    kind = "Delta table" if table_format == "delta" else "Parquet folder"
    assert f"users: {kind}" in text and f"stores: {kind}" in text
    assert re.search(rf"^  rows +{users['rows']}$", text, flags=re.M)
    assert re.search(rf"^  last commit +#{users['last_commit']['seq']} at {users['last_commit']['committed_at']} ", text, flags=re.M)
    assert re.search(r"^  state +" + re.escape(json.dumps(users["state"], separators=(",", ":"))) + "$", text, flags=re.M)
    assert re.search(r"^    updatedAt +timestamp$", text, flags=re.M)
    assert f"orders: no table (read would write it at {os.path.join(warehouse, 'demo', 'orders')})" in text

    # One stream, through python -m source_framework (main.py's command line): the same report.
    env, _ = no_jvm_environment(tmp_path)
    one = subprocess.run([sys.executable, "-m", "source_framework", "source_framework.demo:DemoSource", "tables", "--config",
                          config_path, "--stream", "stores", "--json"], capture_output=True, cwd=ROOT, env=env, timeout=300)
    assert one.returncode == 0, one.stderr.decode()[-3000:]
    assert json.loads(one.stdout)["tables"] == [tables["stores"]]


def test_a_damaged_table_is_said_in_its_entry_and_the_others_are_still_shown(demo_api, tmp_path):
    _, config_path = sync(tmp_path, demo_api, "parquet")
    records = os.path.join(tmp_path, "warehouse", "demo", "users", "_checkpoints")
    with open(os.path.join(records, sorted(os.listdir(records))[-1]), "w") as handle:
        handle.write("{cut")
    code, out, err = tables_in_process("--config", config_path, "--json")
    assert code == 1, err
    tables = {table["stream"]: table for table in json.loads(out)["tables"]}
    assert "cannot be read" in tables["users"]["error"] and "rows" not in tables["users"]
    assert tables["stores"]["rows"] == len(all_records(demo_api, "stores")) and "error" not in tables["stores"]


def test_bad_input_stops_tables_with_a_clear_message(demo_api, tmp_path):
    code, out, err = tables_in_process("--config", str(tmp_path / "nope.json"))
    assert (code, out) == (2, "") and err == f"error: config file '{tmp_path / 'nope.json'}' does not exist\n"
    config_path = write_json(tmp_path / "config.json", config_for(demo_api, tmp_path / "warehouse"))
    code, out, err = tables_in_process("--config", config_path, "--stream", "user")
    assert (code, out) == (2, "") and "--stream: the source has no stream 'user' (it has: orders, products" in err
    code, out, err = tables_in_process("--config", config_path, "--warehouse", "gs://bucket/lake")
    assert (code, out) == (2, "") and "--warehouse: the warehouse 'gs://bucket/lake' is a gs:// URI" in err
    assert not os.path.exists(tmp_path / "warehouse")  # looking creates nothing


def test_a_delta_tables_folder_before_its_first_commit_shows_an_empty_table_not_an_error(demo_api, tmp_path):
    """A first sync killed before its first commit leaves the table's folder without a Delta log:
    ``tables`` shows it empty, with nothing stored as null, and exits 0."""
    config_path = write_json(tmp_path / "config.json", config_for(demo_api, tmp_path / "warehouse"))
    os.makedirs(tmp_path / "warehouse" / "demo" / "users")
    code, out, err = tables_in_process("--config", config_path, "--stream", "users", "--json")
    assert code == 0, out + err
    (users,) = json.loads(out)["tables"]
    assert "error" not in users and (users["format"], users["rows"], users["last_commit"]) == ("delta", 0, None)
    assert (users["values_stored_as_null"], users["undeclared_fields"]) == ({}, {})
