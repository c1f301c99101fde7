"""Concurrent reading as a property (Hypothesis): whatever the concurrency, the checkpoint interval,
the order in which worker threads finish fetching slices and where a sync is killed, the state a
killed sync left is covered by its table, the table holds no record twice, and the sync resumed
after it (at another concurrency) leaves every record of the API in the table exactly once.

Each page of each monthly window waits a drawn time before it is asked for, so the windows read
ahead finish fetching in an order of the example's drawing, while the runtime hands them on in
slice order (``runtime/concurrency.py``). A kill is a ``SimulatedCrash`` at one of the runtime's
fault points, as in ``test_state_workflow_properties.py``; from then on every fault point raises
too, so commits still queued are abandoned. Real SIGKILLs at concurrency 4 are in
``test_crash_recovery.py``.
"""

from __future__ import annotations

import json
import time
from collections import Counter
from itertools import pairwise

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from integration_tests.conftest import API_KEY, all_records, catalog, config_for
from source_framework.demo.api import DemoApi
from source_framework.demo.source import DemoSource, Orders
from source_framework.destinations.spark.layout import table_path
from source_framework.destinations.spark.table import SparkTable
from source_framework.helpers.faults import SimulatedCrash, crash_at
from source_framework.streams.cursor import parse_datetime
from source_framework.testing import read

pytestmark = pytest.mark.slow

KILLS = ["commit.start", "commit.record_written", "commit.files_written", "commit.done", "state.printed"]


class SlowPagesOrders(Orders):
    """The demo's orders; each request waits ``waits[n % len(waits)]`` ms, n counting requests,
    so the slices read at once finish in an order of the example's drawing."""

    waits: tuple[int, ...] = (0,)

    @property
    def name(self):
        return "orders"

    def request_params(self, stream_state=None, stream_slice=None, next_page_token=None):
        asked = self.__dict__.setdefault("_asked", [0])
        asked[0] += 1  # (the GIL makes this count good enough: any order of waits will do)
        time.sleep(self.waits[asked[0] % len(self.waits)] / 1000)
        return super().request_params(stream_state=stream_state, stream_slice=stream_slice, next_page_token=next_page_token)


class SlowPagesSource(DemoSource):
    def __init__(self, waits):
        super().__init__()
        self.waits = tuple(waits)

    def streams(self, config):
        streams = super().streams(config)
        orders = SlowPagesOrders(config)
        orders.waits = self.waits
        return [orders if stream.name == "orders" else stream for stream in streams]


def instant(text):
    """A cursor text as the naive UTC time Spark reads back from the table."""
    return parse_datetime(text).replace(tzinfo=None)


def table_rows(spark, table):
    return Counter((r["id"], r["updatedAt"]) for r in spark.read.parquet(table).select("id", "updatedAt").collect())


def file_cursor(path):
    """The orders cursor the state file holds (None: no state file, or no orders state in it)."""
    if not path.exists():
        return None
    for entry in json.loads(path.read_text()):
        if entry["stream"]["stream_descriptor"]["name"] == "orders":
            return entry["stream"]["stream_state"].get("updatedAt")
    return None


def states(output):
    """The orders STATEs' stream states, in the order printed."""
    return [m["state"]["stream"]["stream_state"] for m in output.messages
            if m["type"] == "STATE" and m["state"]["stream"]["stream_descriptor"]["name"] == "orders"]


def check_states_in_order(states, label):
    instants = [instant(s["updatedAt"]) for s in states if s.get("updatedAt") is not None]
    assert instants == sorted(instants), f"{label}: STATE cursors went backwards: {states}"
    assert all(a != b for a, b in pairwise(states)), f"{label}: two identical STATEs in a row: {states}"


@settings(max_examples=6, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(
    concurrency=st.sampled_from([2, 4, 8]),
    resumed_concurrency=st.sampled_from([1, 4]),
    interval=st.sampled_from([None, 7, 30]),
    kill=st.sampled_from(KILLS),
    count=st.integers(1, 6),
    waits=st.lists(st.integers(0, 25), min_size=1, max_size=12),
)
# Commits land (up to the third) before their STATEs are printed: the table is ahead of the state
# file, and the resumed sync must go on from the table, not write those records twice.
@example(concurrency=4, resumed_concurrency=1, interval=None, kill="commit.done", count=3, waits=[25, 25, 25, 0])
def test_a_concurrent_sync_killed_anywhere_then_resumed_holds_every_record_exactly_once(
    spark, tmp_path_factory, concurrency, resumed_concurrency, interval, kill, count, waits
):
    folder = tmp_path_factory.mktemp("concurrent")
    warehouse = str(folder / "warehouse")
    source = SlowPagesSource(waits)
    with DemoApi(records=400, api_key=API_KEY, seed=11).start() as api:
        served = Counter((r["id"], instant(r["updatedAt"])) for r in all_records(api, "orders"))
        config = config_for(api, warehouse, page_size=25, state_checkpoint_interval=interval,
                            destination={"type": "spark", "warehouse": warehouse, "spark_master": "local[1]"})
        orders = catalog("orders", overrides={"orders": {"destination_sync_mode": "append"}})
        args = ["--state-file", str(folder / "state.json")]
        table = table_path(warehouse, "demo", "orders")

        with crash_at(kill, count):
            try:
                killed = read(source, config, orders, args=[*args, "--concurrency", str(concurrency)])
            except SimulatedCrash:
                killed = None
        if killed is not None:  # the point was not reached that often: the sync completed
            assert killed.returncode == 0
            check_states_in_order(states(killed), "the sync")
        elif SparkTable(None, table).last_checkpoint() is not None:
            # Whatever the kill cost, what the table holds is there once, and it covers the state
            # file: every record at or below the state the sync left is committed.
            rows = table_rows(spark, table)
            assert max(rows.values()) == 1, "a record committed twice"
            committed = SparkTable(None, table).last_checkpoint().state.get("updatedAt")
            printed = file_cursor(folder / "state.json")
            if printed is not None:  # a STATE left before the kill: its commit had landed
                assert committed is not None and instant(printed) <= instant(committed), (printed, committed)
            if committed is not None:
                below = Counter({k: n for k, n in served.items() if k[1] <= instant(committed)})
                assert not below - rows, f"records at or below the committed state {committed} are missing"
        else:
            assert file_cursor(folder / "state.json") is None, "a STATE left before any commit landed"

        resumed = read(source, config, orders, args=[*args, "--concurrency", str(resumed_concurrency)])
        assert resumed.returncode == 0, [m for m in resumed.messages if m["type"] == "TRACE"][-3:]
        check_states_in_order(states(resumed), "the resumed sync")

    rows = table_rows(spark, table)
    assert rows == served, (f"missing {sum((served - rows).values())}, twice or more {sum((rows - served).values())} "
                            f"(concurrency {concurrency}, then {resumed_concurrency}, interval {interval}, killed at {kill} #{count})")
