"""A warehouse on S3 (``s3://bucket/prefix``, Delta tables), against a real local S3 server on
127.0.0.1 (moto's): a full sync, SIGKILLs with resume exactly once, the state commands, and the
tables read back by Spark (s3a, ``hadoop-aws``) and by delta-rs straight from the store."""

from __future__ import annotations

import itertools
import os
import tempfile
import threading

import pytest

from integration_tests.conftest import (
    ROOT,
    all_records,
    catalog,
    config_for,
    kill_at,
    read_table,
    run_in_process,
    run_main,
    stream_states,
    write_json,
)
from source_framework.demo.api import DemoApi

pytestmark = pytest.mark.slow  # real processes against a local S3 server


def s3_config(tmp_path, api, warehouse):
    config = config_for(api, warehouse)
    config["destination"]["table_format"] = "delta"
    return write_json(tmp_path / "config.json", config)


def ids_in(spark, uri):
    """The table's ids as delta-rs reads them from the store, and as Spark reads them through s3a."""
    from deltalake import DeltaTable

    by_rs = sorted(DeltaTable(uri).to_pyarrow_dataset().to_table(columns=["id"]).column("id").to_pylist())
    by_spark = sorted(row["id"] for row in read_table(spark, uri).select("id").collect())
    return by_rs, by_spark


def test_a_sync_to_s3_lands_every_record_once_where_spark_and_delta_rs_read_it(spark, demo_api, tmp_path, s3_warehouse):
    config = s3_config(tmp_path, demo_api, s3_warehouse)
    catalog_path = write_json(tmp_path / "catalog.json", catalog("users", "products", "store_orders"))
    before = sorted(os.listdir(ROOT))
    run = run_in_process("read", "--config", config, "--catalog", catalog_path)
    assert run.returncode == 0, run.stderr
    expected = {"users": all_records(demo_api, "users"), "products": all_records(demo_api, "products", {"limit": 1000}),
                "store_orders": all_records(demo_api, "orders")}
    for name, records in expected.items():
        by_rs, by_spark = ids_in(spark, f"{s3_warehouse}/demo/{name}")
        assert by_rs == by_spark == sorted(r["id"] for r in records), name
    from deltalake import DeltaTable

    newest = DeltaTable(f"{s3_warehouse}/demo/users").history(1)[0]
    assert stream_states(run, "users")[-1]["stream"]["stream_state"]["updatedAt"] in newest["userMetadata"]
    assert sorted(os.listdir(ROOT)) == before and not os.path.exists("s3:"), "nothing written locally"


def staged_files_under(folder):
    return sorted(os.path.relpath(os.path.join(where, name), folder) for where, _, names in os.walk(folder) for name in names)


def test_syncs_killed_in_their_commits_resume_from_the_s3_table_exactly_once(spark, demo_api, tmp_path, s3_warehouse, monkeypatch):
    # A table on a store stages its rows on local disk: in a temp folder of this test's own, for every process here.
    local_temp = tmp_path / "temp"
    local_temp.mkdir()
    monkeypatch.setenv("TMPDIR", str(local_temp))
    monkeypatch.setattr(tempfile, "tempdir", str(local_temp))
    config = s3_config(tmp_path, demo_api, s3_warehouse)
    catalog_path = write_json(tmp_path / "catalog.json", catalog("users", "store_orders"))
    args = ("read", "--config", config, "--catalog", catalog_path)
    for point, count in (("commit.done", 2), ("commit.files_written", 3), ("state.printed", 2)):
        killed = kill_at(point, *args, count=count)
        assert killed.paused and killed.returncode == -9, killed.stderr[-2000:]
    assert staged_files_under(local_temp), "the killed runs left staged rows on local disk (else this test shows nothing)"
    # No --state: the table's own Delta log says where each stream stands. (In this process: its pid names its staging.)
    final = run_in_process(*args)
    assert final.returncode == 0, final.stderr[-3000:]
    for name, records in (("users", all_records(demo_api, "users")), ("store_orders", all_records(demo_api, "orders"))):
        by_rs, by_spark = ids_in(spark, f"{s3_warehouse}/demo/{name}")
        assert by_rs == by_spark == sorted(r["id"] for r in records), name
    # The resumed run removed what the killed ones staged; its own staged rows went into the table.
    assert staged_files_under(local_temp) == []
    assert set(os.listdir(local_temp / "source_framework-staging")) <= {str(os.getpid())}


def test_the_state_commands_work_on_s3_tables(spark, demo_api, tmp_path, s3_warehouse):
    config = s3_config(tmp_path, demo_api, s3_warehouse)
    catalog_path = write_json(tmp_path / "catalog.json", catalog("users"))
    state_file = str(tmp_path / "state.json")
    args = ("read", "--config", config, "--catalog", catalog_path, "--state-file", state_file)
    assert run_in_process(*args).returncode == 0
    users = all_records(demo_api, "users")
    uri = f"{s3_warehouse}/demo/users"

    # set: the table keeps the rows before the cursor; the next sync reads the rest, once
    cursor = "2025-06-01T00:00:00Z"
    done = run_main("state", "set", "--stream", "users", "--cursor", cursor, "--state-file", state_file, "--config", config)
    assert done.returncode == 0, done.stderr[-2000:]
    kept, _ = ids_in(spark, uri)
    assert kept == sorted(r["id"] for r in users if r["updatedAt"] < cursor)
    assert run_in_process(*args).returncode == 0
    assert ids_in(spark, uri) == (sorted(r["id"] for r in users),) * 2

    # reset: marked in the table's own log; the next sync replaces the table
    done = run_main("state", "reset", "--stream", "users", "--state-file", state_file, "--config", config)
    assert done.returncode == 0, done.stderr[-2000:]
    assert ids_in(spark, uri)[0] == sorted(r["id"] for r in users)  # unchanged until the next sync
    again = run_in_process(*args)
    assert again.returncode == 0, again.stderr
    assert ids_in(spark, uri) == (sorted(r["id"] for r in users),) * 2

    # reset --tables: the table is gone from the store
    done = run_main("state", "reset", "--stream", "users", "--tables", "--state-file", state_file, "--config", config)
    assert done.returncode == 0, done.stderr[-2000:]
    from source_framework.destinations.spark.delta_table import is_delta_table

    assert not is_delta_table(uri)


def test_a_parquet_table_on_s3_is_refused_naming_delta(demo_api, tmp_path, s3_warehouse):
    config = config_for(demo_api, s3_warehouse)
    config["destination"]["table_format"] = "parquet"
    run = run_in_process("read", "--config", write_json(tmp_path / "config.json", config),
                         "--catalog", write_json(tmp_path / "catalog.json", catalog("users")))
    assert run.returncode == 2
    assert "table_format: delta" in run.stderr and not run.of_type("STATE")


class GatedApi(DemoApi):
    """The demo API, with its data requests after the first ``open_requests`` waiting until
    ``gate`` is set: a run can commit its first pages but cannot finish before the test lets it."""

    def __init__(self, open_requests: int, **kwargs) -> None:
        super().__init__(**kwargs)
        self.gate = threading.Event()
        self._open_requests = open_requests
        self._data_requests = itertools.count(1)

    def respond(self, method, target, headers, body):
        if not target.startswith("/_admin/") and next(self._data_requests) > self._open_requests:
            self.gate.wait(timeout=300)
        return super().respond(method, target, headers, body)


def test_two_runs_on_one_s3_table_the_second_commit_of_the_same_version_loses_and_nothing_is_doubled(
        spark, tmp_path, s3_warehouse):
    """No lock on a store: Delta's conflict check refuses the commit of a run whose table another
    run of the same sync committed to meanwhile (both carry the table's app transaction)."""
    import json
    import signal
    import subprocess
    import sys

    from integration_tests.conftest import API_KEY, MAIN

    # The first run's pages after its first ten (of 30; its first STATE needs 6 or 7) wait for the
    # gate, which opens only once that run is stopped: it cannot finish before the second run
    # commits. It commits each checkpoint as it comes (--max-checkpoints-ahead 1), none held back.
    with GatedApi(open_requests=10, records=3000, api_key=API_KEY, seed=5).start() as api:
        config = s3_config(tmp_path, api, s3_warehouse)
        catalog_path = write_json(tmp_path / "catalog.json", catalog("users"))
        args = [sys.executable, MAIN, "read", "--config", config, "--catalog", catalog_path, "--quiet",
                "--max-checkpoints-ahead", "1"]
        first = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        assert first.stdout is not None
        for line in first.stdout:  # its first commit is in: stop it there
            if json.loads(line)["type"] == "STATE":
                first.send_signal(signal.SIGSTOP)
                break
        try:
            api.gate.set()
            second = run_main("read", "--config", config, "--catalog", catalog_path)
            assert second.returncode == 0, second.stderr[-3000:]
        finally:
            first.send_signal(signal.SIGCONT)
        _, err = first.communicate(timeout=300)
        expected = sorted(r["id"] for r in all_records(api, "users"))
    assert first.returncode != 0, err[-3000:]
    assert b"another writer committed to this table" in err and b"Is another run of this sync going on?" in err, err[-3000:]
    by_rs, by_spark = ids_in(spark, f"{s3_warehouse}/demo/users")
    assert by_rs == by_spark == expected
