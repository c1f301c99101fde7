"""The README's main job: a full sync, then an incremental sync, of the demo connector.

Runs ``main.py read`` twice as a user would (separate processes, the embedded demo API in
each), saving the last STATE per stream in between. Before the second sync the demo API's data
moves on one generation (some users, orders and products are updated), so the incremental sync
has something to find. Then it reads the Delta tables with deltalake, Polars and Spark (each sees
the same rows) and prints the state.
Where a table is, and how one is deleted, only the Spark destination says: the walkthrough asks
the one ``read`` builds from the same arguments.

    python -m source_framework.demo.walkthrough [--records 20000] [--warehouse ./warehouse]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from contextlib import closing
from typing import Any

from source_framework.demo.source import DemoSource
from source_framework.runtime.process import EXIT_OK
from source_framework.runtime.summary import state_as_words


def configured_catalog() -> dict[str, Any]:
    import logging

    catalog = DemoSource().discover(logging.getLogger("walkthrough"), {"api_key": "-", "api_url": "http://127.0.0.1:1"})
    streams = []
    for stream in catalog.streams:
        incremental = "incremental" in [m.value for m in stream.supported_sync_modes]
        streams.append(
            {
                "stream": {
                    "name": stream.name,
                    "json_schema": stream.json_schema,
                    "supported_sync_modes": [m.value for m in stream.supported_sync_modes],
                    "source_defined_cursor": stream.source_defined_cursor,
                    "default_cursor_field": stream.default_cursor_field,
                    "source_defined_primary_key": stream.source_defined_primary_key,
                },
                "sync_mode": "incremental" if incremental else "full_refresh",
                "cursor_field": stream.default_cursor_field if incremental else None,
                "destination_sync_mode": "append" if incremental else "overwrite",
                "primary_key": stream.source_defined_primary_key,
            }
        )
    return {"streams": streams}


def run_sync(label: str, args: list[str], workdir: str) -> dict[str, Any]:
    """Run one ``main.py read``; return the last STATE per stream and message counts."""
    command = [sys.executable, _main_py(), "read", *args]
    print(f"\n== {label}\n$ python main.py read {' '.join(args)}", flush=True)
    started = time.monotonic()
    process = subprocess.run(command, stdout=subprocess.PIPE, stderr=sys.stderr, cwd=workdir)
    seconds = time.monotonic() - started
    messages = [json.loads(line) for line in process.stdout.splitlines()]
    state_messages = [message["state"] for message in messages if message["type"] == "STATE"]
    states = {state["stream"]["stream_descriptor"]["name"]: state for state in state_messages}
    if process.returncode != 0:
        raise SystemExit(f"{label} failed with exit code {process.returncode}")
    print(f"   {label}: {len(state_messages)} STATE messages in {seconds:.1f}s", flush=True)
    return states


def _main_py() -> str:
    here = os.path.dirname(os.path.abspath(__file__))
    candidate = os.path.abspath(os.path.join(here, "..", "..", "main.py"))
    return candidate if os.path.exists(candidate) else os.path.join(here, "__main__.py")


def read_destination(config_path: str, catalog_path: str) -> Any:
    """The Spark destination ``main.py read`` writes with, built by ``read``'s own function. Close it after use."""
    from source_framework.runtime.destination_setup import spark_destination
    from source_framework.runtime.entrypoint import build_parser

    with open(config_path) as handle:
        config = json.load(handle)
    return spark_destination(DemoSource(), config, build_parser().parse_args(["read", "--config", config_path, "--catalog", catalog_path]))


def delete_tables(destination: Any, streams: list[str]) -> None:
    """Delete each stream's table as ``state reset --tables`` does, under its lock (a sync still writing stops this)."""
    for name in streams:
        destination.lock(None, name, purpose="demo walkthrough")
        destination.delete_table(None, name)


def table_summary(destination: Any, streams: list[str]) -> list[dict[str, Any]]:
    """Each table as other tools read it: rows by deltalake, distinct ids by Polars, rows again by Spark with Delta."""
    import polars as pl
    from deltalake import DeltaTable

    rows = []
    for name in streams:
        path = destination.table_path(None, name)
        table = DeltaTable(path)
        ids = pl.scan_delta(path).select(pl.col("id").n_unique(), pl.len()).collect().row(0)
        rows.append({"stream": name, "rows": table.to_pyarrow_dataset().count_rows(), "polars rows": ids[1],
                     "distinct ids": ids[0], "path": path})
    for row, count in zip(rows, spark_row_counts([row["path"] for row in rows]), strict=True):
        row["spark rows"] = count
    return rows


# A Spark application of its own in a child process: its banner and logs stay out of the walkthrough unless it fails.
SPARK_COUNTS = """
import json, sys
from source_framework.destinations.spark.session import get_spark
spark = get_spark("local[1]", app_name="demo-reader")
print(json.dumps([spark.read.format("delta").load(path).count() for path in sys.argv[1:]]))
spark.stop()
"""


def spark_row_counts(paths: list[str]) -> list[int]:
    done = subprocess.run([sys.executable, "-c", SPARK_COUNTS, *paths], capture_output=True, text=True)
    if done.returncode != 0:
        sys.stderr.write(done.stderr)
        raise SystemExit(f"reading the tables with Spark failed with exit code {done.returncode}")
    return [int(count) for count in json.loads(done.stdout.strip().splitlines()[-1])]


def write_json(path: str, content: Any) -> None:
    with open(path, "w") as handle:
        json.dump(content, handle, indent=2)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--records", type=int, default=20000, help="users and orders in the demo API")
    parser.add_argument("--warehouse", default="warehouse", help="where the tables go (demo tables there are replaced)")
    parser.add_argument("--workdir", default="demo-run", help="where config, catalog and state files go")
    options = parser.parse_args(argv)

    started = time.monotonic()
    workdir = os.path.abspath(options.workdir)
    warehouse = os.path.abspath(options.warehouse)
    os.makedirs(workdir, exist_ok=True)

    def config(generation: int) -> str:
        path = os.path.join(workdir, f"config_generation{generation}.json")
        write_json(path, {
            "api_key": "demo-key-not-a-secret",
            "api_url": "embedded",
            "embedded_api": {"records": options.records, "generation": generation},
            "start_date": "2025-01-01T00:00:00Z",
            "page_size": 1000,
            "state_checkpoint_interval": 5000,
            "destination": {"type": "spark", "warehouse": warehouse, "spark_master": "local[2]"},
        })
        return path

    catalog_path = os.path.join(workdir, "configured_catalog.json")
    catalog = configured_catalog()
    write_json(catalog_path, catalog)
    state_path = os.path.join(workdir, "state.json")
    streams = [entry["stream"]["name"] for entry in catalog["streams"]]
    modes = {entry["stream"]["name"]: entry["destination_sync_mode"] for entry in catalog["streams"]}
    first_config, second_config = config(0), config(1)
    with closing(read_destination(first_config, catalog_path)) as destination:
        delete_tables(destination, streams)

    first = run_sync("full sync", ["--config", first_config, "--catalog", catalog_path], workdir)
    write_json(state_path, list(first.values()))
    second = run_sync(
        "incremental sync (the API has updated some records since)",
        ["--config", second_config, "--catalog", catalog_path, "--state", state_path],
        workdir,
    )
    final = {**first, **second}
    write_json(state_path, list(final.values()))

    print(f"\n== Delta Lake tables under {warehouse}, read by deltalake, Polars and Spark with Delta")
    with closing(read_destination(second_config, catalog_path)) as destination:
        summary = table_summary(destination, streams)
    print(f"   {'stream':<14} {'deltalake':>9} {'Polars':>8} {'Spark':>8} {'distinct ids':>13}  sync mode")
    for row in summary:
        mode = modes[row["stream"]]
        print(f"   {row['stream']:<14} {row['rows']:>9} {row['polars rows']:>8} {row['spark rows']:>8} {row['distinct ids']:>13}  {mode}")
    print("   append: the incremental sync appended each record the API updated since the full sync as a new")
    print("   row, so rows minus distinct ids are those updates (`append_dedup` keeps one row per id instead);")
    print("   overwrite: the table holds the last sync's records.")
    print(f"\n== final state ({state_path})")
    for name, state in final.items():
        stream_state = state["stream"]["stream_state"]
        print(f"   {name:<14} {state_as_words(stream_state) or json.dumps(stream_state)[:100]}")
    print(f"\nmain job finished in {time.monotonic() - started:.1f}s")
    return EXIT_OK


if __name__ == "__main__":
    sys.exit(main())
