"""``main.py convert`` (a Parquet table folder becomes a Delta table, its checkpoint kept) and
``main.py optimize`` (a Delta table compacted), run as real processes on tables real syncs made."""

from __future__ import annotations

import os

import pytest

from integration_tests.conftest import (
    API_KEY,
    all_records,
    catalog,
    config_for,
    kill_at,
    read_table,
    run_in_process,
    run_main,
    write_json,
)
from source_framework.demo.api import DemoApi, Faults
from source_framework.destinations.spark.delta_table import DeltaLakeTable

pytestmark = pytest.mark.slow  # syncs and maintenance runs over many commits: the quick tier (-m "not slow") leaves it out


def rows_of(spark, path):
    frame = read_table(spark, path)
    columns = sorted(c for c in frame.columns if c != "_sf_meta")
    return sorted(tuple(row) for row in frame.select(*columns).collect())


def test_convert_makes_parquet_tables_delta_tables_with_the_same_rows_and_the_next_sync_resumes_from_them(
        spark, demo_api, tmp_path):
    warehouse = tmp_path / "warehouse"
    config = config_for(demo_api, warehouse)
    config["destination"]["table_format"] = "parquet"
    config_path = write_json(tmp_path / "config.json", config)
    catalog_path = write_json(tmp_path / "catalog.json", catalog("users", "products"))
    for _ in range(2):  # the second sync replaces products: the folder then holds replaced files too
        assert run_in_process("read", "--config", config_path, "--catalog", catalog_path).returncode == 0
    paths = {name: os.path.join(str(warehouse), "demo", name) for name in ("users", "products")}
    before = {name: rows_of(spark, path) for name, path in paths.items()}
    from source_framework.destinations.spark.table import SparkTable

    last_state = SparkTable(spark, paths["users"]).last_checkpoint().state

    # killed once it committed the Delta table, before the Parquet folder's files were gone
    killed = kill_at("convert.committed", "convert", "--config", config_path)
    assert killed.paused, killed.stderr[-2000:]
    done = run_main("convert", "--config", config_path)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "is a Delta table now" in done.stderr and not done.stdout.strip()
    for name, path in paths.items():
        assert os.path.isdir(os.path.join(path, "_delta_log")), name
        assert not {"_spark_metadata", "_checkpoints"} & set(os.listdir(path)), name
        delta_files = {os.path.basename(uri) for uri in DeltaLakeTable(spark, path).live_files()}
        assert {f for f in os.listdir(path) if f.endswith(".parquet")} == delta_files, name
        assert rows_of(spark, path) == before[name], name
    assert DeltaLakeTable(spark, paths["users"]).last_checkpoint().state == last_state

    # the next sync (the config still says parquet: a table keeps its format) resumes from the Delta log
    again = run_in_process("read", "--config", config_path, "--catalog", catalog_path)
    assert again.returncode == 0, again.stderr
    users = sorted(row["id"] for row in read_table(spark, paths["users"]).select("id").collect())
    assert users == sorted(r["id"] for r in all_records(demo_api, "users"))


def test_optimize_compacts_a_delta_table_without_changing_its_rows_or_where_the_next_sync_resumes(spark, tmp_path):
    with DemoApi(records=1500, api_key=API_KEY, seed=7, faults=Faults(delay_ms=30)).start() as api:
        _optimize_case(spark, api, tmp_path)


def _optimize_case(spark, demo_api, tmp_path):
    # (pages that take a while: commits every 50 records are not merged into one, so the table has many files)
    warehouse = tmp_path / "warehouse"
    config = config_for(demo_api, warehouse, state_checkpoint_interval=50, page_size=50)
    config["destination"]["table_format"] = "delta"
    config_path = write_json(tmp_path / "config.json", config)
    catalog_path = write_json(tmp_path / "catalog.json", catalog("users"))
    assert run_in_process("read", "--config", config_path, "--catalog", catalog_path).returncode == 0
    path = os.path.join(str(warehouse), "demo", "users")
    table = DeltaLakeTable(spark, path)
    files, rows, newest = len(table.live_files()), rows_of(spark, path), table.last_checkpoint()
    assert files >= 5

    done = run_main("optimize", "--config", config_path)
    assert done.returncode == 0, done.stderr[-2000:]
    assert len(table.live_files()) < files and rows_of(spark, path) == rows
    assert table.last_checkpoint() == newest
    from deltalake import DeltaTable

    assert DeltaTable(path).history(1)[0]["operation"] == "OPTIMIZE"
    again = run_in_process("read", "--config", config_path, "--catalog", catalog_path)
    assert again.returncode == 0, again.stderr
    assert sorted(r[0] for r in read_table(spark, path).select("id").collect()) == sorted(r["id"] for r in all_records(demo_api, "users"))


def test_optimize_refuses_a_parquet_table_naming_convert(demo_api, tmp_path):
    config = config_for(demo_api, tmp_path / "warehouse")
    config["destination"]["table_format"] = "parquet"
    config_path = write_json(tmp_path / "config.json", config)
    assert run_in_process("read", "--config", config_path, "--catalog", write_json(tmp_path / "c.json", catalog("stores"))).returncode == 0
    done = run_main("optimize", "--config", config_path, "--stream", "stores")
    assert done.returncode == 1 and "main.py convert" in done.stderr, done.stderr[-2000:]
