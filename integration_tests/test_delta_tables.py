"""Delta Lake tables (``destination.table_format: delta``): real syncs against the demo API, the
tables read back by the reference readers, Spark with Delta and ``deltalake`` (delta-rs), both
in this test process, and compared with what the API serves."""

from __future__ import annotations

import json
import os
from datetime import datetime

import pytest

from integration_tests.conftest import all_records, catalog, config_for, run_in_process, stream_states, write_json

pytestmark = pytest.mark.slow  # many syncs read back by three readers: the quick tier (-m "not slow") leaves it out

STREAMS = ["users", "orders", "stores", "store_orders", "products"]


def delta_config(api, warehouse, **destination):
    config = config_for(api, warehouse)
    config["destination"].update({"table_format": "delta", **destination})
    return config


def read_both(spark, path):
    """The table's rows as Spark with Delta and as delta-rs read them: (spark rows, delta-rs rows),
    each a list of dicts sorted by id."""
    from deltalake import DeltaTable

    by_spark = [row.asDict() for row in spark.read.format("delta").load(path).collect()]
    # (Spark's session is in UTC and gives naive datetimes; Arrow gives them with their UTC zone)
    by_rs = [{k: v.replace(tzinfo=None) if isinstance(v, datetime) else v for k, v in row.items()}
             for row in DeltaTable(path).to_pyarrow_dataset().to_table().to_pylist()]
    return sorted(by_spark, key=lambda r: r["id"]), sorted(by_rs, key=lambda r: r["id"])


def sync(tmp_path, api, streams=(), overrides=None, state=None, **destination):
    warehouse = tmp_path / "warehouse"
    config = write_json(tmp_path / "config.json", delta_config(api, warehouse, **destination))
    catalog_path = write_json(tmp_path / "catalog.json", catalog(*streams, overrides=overrides))
    args = ["read", "--config", config, "--catalog", catalog_path]
    if state is not None:
        args += ["--state", write_json(tmp_path / "state.json", state)]
    return run_in_process(*args), warehouse


@pytest.mark.parametrize("writer", ["arrow", "spark"])
def test_a_sync_lands_every_record_once_in_delta_tables_that_spark_and_delta_rs_read_alike(spark, demo_api, tmp_path, writer):
    from deltalake import DeltaTable

    run, warehouse = sync(tmp_path, demo_api, writer=writer)
    assert run.returncode == 0, run.stderr
    expected = {
        "users": all_records(demo_api, "users"),
        "orders": all_records(demo_api, "orders"),
        "stores": all_records(demo_api, "stores"),
        "store_orders": all_records(demo_api, "orders"),
        "products": all_records(demo_api, "products", {"limit": 1000}),
    }
    for name in STREAMS:
        path = os.path.join(str(warehouse), "demo", name)
        assert os.path.isdir(os.path.join(path, "_delta_log")), name
        assert not os.path.exists(os.path.join(path, "_spark_metadata")) and not os.path.exists(os.path.join(path, "_checkpoints"))
        by_spark, by_rs = read_both(spark, path)
        assert [r["id"] for r in by_spark] == sorted(r["id"] for r in expected[name]), name
        data = [k for k in by_spark[0] if not k.startswith("_sf_")]
        assert [{k: r[k] for k in data} for r in by_spark] == [{k: r[k] for k in data} for r in by_rs], name
        # the newest commit carries the stream's last STATE, as the checkpoint record and app transaction
        table = DeltaTable(path)
        record = json.loads(table.history(1)[0]["userMetadata"])["source_framework_checkpoint"]
        assert record["state"] == stream_states(run, name)[-1]["stream"]["stream_state"], name
        assert table.transaction_version("source_framework") == record["seq"]
    users = spark.read.format("delta").load(os.path.join(str(warehouse), "demo", "users"))
    assert dict(users.dtypes)["updatedAt"] == "timestamp"


def test_a_second_sync_resumes_from_the_delta_log_and_writes_nothing_twice(spark, demo_api, tmp_path):
    first, warehouse = sync(tmp_path, demo_api, ["users", "products"])
    assert first.returncode == 0, first.stderr
    # No --state: the table's own log tells where the stream stands; products (overwrite) is replaced.
    second, _ = sync(tmp_path, demo_api, ["users", "products"])
    assert second.returncode == 0, second.stderr
    for name, expected in (("users", all_records(demo_api, "users")), ("products", all_records(demo_api, "products", {"limit": 1000}))):
        by_spark, by_rs = read_both(spark, os.path.join(str(warehouse), "demo", name))
        assert [r["id"] for r in by_spark] == sorted(r["id"] for r in expected), name
        assert len(by_rs) == len(by_spark)
    assert "resum" in second.stderr.lower()
    # products (overwrite) was replaced in one Delta transaction; the first sync's version stays
    # readable by time travel (until VACUUM, 7 days later)
    from deltalake import DeltaTable

    products = DeltaTable(os.path.join(str(warehouse), "demo", "products"))
    writes = [entry for entry in products.history() if entry["operation"] == "WRITE"]
    assert [entry["operationParameters"]["mode"] for entry in writes] == ["Overwrite", "ErrorIfExists"]  # (the first made it)
    products.load_as_version(writes[-1]["version"])
    assert products.to_pyarrow_dataset().count_rows() == len(all_records(demo_api, "products", {"limit": 1000}))


def test_files_added_as_written_count_right_for_every_reader_and_leave_no_stray_file(spark, demo_api, tmp_path):
    """A checkpoint's rows that the page converter wrote to Parquet are added to the Delta log as
    they are (``delta_file_commit``): each added file's ``numRecords``, which Spark's Delta takes
    counts from, is the rows its footer holds; Spark and delta-rs read the same rows; and after a
    sync every data file in the folder is one the log names."""
    import pyarrow as pa
    import pyarrow.parquet as pq
    from deltalake import DeltaTable

    from source_framework.compare.commits import commit_stats
    from source_framework.destinations.spark.delta_table import DeltaLakeTable

    run, warehouse = sync(tmp_path, demo_api, ["users", "orders"])
    assert run.returncode == 0, run.stderr
    for name, expected in (("users", all_records(demo_api, "users")), ("orders", all_records(demo_api, "orders"))):
        path = os.path.join(str(warehouse), "demo", name)
        table = DeltaTable(path)
        assert len(table.history()) >= 2, name  # (commits after the first are the ones added as written)
        adds = pa.table(table.get_add_actions(flatten=True)).to_pylist()
        for add in adds:
            assert add["num_records"] == pq.read_metadata(os.path.join(path, add["path"])).num_rows, (name, add["path"])
        assert sum(add["num_records"] for add in adds) == len(expected), name
        assert spark.read.format("delta").load(path).count() == len(expected), name
        by_spark, by_rs = read_both(spark, path)
        assert [r["id"] for r in by_spark] == [r["id"] for r in by_rs] == sorted(r["id"] for r in expected), name
        on_disk = {entry for entry in os.listdir(path) if entry.endswith(".parquet")}
        assert on_disk == {add["path"] for add in adds}, name
        # what the commits added, as compare-checkpoints and the benchmark count it from the log
        # (no writer's metrics count files added as written: our record does)
        stats = commit_stats(DeltaLakeTable(lambda: spark, path))
        assert (stats.commits, stats.files, stats.rows) == (len(table.history()), len(adds), len(expected)), name
        from source_framework.runtime.tables_command import _delta_added_rows

        last = DeltaLakeTable(lambda: spark, path).last_checkpoint()
        assert _delta_added_rows(path, last) == last.rows > 0, name


def test_a_warehouse_whose_path_needs_escaping_in_a_uri_takes_every_commit(spark, demo_api, tmp_path):
    """delta-rs names a table by a percent-encoded URI: files added as written go to the folder
    itself, not to a folder named after the encoded text (a space, an accent)."""
    folder = tmp_path / "my wärehouse"
    folder.mkdir()
    run, warehouse = sync(folder, demo_api, ["users"])
    assert run.returncode == 0, run.stderr[-3000:]
    by_spark, by_rs = read_both(spark, os.path.join(str(warehouse), "demo", "users"))
    assert [r["id"] for r in by_spark] == [r["id"] for r in by_rs] == sorted(r["id"] for r in all_records(demo_api, "users"))


def test_a_parquet_table_made_before_delta_became_the_default_stays_a_parquet_table(spark, demo_api, tmp_path):
    """A table keeps the format it was made in: a sync with the default (Delta) goes on appending to a
    ``parquet`` table an earlier sync made (no conversion, no re-sync from scratch, nothing orphaned),
    while a stream's new table in the same warehouse is made as a Delta table."""
    from source_framework.destinations.spark.delta_table import DeltaLakeTable
    from source_framework.destinations.spark.destination import SparkDestination
    from source_framework.destinations.spark.table import SparkTable

    warehouse = tmp_path / "warehouse"
    users = os.path.join(str(warehouse), "demo", "users")
    before = config_for(demo_api, warehouse)
    before["destination"]["table_format"] = "parquet"  # the default of the version before
    catalog_path = write_json(tmp_path / "catalog.json", catalog("users", "stores"))
    first = run_in_process("read", "--config", write_json(tmp_path / "before.json", before), "--catalog",
                           write_json(tmp_path / "users.json", catalog("users")))
    assert first.returncode == 0, first.stderr
    assert os.path.isdir(os.path.join(users, "_spark_metadata"))
    touched = demo_api.touch("users", 5)

    now = config_for(demo_api, warehouse)  # no table_format: the default
    assert "table_format" not in now["destination"]
    second = run_in_process("read", "--config", write_json(tmp_path / "now.json", now), "--catalog", catalog_path,
                            "--state", first.state_file(str(tmp_path / "state.json")))
    assert second.returncode == 0, second.stderr
    assert not os.path.exists(os.path.join(users, "_delta_log")) and os.path.isdir(os.path.join(users, "_spark_metadata"))
    rows = [row["id"] for row in spark.read.parquet(users).select("id").collect()]
    # every user once, and the touched ones a second time: the sync went on from its state
    assert sorted(rows) == sorted([r["id"] for r in all_records(demo_api, "users")] + list(touched))
    stores = os.path.join(str(warehouse), "demo", "stores")
    assert os.path.isdir(os.path.join(stores, "_delta_log")) and not os.path.exists(os.path.join(stores, "_spark_metadata"))
    destination = SparkDestination(str(warehouse), default_namespace="demo")
    try:
        assert isinstance(destination.committed_table(None, "users", spark), SparkTable)
        assert isinstance(destination.committed_table(None, "stores", spark), DeltaLakeTable)
        assert destination.committed_table(None, "users", spark).last_checkpoint().state == second.states["users"]["stream"]["stream_state"]
    finally:
        destination.close()


def test_an_embedded_session_replays_a_delta_log_in_as_few_partitions_as_it_shuffles_into(spark):
    """Delta's default of 50 partitions for a log replay is a cluster's: on a local master each
    first read of a table version ran 50 tasks (a small table took 3.4 s to read on 2 cores, not
    0.9 s). A session of ours on a local master replays into as many as it shuffles into."""
    from source_framework.destinations.spark.session import DELTA_SNAPSHOT_PARTITIONS

    assert spark.sparkContext.master.startswith("local")
    assert spark.conf.get(DELTA_SNAPSHOT_PARTITIONS) == spark.conf.get("spark.sql.shuffle.partitions") == "2"
