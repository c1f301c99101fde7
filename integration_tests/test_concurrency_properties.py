"""Concurrent reading as a property (Hypothesis): whatever the concurrency, the checkpoint interval,
the order in which worker threads finish fetching slices and where a sync is killed, the state a
killed sync left is covered by its tables, no table holds a record twice, and the sync resumed
after it (at another concurrency) leaves every record of the API in each table exactly once.

Two streams sync at once: ``orders`` (monthly windows, one cursor) and ``store_orders`` (one
partition and one cursor per store). Each of their requests waits a drawn time, so the slices read
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

from integration_tests.conftest import API_KEY, all_records, catalog, config_for, landed_rows, table_at
from source_framework.demo.api import DemoApi
from source_framework.demo.source import DemoSource, Orders, StoreOrders, Stores
from source_framework.destinations.spark.layout import table_path
from source_framework.helpers.faults import SimulatedCrash, crash_at
from source_framework.streams.cursor import parse_datetime
from source_framework.testing import read
from source_framework.testing.connector_runs import stream_of_state

pytestmark = pytest.mark.slow

# The points of a commit into a Delta table, the default (the Parquet folder's "commit.record_written"
# is not among them: a Delta commit is one transaction; the Parquet folder's kills are in
# test_crash_recovery.py and test_state_workflow_properties.py).
KILLS = ["commit.start", "commit.files_written", "commit.done", "state.printed"]


class SlowPages:
    """Mixed into a demo stream: each request waits ``waits[n % len(waits)]`` ms, n counting the
    stream's requests, so the slices read at once finish in an order of the example's drawing."""

    waits: tuple[int, ...] = (0,)

    def request_params(self, stream_state=None, stream_slice=None, next_page_token=None):
        asked = self.__dict__.setdefault("_asked", [0])
        asked[0] += 1  # (read from several threads: any order of the waits will do)
        time.sleep(self.waits[asked[0] % len(self.waits)] / 1000)
        return super().request_params(stream_state=stream_state, stream_slice=stream_slice, next_page_token=next_page_token)


class SlowOrders(SlowPages, Orders):
    @property
    def name(self):
        return "orders"


class SlowStoreOrders(SlowPages, StoreOrders):
    @property
    def name(self):
        return "store_orders"


class SlowPagesSource(DemoSource):
    def __init__(self, waits):
        super().__init__()
        self.waits = tuple(waits)

    def streams(self, config):
        slow = {"orders": SlowOrders(config), "store_orders": SlowStoreOrders(config, parent=Stores(config))}
        for stream in slow.values():
            stream.waits = self.waits
        return [slow.get(stream.name, stream) for stream in super().streams(config)]


STREAMS = ("orders", "store_orders")


def instant(text):
    """A cursor text as the naive UTC time Spark reads back from the table."""
    return parse_datetime(text).replace(tzinfo=None)


def cursors(stream, state):
    """A stream state's cursors as instants: ``{None: ...}`` for orders, by store for store_orders."""
    if stream == "orders":
        return {None: instant(state["updatedAt"])} if state.get("updatedAt") else {}
    return {entry["partition"]["store_id"]: instant(entry["cursor"]["updatedAt"]) for entry in state.get("states", [])}


def covered(stream, state, served):
    """The served records (``{(id, updatedAt): storeId}``) at or below ``state``'s cursors."""
    tops = cursors(stream, state)
    keys = {row: None if stream == "orders" else store for row, store in served.items()}
    return Counter(row for row, key in keys.items() if key in tops and row[1] <= tops[key])


def table_rows(spark, table):
    return Counter((r["id"], r["updatedAt"]) for r in landed_rows(spark, table))


def file_states(path):
    """Each stream's state in the state file (none: no file yet)."""
    if not path.exists():
        return {}
    return {entry["stream"]["stream_descriptor"]["name"]: entry["stream"]["stream_state"] for entry in json.loads(path.read_text())}


def check_states_in_order(output, label):
    for stream in STREAMS:
        printed = [state["stream"]["stream_state"] for state in output.states() if stream_of_state(state) == stream]
        assert all(a != b for a, b in pairwise(printed)), f"{label}: two identical {stream} STATEs in a row: {printed}"
        for before, after in pairwise(printed):
            for key, top in cursors(stream, before).items():
                moved = cursors(stream, after)
                assert key in moved and moved[key] >= top, f"{label}: a {stream} cursor went backwards: {before} -> {after}"


@settings(max_examples=6, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(
    concurrency=st.sampled_from([2, 4, 8]),
    resumed_concurrency=st.sampled_from([1, 4]),
    interval=st.sampled_from([None, 7, 30]),
    kill=st.sampled_from(KILLS),
    count=st.integers(1, 8),
    waits=st.lists(st.integers(0, 25), min_size=1, max_size=12),
)
# Commits land (up to the third) before their STATEs are printed: the tables are ahead of the
# state file, and the resumed sync must go on from them, not write those records twice.
@example(concurrency=4, resumed_concurrency=1, interval=None, kill="commit.done", count=3, waits=[25, 25, 25, 0])
def test_concurrent_syncs_killed_anywhere_then_resumed_hold_every_record_exactly_once(
    spark, tmp_path_factory, concurrency, resumed_concurrency, interval, kill, count, waits
):
    folder = tmp_path_factory.mktemp("concurrent")
    warehouse = str(folder / "warehouse")
    state_file = folder / "state.json"
    source = SlowPagesSource(waits)
    with DemoApi(records=400, api_key=API_KEY, seed=11).start() as api:
        served = {(r["id"], instant(r["updatedAt"])): r["storeId"] for r in all_records(api, "orders")}
        config = config_for(api, warehouse, page_size=25, state_checkpoint_interval=interval,
                            destination={"type": "spark", "warehouse": warehouse, "spark_master": "local[1]"})
        synced = catalog(*STREAMS, overrides={name: {"destination_sync_mode": "append"} for name in STREAMS})
        args = ["--state-file", str(state_file)]
        tables = {name: table_path(warehouse, "demo", name) for name in STREAMS}

        with crash_at(kill, count):
            try:
                killed = read(source, config, synced, args=[*args, "--concurrency", str(concurrency)])
            except SimulatedCrash:
                killed = None
        if killed is not None:  # the point was not reached that often: the sync completed
            assert killed.returncode == 0
            check_states_in_order(killed, "the sync")
        else:
            left = file_states(state_file)
            for name, table in tables.items():
                checkpoint = table_at(None, table).last_checkpoint()
                if checkpoint is None:
                    assert name not in left, f"a {name} STATE left before any commit landed"
                    continue
                # Whatever the kill cost, what the table holds is there once, and it covers both
                # its own newest commit's state and the state file's (a STATE leaves after its commit).
                rows = table_rows(spark, table)
                assert max(rows.values()) == 1, f"a {name} record committed twice"
                for state in (checkpoint.state or {}, left.get(name, {})):
                    missing = covered(name, state, served) - rows
                    assert not missing, f"{name}: {sum(missing.values())} records at or below {state} are not in the table"

        resumed = read(source, config, synced, args=[*args, "--concurrency", str(resumed_concurrency)])
        assert resumed.returncode == 0, [m for m in resumed.messages if m["type"] == "TRACE"][-3:]
        check_states_in_order(resumed, "the resumed sync")

    expected = Counter(served.keys())
    for name, table in tables.items():
        rows = table_rows(spark, table)
        assert rows == expected, (
            f"{name}: missing {sum((expected - rows).values())}, twice or more {sum((rows - expected).values())} "
            f"(concurrency {concurrency}, then {resumed_concurrency}, interval {interval}, killed at {kill} #{count})")
