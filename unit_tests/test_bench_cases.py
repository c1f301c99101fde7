"""The benchmark's in-process cases still run against today's runtime (they are not run by CI
otherwise, and twice fell behind a change of the read loop's interfaces unnoticed)."""

from __future__ import annotations

import json

from bench import worker
from bench.run import write_catalog
from source_framework.demo.api import DemoApi


def test_framework_null_and_the_declarative_manifest_read_every_record(tmp_path):
    with DemoApi(records=900, api_key="bench-key").start() as api:
        config = {"api_key": "bench-key", "api_url": api.url, "start_date": "2025-01-01T00:00:00Z",
                  "page_size": 100, "concurrency_level": 4}
        config_path = tmp_path / "config.json"
        config_path.write_text(json.dumps(config))
        catalog = write_catalog(str(tmp_path), ["orders"])
        ours = worker.framework_null(config, catalog)
        declarative = worker.cdk_declarative(config, str(config_path), catalog)
        bare = worker.bare_requests(config, catalog)
    assert ours["records"] == bare["records"] == 900
    assert ours["states"] >= 2
    # airbyte-cdk's windows are closed ([start, end - 1 s]); the API's are half-open: a record
    # exactly on a window's end second could be missed, none here.
    assert declarative["records"] == 900


def test_the_bare_requests_ceiling_parses_each_page_once(tmp_path, monkeypatch):
    """The ceiling for one client is a loop that parses each page once, as our read does
    (``page_json``). It parsed each page twice (once itself, once more in the stream's
    ``next_page_token``), which made the "ceiling" slower than our own read."""
    import orjson

    parses = []
    loads = orjson.loads
    monkeypatch.setattr(orjson, "loads", lambda body: parses.append(1) or loads(body))
    with DemoApi(records=900, api_key="bench-key").start() as api:
        config = {"api_key": "bench-key", "api_url": api.url, "start_date": "2025-01-01T00:00:00Z", "page_size": 100}
        bare = worker.bare_requests(config, write_catalog(str(tmp_path), ["orders"]))
    assert bare["records"] == 900
    assert bare["pages"] >= 9
    assert len(parses) == bare["pages"]


def test_cpu_time_is_measured_for_a_waited_child_and_for_a_running_process():
    """The benchmark's "cores" columns: a child that burns about 0.3 s of CPU counts once it was
    waited for; a process still running (the demo API) is read from /proc."""
    import subprocess
    import sys

    from bench.cpu import children_cpu_seconds, process_cpu_seconds

    before = children_cpu_seconds()
    subprocess.run([sys.executable, "-c", "import time\nend = time.process_time() + 0.3\nwhile time.process_time() < end: pass"],
                   check=True)
    assert children_cpu_seconds() - before >= 0.25
    sleeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        used = process_cpu_seconds(sleeper.pid)
        assert used is not None and 0 <= used < 5
    finally:
        sleeper.kill()
        sleeper.wait()
    assert process_cpu_seconds(sleeper.pid) is None  # gone


def test_warehouses_are_kept_until_the_benchmark_ends_then_removed(tmp_path):
    """No case removes a warehouse between runs (the next case would pay for it: see
    ``BenchEnv.new_warehouse``), one an earlier benchmark left is never reused, and
    ``remove_warehouses`` at the end leaves none of this run's."""
    from bench.cases import BenchEnv, remove_warehouses

    (tmp_path / "warehouse-full-100-1").mkdir()  # an earlier benchmark's
    env = BenchEnv(root=str(tmp_path), workdir=str(tmp_path), base_config={}, catalog_path="", streams=[])
    first, second = env.new_warehouse("full-100"), env.new_warehouse("full-100")
    assert len({first, second, str(tmp_path / "warehouse-full-100-1")}) == 3
    for path in (first, second):
        (tmp_path / path).mkdir()
        (tmp_path / path / "part-0.parquet").write_bytes(b"rows")
    remove_warehouses(env.warehouses)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["warehouse-full-100-1"]
