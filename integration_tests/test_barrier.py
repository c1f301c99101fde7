"""The barrier, observed from outside: when a STATE line appears, its records are in the table.

The sync runs as a real ``main.py read`` process. Each time a STATE line arrives the test stops
the process (SIGSTOP), opens the table with its own Spark session, checks that every record up to
that state's cursor is there exactly once, and lets the process go on (SIGCONT).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys

import pytest

from integration_tests.conftest import (
    API_KEY,
    MAIN,
    all_records,
    catalog,
    config_for,
    landed_rows,
    write_json,
)
from source_framework.demo.api import DemoApi, Faults


@pytest.mark.slow
def test_every_state_is_backed_by_committed_records(spark, tmp_path):
    with DemoApi(records=3000, api_key=API_KEY, seed=11, faults=Faults(delay_ms=5)).start() as api:
        warehouse = tmp_path / "warehouse"
        config = write_json(tmp_path / "config.json", config_for(api, warehouse, state_checkpoint_interval=300))
        catalog_path = write_json(tmp_path / "catalog.json", catalog("users", "orders", "store_orders"))
        users = all_records(api, "users")
        orders = all_records(api, "orders")

        process = subprocess.Popen(
            [sys.executable, MAIN, "read", "--config", config, "--catalog", catalog_path],
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
        )
        checked = {"users": 0, "orders": 0, "store_orders": 0}
        try:
            for line in process.stdout:
                message = json.loads(line)
                if message["type"] != "STATE":
                    continue
                process.send_signal(signal.SIGSTOP)
                try:
                    stream = message["state"]["stream"]
                    name, state = stream["stream_descriptor"]["name"], stream["stream_state"]
                    rows = [(r["id"], r["updatedAt"]) for r in landed_rows(spark, os.path.join(str(warehouse), "demo", name))]
                    table_ids = [row[0] for row in rows]
                    assert len(table_ids) == len(set(table_ids)), f"{name}: duplicate rows"
                    present = set(table_ids)
                    if name == "store_orders":
                        for partition in state["states"]:
                            store, cursor = partition["partition"]["store_id"], partition["cursor"]["updatedAt"]
                            expected = {o["id"] for o in orders if o["storeId"] == store and o["updatedAt"] <= cursor}
                            assert expected <= present, f"store {store}: STATE at {cursor} before its records"
                    else:
                        source = users if name == "users" else orders
                        cursor = state["updatedAt"]
                        expected = {r["id"] for r in source if r["updatedAt"] <= cursor}
                        missing = expected - present
                        assert not missing, f"{name}: STATE at {cursor} printed before {len(missing)} of its records were committed"
                    checked[name] += 1
                finally:
                    process.send_signal(signal.SIGCONT)
            assert process.wait(timeout=120) == 0
        finally:
            if process.poll() is None:
                process.kill()
        assert checked["users"] >= 10 and checked["orders"] >= 10 and checked["store_orders"] >= 5, checked
