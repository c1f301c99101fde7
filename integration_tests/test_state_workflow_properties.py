"""The state workflow as a property (Hypothesis): whatever sequence of syncs, crashes, API updates,
resets and cursor moves a user goes through, the next clean sync leaves a table that holds every
record the API serves now, and no record version twice.

Each step runs in this process on the test run's one Spark session; a crash is a
``SimulatedCrash`` raised at one of the runtime's fault points (``helpers/faults.py``), which
escapes the runtime as a kill would (the table's locks are released, queued commits of other
streams may land: states a run never printed, as after a real kill between a commit and its
STATE). The real SIGKILLs are in ``test_crash_recovery.py`` and ``test_data_safety.py``.
"""

from __future__ import annotations

import collections
import os

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from integration_tests.conftest import API_KEY, all_records, catalog, config_for, write_json
from source_framework.demo.api import DemoApi
from source_framework.demo.source import DemoSource
from source_framework.destinations.spark.layout import table_path
from source_framework.helpers.faults import SimulatedCrash, crash_at
from source_framework.runtime.entrypoint import build_parser, run_command
from source_framework.streams.cursor import parse_datetime
from source_framework.testing import read

pytestmark = pytest.mark.slow

COMMIT_POINTS = ["commit.record_written", "commit.files_written", "commit.done", "state.printed", "recovery.start"]

steps = st.lists(
    st.one_of(
        st.tuples(st.just("read")),
        st.tuples(st.just("crash"), st.sampled_from(COMMIT_POINTS), st.integers(1, 3)),
        st.tuples(st.just("touch"), st.integers(1, 6)),
        st.tuples(st.just("reset"), st.booleans(), st.sampled_from([None, "state.reset.marked", "state.reset.saved"])),
        st.tuples(st.just("set"), st.integers(0, 59), st.sampled_from([None, "state.set.truncated"])),
    ),
    min_size=1,
    max_size=6,
)


class Workflow:
    """One user's warehouse, state file and API, driven step by step."""

    def __init__(self, api, folder, mode):
        self.api = api
        self.config = config_for(api, folder / "warehouse", page_size=20, state_checkpoint_interval=15,
                                 destination={"type": "spark", "warehouse": str(folder / "warehouse"), "spark_master": "local[1]"})
        self.config_path = write_json(folder / "config.json", self.config)
        self.state_file = str(folder / "state.json")
        self.catalog = catalog("users", overrides={"users": {"destination_sync_mode": mode}})
        #: record versions a ``state set`` told the sync to skip (cursor before the one set)
        self.skipped_on_purpose: set = set()

    def read(self):
        output = read(DemoSource(), self.config, self.catalog, args=["--state-file", self.state_file])
        assert output.returncode == 0, [m for m in output.messages if m["type"] == "TRACE"][-3:]

    def crash(self, point, count):
        with crash_at(point, count):
            try:
                read(DemoSource(), self.config, self.catalog, args=["--state-file", self.state_file])
            except SimulatedCrash:
                pass

    def state(self, *args, crash=None):
        argv = ["state", *args, "--config", self.config_path, "--state-file", self.state_file]
        if not self.has_table():
            argv.append("--no-table")  # before the first sync there is no table to change
        parsed = build_parser().parse_args(argv)
        if crash is None:
            assert run_command(DemoSource(), parsed) == 0
            return
        with crash_at(crash):
            try:
                run_command(DemoSource(), parsed)
            except SimulatedCrash:
                pass

    def has_table(self):
        return os.path.isdir(table_path(self.config["destination"]["warehouse"], "demo", "users"))

    def run(self, step):
        kind = step[0]
        if kind == "read":
            self.read()
        elif kind == "crash":
            self.crash(step[1], step[2])
        elif kind == "touch":
            self.api.touch("users", step[1])
        elif kind == "reset":
            self.state("reset", "--stream", "users", *(["--tables"] if step[1] else []), crash=step[2])
        elif kind == "set":
            cursors = sorted(r["updatedAt"] for r in all_records(self.api, "users"))
            cursor = cursors[step[1] % len(cursors)]
            # Moving the cursor forward skips what lies before it, on purpose; that is not a loss.
            self.skipped_on_purpose |= {(i, t) for i, t in served(self.api) if t < parse_datetime(cursor)}
            self.state("set", "--stream", "users", "--cursor", cursor, crash=step[2])


def served(api):
    return {(r["id"], parse_datetime(r["updatedAt"])) for r in all_records(api, "users")}


@settings(max_examples=6, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(steps=steps, mode=st.sampled_from(["append", "append_dedup"]))
def test_any_sequence_of_operations_ends_with_every_record_exactly_once(spark, tmp_path_factory, steps, mode):
    folder = tmp_path_factory.mktemp("workflow")
    with DemoApi(records=60, api_key=API_KEY, seed=5).start() as api:
        workflow = Workflow(api, folder, mode)
        for step in steps:
            workflow.run(step)
        workflow.read()  # the clean sync that must leave the table right
        frame = spark.read.parquet(table_path(workflow.config["destination"]["warehouse"], "demo", "users"))
        rows = [(r["id"], r["updatedAt"]) for r in frame.select("id", "updatedAt").collect()]
        versions = collections.Counter((i, t.replace(tzinfo=None)) for i, t in rows)
        now = {(i, t.replace(tzinfo=None)) for i, t in served(api)}
        expected = now - {(i, t.replace(tzinfo=None)) for i, t in workflow.skipped_on_purpose}
        assert expected <= set(versions), f"lost: {sorted(expected - set(versions))[:5]} after {steps}"
        assert max(versions.values()) == 1, f"written twice: {[v for v, n in versions.items() if n > 1][:5]} after {steps}"
        if mode == "append_dedup":
            assert set(versions) <= now and len(rows) == len(set(versions)), f"stale rows after {steps}"
