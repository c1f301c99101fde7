"""The reader matrix (issue 50, item 5): while ``main.py read`` commits into Delta tables and after
it is killed (SIGKILL), every reader that goes through the Delta log sees only committed rows and
never a duplicate, and all of them see the same rows at the same Delta version:

- Spark with Delta (the session-scoped ``spark`` fixture, ``versionAsOf``);
- ``deltalake`` (delta-rs' own engine, DataFusion, through ``QueryBuilder``);
- Polars (``polars.read_delta``);
- pyarrow through the log (``DeltaTable(...).to_pyarrow_dataset()``).

Streams: ``users`` (incremental, append), ``products`` (full refresh, overwrite) and ``orders``
(incremental, ``append_dedup``: a Delta MERGE). A plain ``pyarrow.dataset`` over the table's folder
is printed alongside as a contrast: it reads every Parquet file, committed or replaced.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

import pytest

from integration_tests.conftest import API_KEY, MAIN, all_records, catalog, config_for, kill_at, run_main, write_json
from source_framework.demo.api import DemoApi, Faults

pytestmark = pytest.mark.slow  # real syncs in processes of their own, polled by four readers

MODES = {"users": "append", "products": "overwrite", "orders": "append_dedup"}
# What a row is: users is an append table, where one id may come back updated in a later sync
# (each of these tests syncs from scratch, so ids are unique too); the others are one row per id.
KEY_COLUMNS = {"users": ["id", "updatedAt"], "products": ["id"], "orders": ["id"]}
Key = tuple[Any, ...]


def overrides() -> dict[str, dict[str, Any]]:
    return {name: {"destination_sync_mode": mode, **({"sync_mode": "full_refresh"} if mode == "overwrite" else {})}
            for name, mode in MODES.items()}


def read_args(tmp_path, api: DemoApi, **settings: Any) -> list[str]:
    config = config_for(api, tmp_path / "warehouse", **settings)
    config["destination"]["table_format"] = "delta"
    config_path = write_json(tmp_path / "config.json", config)
    catalog_path = write_json(tmp_path / "catalog.json", catalog(*MODES, overrides=overrides()))
    return ["read", "--config", config_path, "--catalog", catalog_path, "--quiet"]


def table_path(tmp_path, name: str) -> str:
    return os.path.join(str(tmp_path / "warehouse"), "demo", name)


def normal(value: Any) -> Any:
    """One spelling for every reader: timestamps as naive UTC (Spark's session is in UTC)."""
    if isinstance(value, datetime):
        return (value.astimezone(UTC) if value.tzinfo else value).replace(tzinfo=None)
    return value


def keys_of(rows: list[dict[str, Any]], columns: list[str]) -> list[Key]:
    return sorted(tuple(normal(row[c]) for c in columns) for row in rows)


# Each reader: (path, version or None for the newest, key columns) -> the rows' keys, sorted.
def by_deltalake(path: str, version: int | None, columns: list[str]) -> list[Key]:
    import pyarrow as pa
    from deltalake import DeltaTable, QueryBuilder

    selected = ", ".join(f'"{c}"' for c in columns)
    table = QueryBuilder().register("t", DeltaTable(path, version=version)).execute(f"SELECT {selected} FROM t").read_all()
    return keys_of(pa.table(table).to_pylist(), columns)  # (an arro3 table: to pyarrow by the C stream interface)


def by_polars(path: str, version: int | None, columns: list[str]) -> list[Key]:
    import polars

    return keys_of(polars.read_delta(path, version=version, columns=columns).to_dicts(), columns)


def by_pyarrow(path: str, version: int | None, columns: list[str]) -> list[Key]:
    from deltalake import DeltaTable

    # (to_pyarrow_dataset, never to_pyarrow_table: the latter can abort the process at exit)
    return keys_of(DeltaTable(path, version=version).to_pyarrow_dataset().to_table(columns=columns).to_pylist(), columns)


def spark_reader(spark) -> Callable[[str, int | None, list[str]], list[Key]]:
    def by_spark(path: str, version: int | None, columns: list[str]) -> list[Key]:
        reader = spark.read.format("delta")
        if version is not None:
            reader = reader.option("versionAsOf", version)
        return keys_of([row.asDict() for row in reader.load(path).select(*columns).collect()], columns)

    return by_spark


FAST_READERS = {"deltalake": by_deltalake, "polars": by_polars, "pyarrow": by_pyarrow}


def plain_folder_rows(path: str) -> int:
    """What a reader that ignores the log sees: every Parquet file in the folder (informative)."""
    import pyarrow.dataset as ds

    return ds.dataset(path, format="parquet").count_rows()


def newest_version(path: str) -> int | None:
    from deltalake import DeltaTable

    if not os.path.isdir(os.path.join(path, "_delta_log")):
        return None
    try:
        return DeltaTable(path).version()
    except Exception:  # (the log folder exists before its first commit: no table yet)
        return None


def same_rows_no_duplicate(name: str, version: int | None, seen: dict[str, list[Key]], api_ids: set[Any]) -> list[Key]:
    """Every reader saw the same rows, no id twice (one sync from scratch), all of them the API's."""
    where = f"{name} at version {version}"
    first_reader, first = next(iter(seen.items()))
    for reader, keys in seen.items():
        duplicates = [key for key, n in Counter(key[0] for key in keys).items() if n > 1]
        assert not duplicates, f"{where}: {reader} sees ids twice: {duplicates[:10]}"
        assert keys == first, (f"{where}: {reader} sees {len(keys)} rows, {first_reader} {len(first)}; "
                               f"only {reader}: {sorted(set(keys) - set(first))[:5]}, "
                               f"only {first_reader}: {sorted(set(first) - set(keys))[:5]}")
        assert {key[0] for key in keys} <= api_ids, f"{where}: {reader} sees ids the API never served"
    return first


def api_ids(api: DemoApi) -> dict[str, set[Any]]:
    return {"users": {r["id"] for r in all_records(api, "users")},
            "orders": {r["id"] for r in all_records(api, "orders")},
            "products": {r["id"] for r in all_records(api, "products", {"limit": 1000})}}


def every_record_once(spark, tmp_path, expected: dict[str, set[Any]]) -> dict[str, int]:
    """The newest version of each table, read by all four readers pinned to it and unpinned: the
    API's records, each exactly once. Returns the plain folder's row count per table (contrast)."""
    readers = {**FAST_READERS, "spark": spark_reader(spark)}
    plain = {}
    for name in MODES:
        path = table_path(tmp_path, name)
        version = newest_version(path)
        assert version is not None, f"{name}: no Delta table"
        for pin in (version, None):
            seen = {reader: read(path, pin, KEY_COLUMNS[name]) for reader, read in readers.items()}
            keys = same_rows_no_duplicate(name, pin, seen, expected[name])
            assert sorted(key[0] for key in keys) == sorted(expected[name]), f"{name}: not every API record once"
        plain[name] = plain_folder_rows(path)
    return plain


def test_readers_polled_while_a_sync_commits_see_committed_rows_alike_and_never_twice(spark, tmp_path):
    import threading

    import pyarrow as pa
    from deltalake import write_deltalake

    by_spark = spark_reader(spark)
    # Every reader warmed up first on a table of a few versions (Spark's first Delta reads take seconds)
    warm = str(tmp_path / "warm")
    for version in range(3):
        write_deltalake(warm, pa.table({"id": [version], "updatedAt": pa.array([datetime(2025, 1, 1)], pa.timestamp("us", "UTC"))}),
                        mode="append")
    for version, rows in ((0, 1), (2, 3), (None, 3)):
        for read in (*FAST_READERS.values(), by_spark):
            assert read(warm, version, ["id", "updatedAt"]) == [(n, datetime(2025, 1, 1)) for n in range(rows)]
    with DemoApi(records=3000, api_key=API_KEY, seed=11, faults=Faults(delay_ms=20)).start() as api:
        expected = api_ids(api)
        args = read_args(tmp_path, api, page_size=20, state_checkpoint_interval=100)
        with open(tmp_path / "stdout", "wb") as out, open(tmp_path / "stderr", "wb") as err:
            process = subprocess.Popen([sys.executable, MAIN, *args], stdout=out, stderr=err)
        started = time.monotonic()
        # Spark polls in a thread of its own (a read takes it up to seconds while the sync's JVM shares
        # the machine), the newest version of each table in turn, pinned; the fast readers poll here.
        by_spark_at: list[tuple[str, int, bool, list[Key]]] = []  # (table, version, read begun while the sync ran, rows)
        spark_failed: list[BaseException] = []
        spark_seconds: list[tuple[float, float]] = []  # (began after the sync's start, took), seconds

        def spark_polls() -> None:
            try:
                for turn in range(600):
                    if process.poll() is not None:
                        return
                    name = list(MODES)[turn % len(MODES)]
                    version = newest_version(table_path(tmp_path, name))
                    if version is not None:
                        began, running = time.monotonic(), process.poll() is None
                        keys = by_spark(table_path(tmp_path, name), version, KEY_COLUMNS[name])
                        by_spark_at.append((name, version, running, keys))
                        spark_seconds.append((round(began - started, 2), round(time.monotonic() - began, 2)))
                    time.sleep(0.05)
            except BaseException as error:  # (reported by the test)
                spark_failed.append(error)

        spark_thread = threading.Thread(target=spark_polls)
        spark_thread.start()
        try:
            polled: dict[str, set[int]] = {name: set() for name in MODES}  # versions read while it ran
            polls, deadline, first_commit = 0, time.monotonic() + 300, None
            while polls < 5000 and time.monotonic() < deadline:
                running = process.poll() is None
                for name in MODES:
                    path = table_path(tmp_path, name)
                    version = newest_version(path)
                    if version is None:
                        continue
                    seen = {reader: read(path, version, KEY_COLUMNS[name]) for reader, read in FAST_READERS.items()}
                    same_rows_no_duplicate(name, version, seen, expected[name])
                    if running:
                        polled[name].add(version)
                polls += 1
                if not running:
                    break
                if polled["users"] and first_commit is None:
                    first_commit = time.monotonic() - started
                time.sleep(0.02)
            assert process.poll() is not None, f"the sync still runs after {polls} polls"
            ended = time.monotonic() - started
        finally:
            if process.poll() is None:
                process.kill()
            process.wait(timeout=60)
            spark_thread.join(timeout=300)
        stderr = (tmp_path / "stderr").read_text(errors="replace")
        assert process.returncode == 0, stderr[-3000:]
    assert not spark_failed, f"Spark's read failed: {spark_failed[0]!r}"

    # The polls overlapped the commits: several versions of the tables were read while the sync ran.
    assert len(polled["users"]) >= 3 and len(polled["orders"]) >= 2, f"polled versions: {polled} in {polls} polls"
    during = [(name, version) for name, version, running, _ in by_spark_at if running]
    # (Spark's reads take seconds here, the sync's commits a few: it must have begun one while commits went on)
    assert during, (
        f"Spark read while the sync ran: {during}; its reads (start, seconds): {spark_seconds}; "
        f"users' first commit seen {first_commit}s after the start, the sync ended after {ended:.1f}s")
    # What Spark read at a version, the other readers read at that version too
    for name, version, _, keys in by_spark_at:
        seen = {"spark": keys, **{reader: read(table_path(tmp_path, name), version, KEY_COLUMNS[name])
                                  for reader, read in FAST_READERS.items()}}
        same_rows_no_duplicate(name, version, seen, expected[name])
    # Every version of the history, read again by the fast readers pinned to it, agrees too.
    for name in MODES:
        path = table_path(tmp_path, name)
        newest = newest_version(path)
        assert newest is not None
        for version in range(newest + 1):
            seen = {reader: read(path, version, KEY_COLUMNS[name]) for reader, read in FAST_READERS.items()}
            same_rows_no_duplicate(name, version, seen, expected[name])
    plain = every_record_once(spark, tmp_path, expected)
    print(f"{polls} polls; Spark read {len(by_spark_at)} times ({len(during)} while the sync ran: {during}); versions read "
          f"while the sync ran: { {name: sorted(v) for name, v in polled.items()} }; plain folder rows: {plain}")


def test_readers_after_a_kill_see_only_the_logs_rows_and_a_resumed_sync_every_record_once(spark, tmp_path):
    readers = {**FAST_READERS, "spark": spark_reader(spark)}
    contrast = []
    with DemoApi(records=1500, api_key=API_KEY, seed=13, faults=Faults(delay_ms=2)).start() as api:
        expected = api_ids(api)
        args = read_args(tmp_path, api, page_size=100, state_checkpoint_interval=200)
        # killed before its 3rd transaction, then (resumed from the log) right after its 4th
        for point, count in (("commit.files_written", 3), ("commit.done", 4)):
            killed = kill_at(point, *args, count=count)
            assert killed.paused, f"never reached {point}:{count}\n{killed.stderr[-3000:]}"
            assert killed.returncode == -9, killed.stderr[-3000:]
            tables = 0
            for name in MODES:
                path = table_path(tmp_path, name)
                version = newest_version(path)
                if version is None:
                    continue
                tables += 1
                seen = {reader: read(path, None, KEY_COLUMNS[name]) for reader, read in readers.items()}
                seen["pyarrow pinned"] = by_pyarrow(path, version, KEY_COLUMNS[name])
                keys = same_rows_no_duplicate(name, version, seen, expected[name])
                # only rows the log covers: exactly those of the Parquet files its newest version lists
                import pyarrow.dataset as ds
                from deltalake import DeltaTable

                files = [uri.removeprefix("file://") for uri in DeltaTable(path).file_uris()]
                logged = ds.dataset(files, format="parquet").to_table(columns=KEY_COLUMNS[name]).to_pylist()
                assert keys == keys_of(logged, KEY_COLUMNS[name]), f"{name}: readers differ from the log's files"
                contrast.append(f"{point}: {name} v{version} {len(keys)} rows, plain folder {plain_folder_rows(path)}")
            assert tables >= 1, f"killed at {point}:{count} before any table was committed"
        final = run_main(*args)  # no --state: it resumes from the tables' logs
        assert final.returncode == 0, final.stderr[-3000:]
    plain = every_record_once(spark, tmp_path, expected)
    print("; ".join(contrast) + f"; after the resumed sync, plain folder rows: {plain}")
