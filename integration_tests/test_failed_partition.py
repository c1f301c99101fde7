"""A store of the demo's ``store_orders`` (a ``PartitionedIncrementalStream``: one cursor per store,
moved record by record) answers 404 after its first page. The stores after it are synced anyway,
the failed store's cursor stays at the last record read from it (those records are committed with
it), and the stream ends INCOMPLETE; the next sync, with the store back, goes on from there and
ends with every order of every store in the table once.

Before, the stream stopped at the failed store: a store gone for good (a parent deleted in the
API) kept every store after it from ever syncing again (found with airbyte-cdk's concurrent
framework, which reads on; ``integration_tests/conformance/test_partition_failure.py``).
"""

from __future__ import annotations

import os
from collections import Counter
from urllib.parse import parse_qs, urlsplit

import pytest

from integration_tests.conftest import API_KEY, all_records, catalog, config_for, read_table, run_in_process, write_json
from source_framework.demo.api import DemoApi

STORE, PAGE = 3, 100


class StoreGone(DemoApi):
    """The demo API whose store ``STORE`` answers 404 from its second page on while ``down``."""

    down = True

    def respond(self, method, target, headers, body):
        parts = urlsplit(target)
        offset = int(parse_qs(parts.query).get("offset", ["0"])[0])
        if self.down and parts.path == f"/stores/{STORE}/orders" and offset >= PAGE:
            return 404, {"error": f"no such store: {STORE}"}, {}
        return super().respond(method, target, headers, body)


def _ids(spark, warehouse):
    rows = read_table(spark, os.path.join(str(warehouse), "demo", "store_orders")).select("storeId", "id").collect()
    return Counter((row.storeId, row.id) for row in rows)


def _ended(run):
    return [m["trace"]["stream_status"]["status"] for m in run.of_type("TRACE")
            if m["trace"]["type"] == "STREAM_STATUS" and m["trace"]["stream_status"]["status"] in ("COMPLETE", "INCOMPLETE")]


@pytest.mark.parametrize("concurrency", ["1", "4"])
def test_a_failed_store_does_not_keep_the_stores_after_it_from_syncing(spark, tmp_path, concurrency):
    with StoreGone(records=1500, api_key=API_KEY, seed=7).start() as api:
        everything = {store: all_records(api, f"stores/{store}/orders", {"since": "2025-01-01T00:00:00Z"})
                      for store in range(1, 11)}
        assert len(everything[STORE]) > PAGE  # the store fails after its first page
        warehouse = tmp_path / "warehouse"
        config = write_json(tmp_path / "config.json", config_for(api, warehouse, page_size=PAGE, concurrency_level=int(concurrency)))
        cat = write_json(tmp_path / "catalog.json", catalog("store_orders"))

        first = run_in_process("read", "--config", config, "--catalog", cat)
        assert first.returncode != 0 and _ended(first) == ["INCOMPLETE"], first.stderr[-2000:]
        errors = [m["trace"]["error"]["message"] for m in first.of_type("TRACE") if m["trace"]["type"] == "ERROR"]
        assert len(errors) == 1 and "404" in errors[0], errors
        # every other store whole, and the failed store's first page, which its cursor covers
        read = {(store, r["id"]) for store, records in everything.items() for r in records
                if store != STORE or r in everything[STORE][:PAGE]}
        assert _ids(spark, warehouse) == Counter(read)
        (state,) = [s["stream"]["stream_state"] for s in first.states.values()]
        cursors = {entry["partition"]["store_id"]: entry["cursor"]["updatedAt"] for entry in state["states"]}
        assert cursors[STORE] == everything[STORE][PAGE - 1]["updatedAt"]
        assert cursors[10] == everything[10][-1]["updatedAt"]  # the stores after it were read to their end

        api.down = False
        resumed = run_in_process("read", "--config", config, "--catalog", cat, "--state",
                                 first.state_file(str(tmp_path / "state.json")))
        assert resumed.returncode == 0, resumed.stderr[-2000:]
        assert _ids(spark, warehouse) == Counter((store, r["id"]) for store, records in everything.items() for r in records)


@pytest.mark.parametrize("attributes, settings", [({"partitions_fail_alone": False}, {}), ({}, {"assume_sorted": False})],
                         ids=["opted-out", "unsorted"])
def test_a_stream_that_may_not_read_on_stops_at_the_failed_store_and_resumes_from_there(
    spark, tmp_path, monkeypatch, attributes, settings
):
    """Opted out (``partitions_fail_alone = False``, airbyte-cdk's ``HttpSubStream`` behaviour), or
    unsorted (the partition's cursor may have passed records it had not read yet): the stream stops
    at the failed store, keeping what the stores before it committed."""
    from source_framework.demo.source import StoreOrders

    for name, value in attributes.items():
        monkeypatch.setattr(StoreOrders, name, value)
    with StoreGone(records=1500, api_key=API_KEY, seed=7).start() as api:
        everything = {store: all_records(api, f"stores/{store}/orders", {"since": "2025-01-01T00:00:00Z"})
                      for store in range(1, 11)}
        warehouse = tmp_path / "warehouse"
        config = write_json(tmp_path / "config.json", config_for(api, warehouse, page_size=PAGE, **settings))
        cat = write_json(tmp_path / "catalog.json", catalog("store_orders"))
        first = run_in_process("read", "--config", config, "--catalog", cat)
        assert first.returncode != 0 and _ended(first) == ["INCOMPLETE"], first.stderr[-2000:]
        committed = _ids(spark, warehouse)
        assert {store for store, _ in committed} == {1, 2}  # nothing of store 3's page, nothing after it
        api.down = False
        resumed = run_in_process("read", "--config", config, "--catalog", cat, "--state",
                                 first.state_file(str(tmp_path / "state.json")))
        assert resumed.returncode == 0, resumed.stderr[-2000:]
        assert _ids(spark, warehouse) == Counter((store, r["id"]) for store, records in everything.items() for r in records)
