"""The state workflow as a property (Hypothesis): whatever sequence of syncs, kills, API updates,
resets, cursor moves and schema changes a user goes through, the table ends holding exactly the
rows a model of the workflow says it must, row for row, in ``append`` and in ``append_dedup``.

The model (``Model``) knows only the API's records and the steps taken: what each sync reads
(from the state file's cursor, or from the table's newest commit when the table is ahead of it),
what a reset and a set promise, and, for a kill, which commit it landed after. That last fact is
the one thing it observes (the table's newest committed cursor, before and after): where a kill
lands depends on timing (checkpoints that queue behind a commit are merged into one), what the
table must then hold does not. The API's timestamps are distinct and its pages sorted, so a
commit's cursor says exactly which records it covers.

Each step runs in this process on the test run's one Spark session. A kill is a ``SimulatedCrash``
raised at one of the runtime's fault points (``helpers/faults.py``); from then on every fault point
raises it too, so commits still queued are abandoned as a SIGKILL would abandon them, and one in
progress stops at its next point. The real SIGKILLs are in ``test_crash_recovery.py`` and
``test_data_safety.py``.
"""

from __future__ import annotations

from collections import Counter
from contextlib import nullcontext

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from integration_tests.conftest import API_KEY, all_records, catalog, config_for, landed_rows, table_at, write_json
from source_framework.demo.api import DemoApi
from source_framework.demo.source import DemoSource, Users
from source_framework.destinations.spark.layout import table_path
from source_framework.helpers.faults import SimulatedCrash, crash_at
from source_framework.runtime.entrypoint import build_parser, run_command
from source_framework.streams.cursor import parse_datetime
from source_framework.testing import read

pytestmark = pytest.mark.slow

READ_KILLS = ["commit.start", "commit.record_written", "commit.files_written", "commit.done", "state.printed",
              "recovery.start", "recovery.removing"]
RESET_KILLS = [None, "state.reset.marked", "state.reset.saved", "state.reset.deleting"]
SET_KILLS = [None, "recovery.start", "commit.files_written", "commit.done", "state.set.committed", "state.set.truncated"]
#: kills of a read that stop it before it changed anything (the table is only being cleaned up)
BEFORE_ANYTHING = {"recovery.start", "recovery.removing"}
#: the Parquet folder's own steps: a Delta table's commit is one transaction, with no record
#: written ahead of it and no recovery of ours, so a Delta table's workflow is killed elsewhere
PARQUET_ONLY = {"commit.record_written", "recovery.start", "recovery.removing"}


def steps_killed_at(read_kills: list[str], set_kills: list[str | None]) -> st.SearchStrategy:
    return st.lists(
        st.one_of(
            st.tuples(st.just("read")),
            st.tuples(st.just("kill"), st.sampled_from(read_kills), st.integers(1, 3)),
            st.tuples(st.just("touch"), st.integers(1, 6)),
            st.tuples(st.just("reset"), st.booleans(), st.sampled_from(RESET_KILLS)),
            st.tuples(st.just("set"), st.integers(0, 59), st.sampled_from(set_kills)),
            st.tuples(st.just("schema"), st.sampled_from(["add", "widen", "incompatible"])),
        ),
        min_size=1,
        max_size=6,
    )


#: the steps on a Delta table (the default) and on a ``parquet`` one
steps = {
    "delta": steps_killed_at([k for k in READ_KILLS if k not in PARQUET_ONLY], [k for k in SET_KILLS if k not in PARQUET_ONLY]),
    "parquet": steps_killed_at(READ_KILLS, SET_KILLS),
}


# -- the connector, its schema changed between syncs -------------------------------------------------


class EvolvingUsers(Users):
    """The demo's users under a schema with ``changes`` applied: ``add`` a nullable column,
    ``widen`` a date-time column to text, make a text column an ``incompatible`` integer."""

    changes: frozenset = frozenset()
    keyless = False  # the same stream without a primary key (an event log)

    @property
    def name(self):
        return "users"

    @property
    def primary_key(self):
        return None if self.keyless else "id"

    def get_json_schema(self):
        schema = super().get_json_schema()
        properties = schema["properties"]
        if "add" in self.changes:
            properties["nickname"] = {"type": ["null", "string"]}
        if "widen" in self.changes:
            properties["createdAt"] = {"type": ["null", "string"]}
        if "incompatible" in self.changes:
            properties["job"] = {"type": ["null", "integer"]}
        return schema


class EvolvingSource(DemoSource):
    def __init__(self, changes, keyless=False):
        super().__init__()
        self.changes = frozenset(changes)
        self.keyless = keyless

    def streams(self, config):
        streams = super().streams(config)
        users = EvolvingUsers(config)
        users.changes, users.keyless = self.changes, self.keyless
        return [users if stream.name == "users" else stream for stream in streams]


# -- the model ---------------------------------------------------------------------------------------

#: the state file holds some state the table committed (which one does not matter any more)
SOME_COMMITTED = "some committed state"


class Model:
    """What the users table must hold: ``rows`` ((id, updatedAt) versions, duplicates counted, or
    one per id for ``append_dedup``), None while the table has no commit. ``newest``: the cursor of
    its newest commit; ``marker``: a reset is pending; ``file_state``: the state file's cursor (None:
    no state).

    Without a primary key a record read again at the cursor is known by its data in the table, also
    in rows a widening rewrote (a date-time column become text: the table knows it was one)."""

    def __init__(self, mode):
        self.dedup = mode == "append_dedup"
        self.keyless = mode == "append, no key"
        self.rows: Counter | None = None
        self.newest = None
        self.marker = False
        self.file_state = None

    def _with(self, rows, added):
        if not self.dedup:
            return rows + Counter(added)
        latest = dict(rows.elements())  # one version per id: the latest cursor wins
        for key, version in added:
            latest[key] = max(version, latest.get(key, version))
        return Counter(latest.items())

    def read(self, served, landed="completed"):
        """A sync. ``landed``: "completed", the cursor of the last commit a killed sync landed, None
        (killed before its first commit), or "before" (killed while cleaning up the table)."""
        if landed == "before":
            return
        rebuild = self.marker and self.file_state is None
        self.marker = self.marker and rebuild  # given a state, the sync drops the mark
        if landed is None:
            return
        start = None if rebuild else (self.newest if self.newest is not None else self.file_state)
        old = Counter() if rebuild or self.rows is None else self.rows
        reading = sorted((r for r in served if start is None or r[1] >= start), key=lambda r: r[1])
        if not rebuild and self.newest is not None:  # the records at the cursor the table committed are skipped
            reading = [r for r in reading if not (r[1] == start and old[r])]
        upto = landed if landed != "completed" else max([start, *(r[1] for r in reading)], key=lambda t: (t is not None, t))
        self.rows = self._with(old, [r for r in reading if r[1] <= upto])
        self.newest = upto
        self.marker = False
        self.file_state = upto if landed == "completed" else SOME_COMMITTED

    def reset(self, tables, killed_at, no_table):
        if killed_at == "state.reset.marked":
            self.marker = self.marker or (self.newest is not None and not no_table)
            return
        if not no_table:
            self.marker = self.newest is not None
        self.file_state = None
        if tables and not no_table and killed_at != "state.reset.saved":
            self.rows, self.newest, self.marker = None, None, False

    def set(self, cursor, committed, saved):
        """``committed``: the set's rewrite of the table landed; ``saved``: its state file too."""
        if committed:
            kept = [(key, version) for key, version in self.rows.elements() if version < cursor]
            self.rows, self.newest, self.marker = Counter(kept), cursor, False
        if saved:
            self.file_state = cursor


# -- the user's warehouse, state file and API, driven step by step --------------------------------------------


#: the destination sync modes the property runs in; "append, no key": the stream has no primary key
MODES = ["append", "append_dedup", "append, no key"]


class Workflow:
    def __init__(self, spark, api, folder, mode, table_format, warehouse):
        self.spark, self.api = spark, api
        self.keyless = mode == "append, no key"
        self.config = config_for(api, warehouse, page_size=20, state_checkpoint_interval=15,
                                 destination={"type": "spark", "warehouse": warehouse, "spark_master": "local[1]",
                                              "table_format": table_format})
        self.config_path = write_json(folder / "config.json", self.config)
        self.state_file = str(folder / "state.json")
        entry = {"destination_sync_mode": "append", "primary_key": []} if self.keyless else {"destination_sync_mode": mode}
        self.catalog = catalog("users", overrides={"users": entry})
        self.table = table_path(self.config["destination"]["warehouse"], "demo", "users")
        self.changes: set[str] = set()
        self.model = Model(mode)

    def source(self, *extra):
        return EvolvingSource(self.changes | set(extra), self.keyless)

    def served(self):
        return [(r["id"], parse_datetime(r["updatedAt"]).replace(tzinfo=None)) for r in all_records(self.api, "users")]

    def newest(self):
        """(seq, cursor) of the table's newest commit, or None: where a kill landed."""
        record = table_at(None, self.table).last_checkpoint()
        if record is None:
            return None
        cursor = (record.state or {}).get("updatedAt")
        return record.seq, parse_datetime(cursor).replace(tzinfo=None) if cursor else None

    def table_rows(self):
        return Counter((r["id"], r["updatedAt"]) for r in landed_rows(self.spark, self.table))

    def sync(self, *extra_changes):
        return read(self.source(*extra_changes), self.config, self.catalog, args=["--state-file", self.state_file])

    def read(self):
        served = self.served()
        output = self.sync()
        assert output.returncode == 0, [m for m in output.messages if m["type"] == "TRACE"][-3:]
        self.model.read(served)

    def kill(self, point, count):
        served, before = self.served(), self.newest()
        with crash_at(point, count):
            try:
                output = self.sync()
            except SimulatedCrash:
                after = self.newest()
                if point in BEFORE_ANYTHING:
                    assert after == before
                    self.model.read(served, "before")
                else:
                    self.model.read(served, after[1] if after != before else None)
                return
        assert output.returncode == 0  # the point was not reached that often: the sync completed
        self.model.read(served)

    def state(self, *args, kill=None, no_table=False):
        """A state command, killed at ``kill``; True if it was killed. ``no_table``: the table has
        no commit yet, so the command is told to change only the state file."""
        argv = ["state", *args, "--config", self.config_path, "--state-file", self.state_file, *(["--no-table"] if no_table else [])]
        parsed = build_parser().parse_args(argv)
        with crash_at(kill) if kill else nullcontext():
            try:
                assert run_command(self.source(), parsed) == 0
            except SimulatedCrash:
                return True
        return False

    def reset(self, tables, kill):
        no_table = self.newest() is None
        assert no_table == (self.model.newest is None)
        killed = self.state("reset", "--stream", "users", *(["--tables"] if tables else []), kill=kill, no_table=no_table)
        self.model.reset(tables, kill if killed else None, no_table)

    def set(self, index, kill):
        cursors = sorted(r["updatedAt"] for r in all_records(self.api, "users"))
        cursor = cursors[index % len(cursors)]
        before = self.newest()
        killed = self.state("set", "--stream", "users", "--cursor", cursor, kill=kill, no_table=before is None)
        committed = before is not None and self.newest() != before
        if killed and kill in ("commit.done", "state.set.committed", "state.set.truncated"):
            assert committed, f"the set was killed at {kill}, after its commit, yet the table did not move"
        self.model.set(parse_datetime(cursor).replace(tzinfo=None), committed, saved=not killed)

    def schema(self, change):
        if change != "incompatible":
            self.changes.add(change)
            return
        if self.model.newest is None or (self.model.marker and self.model.file_state is None):
            return  # no table is kept: nothing to be incompatible with
        output = self.sync("incompatible")
        assert output.returncode == 1
        (error,) = [m["trace"]["error"]["message"] for m in output.messages if m["type"] == "TRACE" and m["trace"]["type"] == "ERROR"]
        assert "'job'" in error and "state reset --stream users --tables" in error, error
        assert self.table_rows() == self.model.rows  # nothing written

    def run(self, step):
        kind, *args = step
        if kind == "touch":
            self.api.touch("users", args[0])
        else:
            getattr(self, kind)(*args)


def workflow_property(table_format):
    """The property's Hypothesis settings, steps and explicit examples, for tables of ``table_format``."""

    def decorate(test):
        for decorator in (
            # without a primary key, the records at the cursor are known by their data in the table, across a
            # widened column and an added one, and after kills that abandon queued commits
            example(steps=[("read",), ("schema", "widen"), ("kill", "state.printed", 2), ("schema", "add"), ("touch", 3),
                           ("kill", "commit.done", 1)], mode="append, no key"),
            # a kill that abandons queued commits, a schema the table takes, one it refuses, a set it rewrites to
            example(steps=[("kill", "state.printed", 1), ("schema", "widen"), ("touch", 3), ("schema", "incompatible"),
                           ("set", 40, "state.set.truncated"), ("kill", "commit.files_written", 1)], mode="append_dedup"),
            # a set after a reset, killed after its commit: the next sync goes on from the set's cursor
            example(steps=[("read",), ("touch", 4), ("reset", False, None), ("set", 20, "commit.done")], mode="append"),
            given(steps=steps[table_format], mode=st.sampled_from(MODES)),
            settings(max_examples=6, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow]),
        ):
            test = decorator(test)
        return test

    return decorate


def run_workflow(spark, folder, steps, mode, table_format, warehouse=None):
    """The steps, then a clean sync, on tables in ``warehouse`` (by default a folder in ``folder``)."""
    with DemoApi(records=60, api_key=API_KEY, seed=5).start() as api:
        workflow = Workflow(spark, api, folder, mode, table_format, warehouse or str(folder / "warehouse"))
        for step in steps:
            workflow.run(step)
        workflow.read()  # the clean sync that must leave the table right
        assert workflow.table_rows() == workflow.model.rows, f"after {steps}"
        assert workflow.newest()[1] == workflow.model.newest


@workflow_property("delta")
def test_any_sequence_of_operations_ends_with_exactly_the_rows_the_model_says(spark, tmp_path_factory, steps, mode):
    run_workflow(spark, tmp_path_factory.mktemp("workflow"), steps, mode, "delta")


@workflow_property("parquet")
def test_any_sequence_of_operations_on_a_parquet_table_ends_with_exactly_the_rows_the_model_says(spark, tmp_path_factory, steps, mode):
    """The same on a ``parquet`` table, with the Parquet folder's own kill points (its record
    written ahead of the commit, its recovery) among the draws."""
    run_workflow(spark, tmp_path_factory.mktemp("workflow"), steps, mode, "parquet")


@workflow_property("delta")
def test_any_sequence_of_operations_on_an_s3_table_ends_with_exactly_the_rows_the_model_says(
        spark, tmp_path_factory, s3_warehouse, steps, mode):
    """The same on Delta tables on the local S3 server (a warehouse of its own for each example)."""
    folder = tmp_path_factory.mktemp("workflow")
    run_workflow(spark, folder, steps, mode, "delta", warehouse=f"{s3_warehouse}/{folder.name}")
