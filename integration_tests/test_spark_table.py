"""SparkTable commits, checked the way users read tables: plain ``spark.read.parquet`` in a new session.

Every scenario is built first on the test run's one session; then a separate Spark application
(plain pyspark, none of our code: conftest's ``new_application``) reads all the tables at once.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from urllib.parse import urlparse
from urllib.request import url2pathname

import pyarrow as pa
import pytest

from source_framework.destinations.spark.arrow_conversion import (
    arrow_schema,
    records_to_arrow,
)
from source_framework.destinations.spark.table import SparkTable
from source_framework.helpers.faults import SimulatedCrash, crash_at

pytestmark = pytest.mark.slow  # many commits through Spark: the quick tier (-m "not slow") leaves it out

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

SCHEMA = arrow_schema(
    {
        "properties": {
            "id": {"type": "integer"},
            "name": {"type": ["null", "string"]},
            "seen": {"type": "string", "format": "date-time"},
            "tags": {"type": "array"},
        }
    }
)

def rows(ids, checkpoint: int = 1) -> pa.Table:
    records = [{"id": i, "name": f"user {i}", "seen": "2024-01-01T10:00:00+02:00", "tags": [i, "x"]} for i in ids]
    return records_to_arrow(records, SCHEMA, extracted_at_ms=1_700_000_000_000, sync_id="test", checkpoint=checkpoint)


@pytest.fixture(scope="module")
def warehouse(tmp_path_factory):
    return str(tmp_path_factory.mktemp("ware house"))  # a space: file: URIs must be encoded


@pytest.fixture(scope="module")
def basic(spark, warehouse):
    table = SparkTable(spark, os.path.join(warehouse, "basic"))
    table.commit(rows(range(0, 100)), state={"cursor": "a"}, seq=1)
    table.commit(rows(range(100, 150), checkpoint=2), state={"cursor": "b"}, seq=2)
    return table


@pytest.fixture(scope="module")
def with_strays(spark, warehouse):
    """One commit, one commit killed before its batch, and stray Parquet files."""
    table = SparkTable(spark, os.path.join(warehouse, "strays"))
    table.commit(rows(range(10)), state={"cursor": "committed"}, seq=1)
    with crash_at("commit.files_written"):  # killed before its batch, the commit point
        with pytest.raises(SimulatedCrash):
            table.commit(rows(range(100, 110)), state={"cursor": "never"}, seq=2)
    committed_file = url2pathname(urlparse(table.live_files()[0]).path)
    shutil.copy(committed_file, os.path.join(table.path, "stray.parquet"))
    os.makedirs(os.path.join(table.path, "_staging", "leftover"))
    shutil.copy(committed_file, os.path.join(table.path, "_staging", "leftover", "part-00000-x.parquet"))
    return table


@pytest.fixture(scope="module")
def recovered(spark, warehouse):
    """A commit killed before its batch, cleaned up, then retried with the same seq."""
    table = SparkTable(spark, os.path.join(warehouse, "recovered"))
    table.commit(rows(range(10)), state={"cursor": "1"}, seq=1)
    with crash_at("commit.files_written"):  # killed before its batch, the commit point
        with pytest.raises(SimulatedCrash):
            table.commit(rows(range(10, 20)), state={"cursor": "2"}, seq=2)
    removed = table.recover()
    table.commit(rows(range(10, 20)), state={"cursor": "2"}, seq=2)
    return table, removed


@pytest.fixture(scope="module")
def many(spark, warehouse):
    table = SparkTable(spark, os.path.join(warehouse, "many"))
    for seq in range(1, 26):
        table.commit(rows(range(seq * 10, seq * 10 + 4), checkpoint=seq), state={"n": seq}, seq=seq)
    return table


@pytest.fixture(scope="module")
def replaced(spark, warehouse):
    """append, append, REPLACE, append, REPLACE, append; with what was visible on the way."""
    table = SparkTable(spark, os.path.join(warehouse, "replaced"))
    seen = {}
    table.commit(rows(range(0, 5)), state=None, seq=1)
    table.commit(rows(range(5, 10)), state=None, seq=2)
    seen["before"] = sorted(r.id for r in spark.read.parquet(table.path).select("id").collect())
    seen["first_replace"] = table.commit(rows(range(100, 103)), state={"snapshot": 1}, seq=3, replace=True)
    seen["after"] = sorted(r.id for r in spark.read.parquet(table.path).select("id").collect())
    table.commit(rows(range(103, 105)), state=None, seq=4)
    seen["second_replace"] = table.commit(rows(range(200, 202)), state={"snapshot": 2}, seq=5, replace=True)
    table.commit(rows(range(202, 204)), state={"snapshot": 2, "more": True}, seq=6)
    return table, seen


@pytest.fixture(scope="module")
def empties(spark, warehouse):
    only_empty = SparkTable(spark, os.path.join(warehouse, "only_empty"))
    only_empty.commit(rows([]), state={"cursor": None}, seq=1)
    rows_then_empty = SparkTable(spark, os.path.join(warehouse, "rows_then_empty"))
    rows_then_empty.commit(rows(range(3)), state=None, seq=1)
    rows_then_empty.commit(rows([]), state={"cursor": "same"}, seq=2)
    return only_empty, rows_then_empty


@pytest.fixture(scope="module")
def staged(spark, warehouse):
    """Rows staged ahead of their commit: invisible until it, then published with it; a
    staging left by a run that died before its commit is removed, never published."""
    table = SparkTable(spark, os.path.join(warehouse, "staged"))
    table.commit(rows(range(5)), state={"cursor": "1"}, seq=1)
    first = table.stage(rows(range(5, 25), checkpoint=2))
    second = table.stage(rows(range(25, 40), checkpoint=2))
    seen = {"before_commit": sorted(r.id for r in spark.read.parquet(table.path).select("id").collect())}
    info = table.commit(rows(range(40, 42), checkpoint=2), state={"cursor": "2"}, seq=2, staged=[first, second])
    seen["info"] = info
    seen["folders_left"] = [os.path.exists(item.folder) for item in (first, second)]
    table.stage(rows(range(100, 110), checkpoint=3))  # the run dies before commit 3
    seen["removed"] = SparkTable(spark, table.path).recover()
    return table, seen


@pytest.fixture(scope="module")
def fresh(new_application, basic, with_strays, recovered, many, replaced, empties, staged):
    """What a new Spark application sees in every table: {table path: {columns, ids, first}}."""
    paths = [basic.path, with_strays.path, recovered[0].path, many.path, replaced[0].path] + [t.path for t in empties]
    paths.append(staged[0].path)
    seen = {}
    for path, table in new_application(paths).items():
        assert "error" not in table, table["error"]
        rows = sorted(table["json"], key=lambda row: row["id"])
        seen[path] = {"columns": table["columns"], "ids": [row["id"] for row in rows], "first": rows[:1]}
    return seen


# --- tests ------------------------------------------------------------------------------


def test_new_session_sees_exactly_the_committed_rows(basic, fresh):
    seen = fresh[basic.path]
    assert seen["ids"] == list(range(150))
    assert seen["columns"] == SCHEMA.names
    first = seen["first"][0]
    assert first["seen"] == "2024-01-01T08:00:00.000Z"  # +02:00 stored as UTC
    assert json.loads(first["tags"]) == [0, "x"]
    assert first["_sf_checkpoint"] == 1 and first["_sf_sync_id"] == "test" and "_sf_meta" not in first
    assert len(basic.live_files()) == 2
    assert all(uri.startswith("file:///") and "ware%20house" in uri for uri in basic.live_files())


def test_stray_and_uncommitted_files_are_ignored(with_strays, fresh):
    assert fresh[with_strays.path]["ids"] == list(range(10))
    parquet_files = [name for name in os.listdir(with_strays.path) if name.endswith(".parquet")]
    assert len(parquet_files) == 3  # committed + killed commit + stray
    assert with_strays.last_checkpoint().state == {"cursor": "committed"}


def test_remove_orphans_then_retry(recovered, fresh):
    table, removed = recovered
    assert any(path.endswith(".parquet") for path in removed)
    assert any(path.endswith("00000002.json") for path in removed)
    assert fresh[table.path]["ids"] == list(range(20))
    assert table.last_checkpoint().state == {"cursor": "2"}
    assert len([name for name in os.listdir(table.path) if name.endswith(".parquet")]) == 2


def test_25_commits_stay_readable_with_compaction_batches(many, fresh):
    assert fresh[many.path]["ids"] == sorted(i for seq in range(1, 26) for i in range(seq * 10, seq * 10 + 4))
    log = sorted(os.listdir(os.path.join(many.path, "_spark_metadata")), key=lambda n: int(n.split(".")[0]))
    assert log == [f"{i}.compact" if i in (9, 19) else str(i) for i in range(25)]
    with open(os.path.join(many.path, "_spark_metadata", "19.compact")) as compact:
        assert compact.readline() == "v1\n" and len(compact.read().splitlines()) == 20  # every live file
    assert len(many.live_files()) == 25
    assert many.last_checkpoint().state == {"n": 25}


def test_replace_swaps_the_visible_rows(replaced, fresh):
    table, seen = replaced
    assert seen["before"] == list(range(10))
    assert seen["after"] == [100, 101, 102]
    assert (seen["first_replace"].batch_id, seen["second_replace"].batch_id) == (9, 19)
    assert fresh[table.path]["ids"] == [200, 201, 202, 203]
    assert len(table.live_files()) == 2


def test_last_checkpoint_returns_the_newest_committed_state(basic, spark, tmp_path):
    record = basic.last_checkpoint()
    assert record.seq == 2 and record.state == {"cursor": "b"} and record.rows == 50
    assert [basic.path + "/" + name for name in record.files] == [
        url2pathname(urlparse(uri).path) for uri in basic.live_files()[-1:]
    ]
    assert SparkTable(spark, str(tmp_path / "nothing_yet")).last_checkpoint() is None


def test_empty_commits_keep_the_table_readable(empties, fresh):
    only_empty, rows_then_empty = empties
    assert fresh[only_empty.path] == {"columns": SCHEMA.names, "ids": [], "first": []}
    assert fresh[rows_then_empty.path]["ids"] == [0, 1, 2]
    assert rows_then_empty.last_checkpoint().state == {"cursor": "same"}


def test_seq_must_grow(basic):
    with pytest.raises(ValueError, match="seq"):
        basic.commit(rows([999]), state=None, seq=2)


def test_relative_path_is_stored_as_absolute_uri(spark, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    info = SparkTable(spark, "rel/table").commit(rows([1]), state=None, seq=1)
    assert info.files[0].startswith((tmp_path / "rel" / "table").as_uri() + "/")
    assert spark.read.parquet(str(tmp_path / "rel" / "table")).count() == 1


def test_spark_never_writes_to_stdout():
    script = (
        "from source_framework.destinations.spark.session import get_spark\n"
        "spark = get_spark('local[1]')\n"
        "spark.sparkContext._jvm.System.out.println('JVM-SAYS-HELLO')\n"
        "spark.sparkContext.parallelize([1], 1).map(lambda x: print('WORKER-SAYS-HELLO') or x).collect()\n"
        "assert spark.conf.get('spark.sql.session.timeZone') == 'UTC'\n"
        "spark.stop()\n"
    )
    env = {**os.environ, "PYTHONPATH": REPO_ROOT}
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120, env=env)
    assert result.returncode == 0, result.stderr[-4000:]
    assert result.stdout == ""
    assert "JVM-SAYS-HELLO" in result.stderr and "WORKER-SAYS-HELLO" in result.stderr


def test_staged_rows_are_published_only_with_their_commit(staged, fresh):
    table, seen = staged
    assert seen["before_commit"] == list(range(5))
    assert seen["info"].rows == 37 and len(seen["info"].files) == 3  # two staged files and the last piece
    assert seen["folders_left"] == [False, False]
    assert any("_staging" in path for path in seen["removed"])
    assert fresh[table.path]["ids"] == list(range(42))
    assert table.last_checkpoint().rows == 37


def test_reclaim_compacts_the_log_and_the_records_and_keeps_the_table_whole(spark, tmp_path, monkeypatch):
    from source_framework.destinations.spark import table as table_module

    table = SparkTable(spark, str(tmp_path / "long_lived"))
    for seq in range(1, 24):
        table.commit(rows([seq], checkpoint=seq), state={"n": seq}, seq=seq, replace=seq % 10 == 0)
    batches_before = sorted(os.listdir(os.path.join(table.path, "_spark_metadata")))
    assert table.reclaim(retention_seconds=3600) == []  # nothing is old enough yet
    monkeypatch.setattr(table_module, "KEEP_RECORDS", 5)
    removed = table.reclaim(retention_seconds=0)
    batches_after = sorted(os.listdir(os.path.join(table.path, "_spark_metadata")), key=lambda n: int(n.split(".")[0]))
    assert len(batches_after) < len(batches_before) and batches_after[0] == "19.compact"
    assert len(os.listdir(os.path.join(table.path, "_checkpoints"))) == 5
    replaced = [n for n in removed if n.endswith(".parquet")]
    assert len(replaced) == 19  # every file the two replaces made invisible
    assert table.last_checkpoint().state == {"n": 23}
    assert sorted(r.id for r in spark.read.parquet(table.path).select("id").collect()) == [20, 21, 22, 23]
