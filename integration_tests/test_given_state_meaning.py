"""What a state given to ``read`` means for a table that has commits (issue 49, items 5, 11 and 12).

A given state is the table's newest (go on), one the table has passed (a run died after a commit,
a state file restored or deleted: resume from the table), or neither: edited on purpose. Edited
backwards is a partial re-sync, honoured; ahead of the table, it would skip records the table never
got, so it is refused unless ``--from-state-as-given``. Each test syncs the demo API into real Spark
tables in this process and reads them back with plain ``spark.read``.
"""

from __future__ import annotations

import logging
import shutil

import pytest

from integration_tests.conftest import API_KEY, all_records, catalog, config_for, read_table, table_at
from source_framework.demo.api import DemoApi
from source_framework.demo.source import DemoSource
from source_framework.destinations.spark import table as table_module
from source_framework.destinations.spark.layout import table_path
from source_framework.testing import read

USERS = 300


@pytest.fixture
def api():
    with DemoApi(records=USERS, api_key=API_KEY, seed=23).start() as api:
        yield api


def settings(api, warehouse, **overrides):
    destination = {"type": "spark", "warehouse": str(warehouse), "spark_master": "local[1]", "retention_hours": 0}
    return config_for(api, warehouse, destination=destination, **overrides)


def sync(config, stream, state=None, args=()):
    return read(DemoSource(), config, catalog(stream), state=state, args=list(args))


def ids(spark, warehouse, stream):
    return sorted(r["id"] for r in read_table(spark, table_path(str(warehouse), "demo", stream)).select("id").collect())


def resume_log(caplog):
    return [r.getMessage() for r in caplog.records if r.name == "source_framework.read" and "given state" in r.getMessage()]


# -- 5. a state the table passed means the same however many old checkpoint records are kept --------------


def test_item_5_a_state_the_table_passed_long_ago_still_resumes_from_the_table(spark, api, tmp_path, monkeypatch, caplog):
    """Reclaim keeps the newest checkpoint records only; a state of a record it dropped (the first
    run's start state ``{}``, a deleted state file; an early STATE) was then taken for an edited one,
    and the stream read again from it: every user twice in the append table. (The Parquet folder's
    reclaim, ``table_format: parquet``: a Delta table's log keeps every record of Delta's log retention.)"""
    monkeypatch.setattr(table_module, "KEEP_RECORDS", 2)
    warehouse = tmp_path / "warehouse"
    config = settings(api, warehouse, state_checkpoint_interval=50, page_size=50)
    config["destination"]["table_format"] = "parquet"
    first = sync(config, "users")
    assert first.returncode == 0
    early = first.states()[0]
    api.touch("users", 5)
    second = sync(config, "users", state=first.final_state_list())
    assert second.returncode == 0
    api.touch("users", 5)
    third = sync(config, "users", state=second.final_state_list())
    assert third.returncode == 0
    table = table_at(spark, table_path(str(warehouse), "demo", "users"))
    table.reclaim(retention_seconds=0)  # as the next sync's start does
    assert all(record.start_state != {} for record in table.committed_checkpoints())  # the first run's records are gone
    expected = ids(spark, warehouse, "users")
    assert len(expected) == USERS + 10

    caplog.set_level(logging.INFO, logger="source_framework.read")
    for given in (None, [early]):  # a deleted state file; the first run's first STATE
        caplog.clear()
        again = sync(config, "users", state=given)
        assert again.returncode == 0
        assert ids(spark, warehouse, "users") == expected, f"given {given}: users written again"
        assert any("older than the table's checkpoint" in line for line in resume_log(caplog)), resume_log(caplog)


# -- 11. a state ahead of every checkpoint is refused, not honoured as an edit ------------------------------


def errors_of(output):
    return [m["trace"]["error"]["message"] for m in output.messages if m["type"] == "TRACE" and m["trace"]["type"] == "ERROR"]


def test_item_11_a_state_ahead_of_a_table_restored_from_a_backup_is_refused_unless_given_as_is(spark, api, tmp_path, caplog):
    """Sync, back the warehouse up, sync again, restore the backup, sync with the newest state: the
    state was taken for an edit ("a partial re-sync"), exit 0, and the second sync's updates were
    never in the table."""
    warehouse, backup = tmp_path / "warehouse", tmp_path / "backup"
    config = settings(api, warehouse)
    first = sync(config, "users")
    assert first.returncode == 0
    shutil.copytree(warehouse, backup)
    api.touch("users", 20)
    second = sync(config, "users", state=first.final_state_list())
    assert second.returncode == 0
    shutil.rmtree(warehouse)
    shutil.copytree(backup, warehouse)
    restored = ids(spark, warehouse, "users")

    caplog.set_level(logging.INFO, logger="source_framework.read")
    refused = sync(config, "users", state=second.final_state_list())
    assert refused.returncode != 0
    assert any("ahead of the table's newest checkpoint" in error and "--from-state-as-given" in error for error in errors_of(refused))
    assert any(r.levelname == "WARNING" and "ahead of the table's newest checkpoint" in r.getMessage() for r in caplog.records)
    assert ids(spark, warehouse, "users") == restored  # nothing written

    # Edited backwards on purpose: a partial re-sync, honoured as before.
    caplog.clear()
    cursor = sorted(r["updatedAt"] for r in all_records(api, "users"))[USERS // 2]
    backwards = sync(config, "users", state=[{"type": "STREAM", "stream": {"stream_descriptor": {"name": "users"},
                                                                          "stream_state": {"updatedAt": cursor}}}])
    assert backwards.returncode == 0
    assert any("a partial re-sync" in line for line in resume_log(caplog)), resume_log(caplog)

    # Ahead on purpose: --from-state-as-given reads from it.
    forced = sync(config, "users", state=second.final_state_list(), args=["--from-state-as-given"])
    assert forced.returncode == 0


def test_item_11_a_first_sync_into_an_empty_table_takes_any_state(spark, api, tmp_path):
    cursor = sorted(r["updatedAt"] for r in all_records(api, "users"))[USERS - 10]
    state = [{"type": "STREAM", "stream": {"stream_descriptor": {"name": "users"}, "stream_state": {"updatedAt": cursor}}}]
    first = sync(settings(api, tmp_path / "warehouse"), "users", state=state)
    assert first.returncode == 0
    assert len(ids(spark, tmp_path / "warehouse", "users")) == 10


# -- 12. a per-partition state is the same state whatever the order of its partitions ----------------------


def test_item_12_a_per_partition_state_with_its_partitions_in_another_order_goes_on_from_the_table(spark, api, tmp_path, caplog):
    """The state was taken for an edited one: the boundary was dropped, and each store's orders at
    its cursor were written again by every such sync."""
    warehouse = tmp_path / "warehouse"
    config = settings(api, warehouse)
    first = sync(config, "store_orders")
    assert first.returncode == 0
    expected = sorted(r["id"] for r in all_records(api, "orders"))
    assert ids(spark, warehouse, "store_orders") == expected
    state = first.final_state_list()
    partitions = state[0]["stream"]["stream_state"]["states"]
    assert len(partitions) > 2
    state[0]["stream"]["stream_state"]["states"] = list(reversed(partitions))

    caplog.set_level(logging.INFO, logger="source_framework.read")
    again = sync(config, "store_orders", state=state)
    assert again.returncode == 0
    assert ids(spark, warehouse, "store_orders") == expected
    assert any("going on from the table's checkpoint" in r.getMessage() for r in caplog.records)
