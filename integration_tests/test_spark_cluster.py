"""Syncs on a cluster: the same syncs through a Spark Connect server and on ``local-cluster``
executors (separate JVM processes) leave tables equal, row for row, to an embedded ``local``
run's. The first Connect sync runs with the default writer (this process writes the commits'
files; the server runs the ``append_dedup`` merges); the others with ``writer: spark``, so the
server and the executors write every commit's files.

- Spark Connect: the module starts a real server from the installed pyspark
  (``sbin/spark-daemon.sh submit`` of the server class, as ``start-connect-server.sh`` does:
  pyspark 4.2's wheel has no such script; master ``local[2]``, 127.0.0.1, a free port) and
  stops it at the end whatever happened. The syncs run with ``JAVA_HOME`` pointing nowhere: one that
  passes started no JVM of its own, so nothing in its commit path needed one.
- ``local-cluster[2,1,1024]``: a master and two workers in the driver's JVM, each executor its
  own JVM process; ``PYSPARK_PYTHON`` points nowhere, so the executors ran no Python.

Every Spark process here binds 127.0.0.1 (``SPARK_LOCAL_IP``).
"""

from __future__ import annotations

import glob
import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pyspark
import pytest

from integration_tests.conftest import API_KEY, MAIN, ROOT, TEST_JVM_OPTIONS, catalog, config_for, read_table, run_main, write_json
from integration_tests.test_crash_recovery import MODES, Orchestrator, table_rows
from source_framework.demo.api import DemoApi
from source_framework.destinations.spark.session import DELTA_CATALOG, DELTA_EXTENSION, installed_jars

pytestmark = [pytest.mark.spark_cluster, pytest.mark.slow]

PYSPARK_HOME = os.path.dirname(os.path.abspath(pyspark.__file__))
CONNECT_CLASS = "org.apache.spark.sql.connect.service.SparkConnectServer"
STARTED = re.compile(r"Spark Connect server started at: 127\.0\.0\.1:(\d+)")


@pytest.fixture(scope="module", autouse=True)
def loopback_only() -> Iterator[None]:
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("SPARK_LOCAL_IP", "127.0.0.1")
        yield


@pytest.fixture(scope="module")
def work(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("spark-cluster")


@pytest.fixture(scope="module")
def api() -> Iterator[DemoApi]:
    with DemoApi(records=2000, api_key=API_KEY, seed=11).start() as demo:
        yield demo


@pytest.fixture(scope="module")
def catalog_path(work: Path) -> str:
    overrides = {
        name: {"destination_sync_mode": mode, **({"sync_mode": "full_refresh"} if mode == "overwrite" else {})}
        for name, mode in MODES.items()
    }
    return write_json(work / "catalog.json", catalog(overrides=overrides))


@pytest.fixture(scope="module")
def reference(api: DemoApi, work: Path, catalog_path: str) -> str:
    """The embedded run (``local[1]`` in the sync's own process) every other run must equal."""
    warehouse = str(work / "reference")
    config = write_json(work / "reference.json", config_for(api, warehouse, state_checkpoint_interval=250))
    run = run_main("read", "--config", config, "--catalog", catalog_path)
    assert run.returncode == 0, run.stderr[-3000:]
    return warehouse


@pytest.fixture(scope="module")
def connect_url(work: Path) -> Iterator[str]:
    """``sc://127.0.0.1:<port>`` of a Spark Connect server that lives as long as this module."""
    env = {
        **os.environ,
        "SPARK_HOME": PYSPARK_HOME,
        "SPARK_LOG_DIR": str(work / "connect-logs"),
        "SPARK_PID_DIR": str(work / "connect-pids"),
    }
    # What sbin/start-connect-server.sh runs; pyspark 4.2's wheel ships spark-daemon.sh only.
    daemon = [os.path.join(PYSPARK_HOME, "sbin", "spark-daemon.sh")]
    args = [
        *daemon, "submit", CONNECT_CLASS, "1", "--name", "Spark Connect server",
        "--master", "local[2]",
        "--driver-java-options", TEST_JVM_OPTIONS,
        "--conf", "spark.connect.grpc.binding.address=127.0.0.1",
        "--conf", f"spark.connect.grpc.binding.port={_free_port()}",
        "--conf", "spark.ui.enabled=false",
        "--conf", "spark.sql.shuffle.partitions=2",
        "--conf", "spark.databricks.delta.snapshotPartitions=2",  # (Delta's default 50 is for clusters: slow on small tables)
        # Delta Lake on the server, as docs/clusters.md says to start one: tables are Delta by default
        "--jars", ",".join(installed_jars()),
        "--conf", f"spark.sql.extensions={DELTA_EXTENSION}",
        "--conf", f"spark.sql.catalog.spark_catalog={DELTA_CATALOG}",
    ]
    pid_files = os.path.join(env["SPARK_PID_DIR"], "*.pid")
    pids = []
    try:
        started = subprocess.run(args, env=env, capture_output=True, timeout=120)
        pids = [int(Path(path).read_text().strip()) for path in glob.glob(pid_files)]
        assert started.returncode == 0 and pids, started.stdout.decode() + started.stderr.decode()
        yield f"sc://127.0.0.1:{_wait_until_serving(env['SPARK_LOG_DIR'], pids[0])}"
    finally:
        # Stopping removes the pid file: note the pid first (also after a failed start).
        pids = pids or [int(Path(path).read_text().strip()) for path in glob.glob(pid_files)]
        subprocess.run([*daemon, "stop", CONNECT_CLASS, "1"], env=env, capture_output=True, timeout=60)
        for pid in pids:
            _make_sure_gone(pid)


def test_sync_through_spark_connect_equals_embedded_run(spark, api, work, catalog_path, reference, connect_url, monkeypatch):
    monkeypatch.setenv("JAVA_HOME", str(work / "no-java-here"))
    warehouse = str(work / "connect")
    # The config names a local master: --spark-master must win, or no JVM could start.
    config = write_json(work / "connect.json", config_for(api, warehouse, state_checkpoint_interval=250))
    run = run_main("read", "--config", config, "--catalog", catalog_path, "--spark-master", connect_url)
    assert run.returncode == 0, run.stderr[-3000:]
    assert {"users", "orders", "store_orders"} <= set(run.states)
    _assert_same_tables(spark, reference, warehouse)


@pytest.mark.parametrize("table_format", ["delta", "parquet"])
def test_killed_and_resumed_sync_through_spark_connect_equals_embedded_run(
    spark, api, work, catalog_path, reference, connect_url, monkeypatch, table_format
):
    monkeypatch.setenv("JAVA_HOME", str(work / "no-java-here"))
    warehouse = str(work / f"connect-killed-{table_format}")
    destination = {"type": "spark", "warehouse": warehouse, "spark_master": connect_url, "writer": "spark",
                   "table_format": table_format}
    config = write_json(work / f"connect-killed-{table_format}.json",
                        config_for(api, warehouse, state_checkpoint_interval=250, destination=destination))
    orchestrator = Orchestrator(config, catalog_path, str(work / f"connect-killed-{table_format}-state.json"))
    # SIGKILL at exact points of a commit, then once at a moment that may fall inside a write
    # the server goes on with after its client died; each run resumes from the last STATE.
    # Every run commits at least twice (the two overwrite streams), so the second time each
    # point is reached always comes, however many checkpoints a slow commit merged. A Delta
    # commit is one transaction (the server's Delta writer writes its record with its files):
    # there is no "record written" step of ours between the two to stop at, as in a Parquet folder.
    kills = [
        ("pause", "commit.files_written", 2),
        *([("pause", "commit.record_written", 2)] if table_format == "parquet" else []),
        ("pause", "commit.done", 2),
        ("pause", "state.printed", 2),
        ("time", 4.0, 0),
    ]
    pauses = len(kills) - 1
    outcomes = []
    for kill in kills:
        code, outcome = orchestrator.run(kill)
        outcomes.append(outcome)
        if code is not None:
            assert code == 0, outcome
    assert all(outcome.startswith("killed") for outcome in outcomes[:pauses]), outcomes
    final_code, _ = orchestrator.run(None)
    assert final_code == 0
    log = "_delta_log" if table_format == "delta" else "_spark_metadata"
    assert os.path.isdir(os.path.join(warehouse, "demo", "orders", log))
    _assert_same_tables(spark, reference, warehouse)
    ids = [row[0] for row in read_table(spark, os.path.join(warehouse, "demo", "orders")).select("id").collect()]
    assert len(ids) == len(set(ids)), "append_dedup left two rows for one key"


def test_empty_commit_through_spark_connect(spark, work, connect_url):
    """A commit with no records (an overwrite stream that returned nothing) under Connect.

    In a process of its own: pyspark makes a process either classic or Connect, and this one
    runs the classic ``spark`` fixture."""
    path = str(work / "empty")
    commit = subprocess.run(
        [sys.executable, "-c", EMPTY_COMMIT, connect_url, path], capture_output=True, cwd=ROOT, timeout=300
    )
    assert commit.returncode == 0, commit.stderr.decode(errors="replace")[-3000:]
    assert json.loads(commit.stdout) == {"rows": 0, "files": 1, "read": 0}
    frame = spark.read.parquet(path)
    assert frame.count() == 0
    assert [c for c in frame.columns if not c.startswith("_sf_")] == ["id", "seen"]


EMPTY_COMMIT = """
import json, sys
from source_framework.destinations.spark.arrow_conversion import arrow_schema, records_to_arrow
from source_framework.destinations.spark.session import get_spark
from source_framework.destinations.spark.table import SparkTable

schema = arrow_schema({"properties": {"id": {"type": "integer"}, "seen": {"type": "string", "format": "date-time"}}})
table = SparkTable(get_spark(sys.argv[1]), sys.argv[2])
empty = records_to_arrow([], schema, extracted_at_ms=[], sync_id="s", checkpoint=0)
info = table.commit(empty, state={"seen": "2025-01-01T00:00:00Z"}, seq=0)
print(json.dumps({"rows": info.rows, "files": len(info.files), "read": table.read().count()}))
"""


def test_a_connect_server_dying_mid_sync_fails_the_sync_in_bounded_time(spark, api, work, catalog_path, connect_url):
    """Kills the module's Connect server, so it runs after the other Connect tests. pyspark's own
    retries waited about 10 minutes per call and each stream waited again (13 min for one sync,
    found in review); with ``connect_retry_seconds`` the first failed call ends its stream and
    every later commit fails at once. Every STATE printed before stays covered by its table."""
    warehouse = str(work / "connect-dies")
    destination = {"type": "spark", "warehouse": warehouse, "spark_master": connect_url, "writer": "spark",
                   "connect_retry_seconds": 3}
    config = write_json(work / "connect-dies.json", config_for(api, warehouse, state_checkpoint_interval=250,
                                                               destination=destination))
    sync = subprocess.Popen([sys.executable, MAIN, "read", "--config", config, "--catalog", catalog_path],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=ROOT)
    try:
        assert sync.stdout is not None
        messages = []
        for line in sync.stdout:  # until the first commit is through
            messages.append(json.loads(line))
            if messages[-1]["type"] == "STATE":
                break
        server = int(Path(glob.glob(str(work / "connect-pids" / "*.pid"))[0]).read_text().strip())
        os.kill(server, signal.SIGKILL)
        out, err = sync.communicate(timeout=240)
    finally:
        sync.kill()
    messages += [json.loads(line) for line in out.splitlines() if line.strip()]
    assert sync.returncode == 1, err.decode(errors="replace")[-3000:]
    errors = [m["trace"]["error"]["message"] for m in messages if m["type"] == "TRACE" and m["trace"]["type"] == "ERROR"]
    assert any("stopped answering" in error for error in errors), errors
    covered: dict[str, int] = {}
    for message in messages:
        if message["type"] == "STATE":
            state = message["state"]
            name = state["stream"]["stream_descriptor"]["name"]
            covered[name] = covered.get(name, 0) + int(state["sourceStats"]["recordCount"])
    assert covered
    for name, count in covered.items():
        assert len(table_rows(spark, warehouse, name)) >= count


def test_sync_on_local_cluster_executors_equals_embedded_run(spark, api, work, catalog_path, reference, monkeypatch):
    home = _private_spark_home(work / "spark-home")
    monkeypatch.setenv("SPARK_HOME", home)
    monkeypatch.setenv("PYSPARK_PYTHON", str(work / "no-python-here"))
    warehouse = str(work / "local-cluster")
    destination = {
        "type": "spark",
        "warehouse": warehouse,
        "spark_master": "local-cluster[2,1,1024]",
        "spark_conf": {"spark.executor.memory": "512m", "spark.executor.extraJavaOptions": TEST_JVM_OPTIONS},
        "writer": "spark",
    }
    config = write_json(work / "local-cluster.json", config_for(api, warehouse, state_checkpoint_interval=250, destination=destination))
    code, outcome = Orchestrator(config, catalog_path, str(work / "local-cluster-state.json")).run(None)
    assert code == 0, outcome
    _assert_same_tables(spark, reference, warehouse)
    # Each executor of the application had its own folder (and process) under SPARK_HOME/work.
    executors = glob.glob(os.path.join(home, "work", "app-*", "*", "stderr"))
    assert len(executors) >= 2, executors
    ran_tasks = [path for path in executors if "Running task" in Path(path).read_text(errors="replace")]
    assert ran_tasks, "no executor process ran a task"


def _assert_same_tables(spark, expected_warehouse: str, actual_warehouse: str) -> None:
    for name in MODES:
        expected, actual = table_rows(spark, expected_warehouse, name), table_rows(spark, actual_warehouse, name)
        assert expected, f"{name}: the embedded run wrote no rows"
        assert len(actual) == len(expected), f"{name}: {len(actual)} rows, {len(expected)} in the embedded run"
        assert actual == expected, f"{name}: rows differ from the embedded run"


def _private_spark_home(home: Path) -> str:
    """pyspark's folder seen through symlinks: local-cluster's workers put their executors'
    folders in SPARK_HOME/work, which must not be inside the virtualenv."""
    home.mkdir()
    for name in os.listdir(PYSPARK_HOME):
        if name != "work":
            os.symlink(os.path.join(PYSPARK_HOME, name), home / name)
    return str(home)


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def _wait_until_serving(log_dir: str, pid: int, timeout: float = 180) -> int:
    """The port the server says it listens on (Spark moves to the next one if ours was taken)."""
    deadline = time.monotonic() + timeout
    log = ""
    while time.monotonic() < deadline:
        logs = glob.glob(os.path.join(log_dir, f"*{CONNECT_CLASS}*.out"))
        log = Path(logs[0]).read_text(errors="replace") if logs else ""
        found = STARTED.search(log)
        if found:
            return int(found.group(1))
        if not _alive(pid):
            break
        time.sleep(0.5)
    raise AssertionError(f"the Spark Connect server did not start; its log ends:\n{log[-3000:]}")


def _alive(pid: int) -> bool:
    """True while ``pid`` is our server's JVM and not a zombie (pid numbers are reused)."""
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, ProcessLookupError, IndexError):
        return False
    return CONNECT_CLASS.encode() in cmdline and state != "Z"


def _make_sure_gone(pid: int) -> None:
    for sig in (None, signal.SIGKILL):
        if sig is not None and _alive(pid):
            os.kill(pid, sig)
        deadline = time.monotonic() + 30
        while _alive(pid) and time.monotonic() < deadline:
            time.sleep(0.2)
        if not _alive(pid):
            return
    raise AssertionError(f"the Spark Connect server (pid {pid}) is still running")
