"""compare: where the syncs' tables are (the Spark destination ``read`` builds says), and what they committed."""

import os
from contextlib import closing

from source_framework.compare.command import stream_tables
from source_framework.compare.commits import CommitStats, commit_stats
from source_framework.compare.experiment import Experiment, StreamTable
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


def test_each_configured_stream_keeps_its_namespace_and_a_key_for_the_row_check():
    catalog = catalog_of(configured("users"), configured("events", primary_key=[["meta", "id"]], namespace="shop"))
    assert stream_tables(catalog) == [StreamTable("users", None, ["id"]), StreamTable("events", "shop", [])]


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
