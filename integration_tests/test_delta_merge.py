"""``append_dedup`` without Spark (``delta_merge.py``): a Delta MERGE by delta-rs, or a Parquet
folder rewritten by Arrow. The reference is Spark's rewrite of a Parquet folder (``TableWriter._merged``,
still used where a merge needs Spark). The same commits go through each, and the tables must hold the
same rows."""

from __future__ import annotations

import json
import random
import re
import subprocess
import sys

import pytest

from integration_tests.conftest import MAIN, ROOT, catalog, config_for, landed_rows, write_json
from source_framework.destinations.base import APPEND_DEDUP, StreamTarget
from source_framework.destinations.checkpoint_record import ResumeNotes
from source_framework.destinations.spark.arrow_conversion import arrow_schema
from source_framework.destinations.spark.committer import CommitJob
from source_framework.destinations.spark.delta_table import DeltaLakeTable
from source_framework.destinations.spark.table import SparkTable
from source_framework.destinations.spark.table_writer import TableWriter

pytestmark = pytest.mark.slow  # many Delta merges through Spark and delta-rs: the quick tier (-m "not slow") leaves it out

SCHEMA = {"properties": {"Id": {"type": ["null", "integer"]}, "a.b": {"type": ["null", "string"]},
                         "updatedAt": {"type": ["null", "string"], "format": "date-time"}, "v": {"type": "integer"}}}


def commits_of(seed: int) -> list[list[dict]]:
    """Six commits of 40 records: keys from a small range (repeats within and across commits), some
    null keys, cursors with ties, nulls, and ones older than the table's."""
    rng = random.Random(seed)
    counter = iter(range(10_000))

    def record() -> dict:
        key = rng.choice([None, 1, 2, 3, 4, 5, 6, 7, 8])
        second = rng.choice([None, "x", "y"])
        day = rng.choice([None, 1, 2, 3, 3, 4])
        return {"Id": key, "a.b": second, "updatedAt": None if day is None else f"2025-01-0{day}T00:00:00Z", "v": next(counter)}

    return [[record() for _ in range(40)] for _ in range(6)]


def merged_rows(table, commits, keys, cursor, staged: bool = False) -> list[tuple]:
    """The rows after ``commits``; ``staged``: each commit's first half written ahead of it (a far checkpoint's staged files)."""
    target = StreamTarget("t", None, SCHEMA, incremental=True, destination_sync_mode=APPEND_DEDUP,
                          primary_key=[[key] for key in keys], cursor_field=cursor)
    table.recover()
    writer = TableWriter(table, target, arrow_schema(SCHEMA), recorded_schema=table.recorded_schema())
    for number, records in enumerate(commits):
        batch = writer.to_arrow(records, [1000] * len(records))
        if staged:
            ahead, batch = batch.slice(0, batch.num_rows // 2), batch.slice(batch.num_rows // 2)
            writer.apply([CommitJob(writer, [ahead], ahead.num_rows, ahead.nbytes, None, None, stage_only=True)])
        writer.apply([CommitJob(writer, [batch], batch.num_rows, batch.nbytes, {"n": number}, ResumeNotes(start_state={}))])
    frame = table.read()
    return sorted((tuple(row) for row in frame.select("Id", "`a.b`", "updatedAt", "v", "_sf_checkpoint").collect()), key=repr)


@pytest.mark.parametrize("seed", [1, 2])
@pytest.mark.parametrize(("keys", "cursor"), [(["Id"], ["updatedAt"]), (["Id", "a.b"], ["updatedAt"]), (["Id"], [])])
def test_a_delta_merge_and_an_arrow_rewrite_keep_the_rows_the_spark_rewrite_keeps(spark, tmp_path, seed, keys, cursor):
    from deltalake import DeltaTable

    commits = commits_of(seed)
    reference = merged_rows(SparkTable(spark, str(tmp_path / "spark"), arrow_writes=False), commits, keys, cursor)
    delta = DeltaLakeTable(spark, str(tmp_path / "delta"), arrow_writes=True)
    assert merged_rows(delta, commits, keys, cursor) == reference
    assert merged_rows(SparkTable(spark, str(tmp_path / "arrow"), arrow_writes=True), commits, keys, cursor) == reference
    operations = [entry["operation"] for entry in DeltaTable(str(tmp_path / "delta")).history()]
    assert operations.count("MERGE") == len(commits) - 1  # the first commit creates the table
    null_keys = sum(1 for records in commits for r in records if any(r[k] is None for k in keys))
    assert sum(1 for row in reference if row[0] is None or (len(keys) > 1 and row[1] is None)) == null_keys


def test_staged_rows_merge_alike_in_the_arrow_and_the_spark_rewrite(spark, tmp_path):
    """Half of each commit's rows written ahead of it, as a far checkpoint does: merged after the table's, before the commit's."""
    commits = commits_of(3)
    reference = merged_rows(SparkTable(spark, str(tmp_path / "spark"), arrow_writes=False), commits, ["Id"], ["updatedAt"], staged=True)
    arrow = merged_rows(SparkTable(spark, str(tmp_path / "arrow"), arrow_writes=True), commits, ["Id"], ["updatedAt"], staged=True)
    assert arrow == reference
    assert merged_rows(DeltaLakeTable(spark, str(tmp_path / "delta"), arrow_writes=True), commits, ["Id"], ["updatedAt"],
                       staged=True) == reference


def test_a_merge_that_changes_no_row_still_commits_its_checkpoint(spark, tmp_path):
    """Records read again, none newer than the table's: delta-rs's MERGE then commits nothing, and
    the checkpoint's state must still be committed (found by the SIGKILL test)."""
    table = DeltaLakeTable(spark, str(tmp_path / "delta"), arrow_writes=True)
    records = [{"Id": 1, "a.b": "x", "updatedAt": "2025-01-02T00:00:00Z", "v": 1}]
    older = [{"Id": 1, "a.b": "x", "updatedAt": "2025-01-01T00:00:00Z", "v": 2}]
    rows = merged_rows(table, [records, older, []], ["Id"], ["updatedAt"])
    assert [row[3] for row in rows] == [1]
    newest = table.last_checkpoint()
    assert newest is not None and newest.seq == 2 and newest.state == {"n": 2}


def test_a_parquet_sync_of_a_deduplicated_stream_merges_in_its_own_process_without_pyspark(spark, demo_api, tmp_path):
    """Two syncs in real processes, the second merging into the table, neither importing pyspark. Found by a benchmark:
    such a sync (a few hundred records) failed at its first commit, which came while Spark was still starting in the
    background: two threads importing pyspark at once ("cannot import name 'SQLContext' from partially initialized
    module")."""
    config = config_for(demo_api, tmp_path / "warehouse")
    config["destination"].update(table_format="parquet", spark_master="local[1]")
    config_path = write_json(tmp_path / "config.json", config)
    catalog_path = write_json(tmp_path / "catalog.json", catalog("orders", overrides={"orders": {"destination_sync_mode": "append_dedup"}}))
    state: list[str] = []
    for _ in range(2):
        process = subprocess.run([sys.executable, "-X", "importtime", MAIN, "read", "--config", config_path, "--catalog",
                                  catalog_path, *state], capture_output=True, cwd=ROOT, timeout=300)
        stderr = process.stderr.decode(errors="replace")
        assert process.returncode == 0, stderr[-3000:]
        assert not re.findall(r"^import time:.*\|\s+(pyspark\S*)\s*$", stderr, flags=re.M), "the sync imported pyspark"
        states = [json.loads(line)["state"] for line in process.stdout.splitlines() if json.loads(line)["type"] == "STATE"]
        state = ["--state", write_json(tmp_path / "state.json", states[-1:])]
    ids = [row["id"] for row in landed_rows(spark, str(tmp_path / "warehouse" / "demo" / "orders"))]
    assert len(ids) == len(set(ids)) == 1500  # (the demo API's orders)
