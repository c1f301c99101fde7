"""compare: where the syncs' tables are (the Spark destination ``read`` builds says), and what they committed."""

import argparse
import json
import os
from contextlib import closing

import pytest

from source_framework.compare.command import checked_tables
from source_framework.compare.commits import CommitStats, commit_stats
from source_framework.compare.experiment import Experiment, RunFailed, StreamTable
from source_framework.compare.runner import RunResult
from source_framework.compare.settings import Setting
from source_framework.demo.source import DemoSource
from source_framework.destinations.checkpoint_record import CheckpointRecord
from unit_tests.conftest import catalog_of, configured


def test_the_tables_are_where_the_childrens_read_put_them(tmp_path):
    """Not a path of the tool's own: the destination ``read --warehouse <folder>/clean`` builds,
    which places a stream without a namespace under the source's name, whatever the config says."""
    config = {"destination": {"warehouse": str(tmp_path / "the-configs-own"), "spark_master": "local[1]"}}
    experiment = Experiment(str(tmp_path), "main.py", DemoSource(), config, str(tmp_path / "catalog.json"), [])
    folder = str(tmp_path / "interval-none")
    with closing(experiment.read_destination(Setting(None), folder, "clean")) as destination:
        assert destination.table_path(None, "users") == os.path.join(folder, "clean", DemoSource().name, "users")
        assert destination.table_path("shop", "a/b") == os.path.join(folder, "clean", "shop", "a~2Fb")
        assert destination.master == "local[1]"


def test_each_table_is_where_read_puts_the_stream_whatever_namespace_the_catalog_gives():
    """``read`` places a table by its stream's namespace in the source (None: under the source's name);
    the comparison looked under the catalog's and found nothing, which it reported as a clean pass."""
    catalog = catalog_of(configured("users", namespace="catalog_ns"), configured("orders", primary_key=[["meta", "id"]]))
    parsed = argparse.Namespace(config="config.json", catalog="catalog.json")
    config = {"api_key": "k" * 12, "api_url": "http://127.0.0.1:9", "start_date": "2025-01-01T00:00:00Z"}
    tables = checked_tables(DemoSource(), config, catalog, [Setting(None)], parsed)
    # a nested key lives inside a JSON-string column: whole rows are compared instead
    assert tables == [StreamTable("users", None, ["id"]), StreamTable("orders", None, [])]


class Committed:
    """A table's committed checkpoints, newest first, as ``committed_table`` hands them out."""

    path = "/nowhere"

    def __init__(self, *records: CheckpointRecord) -> None:
        self.records = records

    def committed_checkpoints(self):
        return iter(self.records)


def test_commit_stats_count_the_commits_their_files_and_rows():
    table = Committed(
        CheckpointRecord(seq=2, batch_id=1, state={"t": 2}, files=("c2-0.parquet", "c2-1.parquet"), rows=30),
        CheckpointRecord(seq=1, batch_id=0, state={"t": 1}, files=("c1-0.parquet",), rows=12),
    )
    assert commit_stats(table) == CommitStats(commits=2, files=3, rows=42)
    assert commit_stats(Committed()) == CommitStats()


def test_a_stream_the_clean_run_read_but_no_table_holds_stops_the_comparison(tmp_path):
    """Whatever sends the comparison to the wrong place, an empty table must not read as a clean pass."""
    experiment = Experiment(str(tmp_path), "main.py", DemoSource(), {}, str(tmp_path / "catalog.json"),
                            [StreamTable("users", "elsewhere", ["id"])])
    clean = RunResult(name="clean", returncode=0, killed=False, seconds=1.0, records=10, states=1,
                      repeated_states=0, max_at_risk=10, at_risk_at_end=0, reads={"users": 10})
    with pytest.raises(RunFailed, match="read 10 records of 'users', but no commit is in its table at .*elsewhere"):
        experiment._committed(Setting(None), str(tmp_path / "interval-none"), clean)
    nothing_read = RunResult(**{**vars(clean), "records": 0, "reads": {"users": 0}})
    assert experiment._committed(Setting(None), str(tmp_path / "interval-none"), nothing_read) == CommitStats()


def test_the_spark_master_reaches_the_children_through_their_config_not_their_command_line(tmp_path):
    """A Spark Connect URL holds a token: on a command line, anyone on the machine sees it in ps."""
    master = "sc://spark.example:15002/;token=TOKEN-abc-123"
    experiment = Experiment(str(tmp_path), "main.py", DemoSource(), {"destination": {"warehouse": "w"}},
                            str(tmp_path / "catalog.json"), [], spark_master=master)
    folder = str(tmp_path / "interval-none")
    assert "TOKEN-abc-123" not in " ".join(experiment._read_args("config.json", folder, "clean"))
    with open(experiment._write_config(folder, Setting(None))) as handle:
        assert json.load(handle)["destination"] == {"warehouse": "w", "spark_master": master}
    assert oct(os.stat(os.path.join(folder, "config.json")).st_mode & 0o777) == "0o600"
