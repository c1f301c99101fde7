"""Shared fixtures: one Spark session for the whole run, the demo API, and running main.py."""

from __future__ import annotations

import json
import logging
import os
import re
import subprocess
import sys
from dataclasses import dataclass, field
from typing import Any

import pytest

from source_framework.demo.api import DemoApi

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MAIN = os.path.join(ROOT, "main.py")
HERE = os.path.dirname(os.path.abspath(__file__))
API_KEY = "it-secret-key-5b1e9"

# Tests talk to 127.0.0.1 only: every Spark driver and executor, here and in the main.py
# processes the tests start (they inherit the environment), binds the loopback address.
os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")


#: The tests' own JVMs (their Spark session, the separate application's, the Connect server, local-cluster's executors): the
#: JIT's first tier and the parallel collector cost the machine less CPU than the JVM's defaults here (bench/RESULTS.md).
TEST_JVM_OPTIONS = "-XX:TieredStopAtLevel=1 -XX:+UseParallelGC"
#: The longest test files, started first: the test workers (pytest.ini: in this order, not by test count) then
#: share out the rest while some of them run these, instead of one worker starting the crash test last and alone.
#: The whole suite's longest come first, then the quick tier's (each file's own tests that ``-m "not slow"`` keeps).
LONGEST_FIRST = ("test_crash_recovery.py", "test_cdk_conformance.py", "test_spark_cluster.py", "test_data_safety.py",
                 "test_scaffold_acceptance.py", "test_compare_checkpoints.py", "test_object_store.py", "test_schema_evolution.py",
                 "test_published_connector.py", "test_lookback_window.py", "test_acceptance_layouts.py", "test_tables_command.py",
                 "test_progress_output.py", "test_values.py", "test_run_existing_connector.py", "test_failed_partition.py")
#: Files whose parameter sets may run on different test workers (each set shares its module-scoped fixtures):
#: the crash test per table format, the airbyte-cdk conformance matrix per connector style.
SPLIT_BY_PARAMETER = ("test_crash_recovery.py", "test_cdk_conformance.py")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    def rank(item: pytest.Item) -> int:
        name = os.path.basename(str(item.fspath))
        return LONGEST_FIRST.index(name) if name in LONGEST_FIRST else len(LONGEST_FIRST)

    items.sort(key=rank)  # stable: every other test keeps its place


@pytest.hookimpl(optionalhook=True)  # (a hook of pytest-xdist: unknown where it is not installed)
def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    """``--dist loadfile``, but the files of ``SPLIT_BY_PARAMETER`` go out one parameter set at a time (the id without
    a trailing ``-<number>``: a conformance style with both of its ``--concurrency`` values, a crash-test format).
    (pytest-xdist's ``loadgroup`` marks are lost under pytest 9: its workers report the ids without them.)"""
    if config.getvalue("dist") != "loadfile":
        return None
    from xdist.scheduler import LoadFileScheduling

    class SplitFiles(LoadFileScheduling):
        def _split_scope(self, nodeid: str) -> str:
            path = nodeid.split("::", 1)[0]
            if os.path.basename(path) not in SPLIT_BY_PARAMETER or not nodeid.endswith("]"):
                return path
            return f"{path} {re.sub(r'-[0-9]+$', '', nodeid[nodeid.index('[') + 1:-1])}"

    return SplitFiles(config, log)


@pytest.fixture(autouse=True)
def _root_logging_left_as_found():
    """A command run in this process (``compare-checkpoints``' ``main``) sets up logging for its
    process: a handler on the root logger. Left there, it wrote each later test's log lines into
    that test's stderr a second time (a summary test counted every progress line twice)."""
    root = logging.getLogger()
    before, level = set(root.handlers), root.level
    yield
    for handler in list(root.handlers):
        if handler not in before and not type(handler).__module__.startswith("_pytest"):
            root.removeHandler(handler)
    root.setLevel(level)


def table_at(spark, path: str):
    """The table at ``path`` in its own format, for its checkpoint records (``last_checkpoint``,
    ``committed_checkpoints``, ``live_files``): a ``DeltaLakeTable`` or a ``SparkTable``."""
    from source_framework.destinations.spark.delta_table import DeltaLakeTable, is_delta_table
    from source_framework.destinations.spark.table import SparkTable

    return DeltaLakeTable(spark, path) if is_delta_table(path) else SparkTable(spark, path)


@pytest.fixture(scope="session")
def spark():
    """The test run's one Spark session: a reader separate from the syncs' own sessions."""
    from source_framework.destinations.spark.jvm_cache import java_options
    from source_framework.destinations.spark.session import get_spark

    # This JVM reads hundreds of small tables back (and writes for the syncs run in this process): the suite's largest
    # use of CPU. The JIT's first tier only, as the syncs' own sessions: the second's compiler threads took the core the
    # other test worker needed, more than its faster code gave back; G1's concurrent work too (bench/RESULTS.md). No plan
    # optimisations or generated code either, which pay off on large data only. Same rows either way (Spark runs its own
    # tests under both kinds of code).
    session = get_spark("local[2]", app_name="integration-tests", conf={
        "spark.driver.extraJavaOptions": f"{java_options()} {TEST_JVM_OPTIONS}",
        "spark.sql.adaptive.enabled": "false",
        "spark.sql.codegen.wholeStage": "false",
        "spark.sql.codegen.factoryMode": "NO_CODEGEN",
        "spark.sql.shuffle.partitions": "1",
        "spark.databricks.delta.snapshotPartitions": "1",
    })
    yield session
    session.stop()


# A Spark application of its own, as a user's notebook would be: plain pyspark (with Delta Lake's jars
# for Delta tables), none of our code. It reads the tables it is sent (one JSON line of paths) and answers one line per request.
NEW_APPLICATION = """
import json, os, sys
from pyspark.sql import SparkSession
# Few partitions for small tables: Delta's default 50 for replaying a log made each table's first read take seconds.
builder = (SparkSession.builder.master("local[1]").config("spark.ui.enabled", "false")
           .config("spark.sql.session.timeZone", "UTC").config("spark.driver.extraJavaOptions", sys.argv[1])
           .config("spark.sql.shuffle.partitions", "1").config("spark.databricks.delta.snapshotPartitions", "1"))
if sys.argv[2]:  # Delta Lake, configured as its documentation says
    builder = (builder.config("spark.jars", sys.argv[2])
               .config("spark.sql.extensions", "io.delta.sql.DeltaSparkSessionExtension")
               .config("spark.sql.catalog.spark_catalog", "org.apache.spark.sql.delta.catalog.DeltaCatalog"))
spark = builder.getOrCreate()
for request in sys.stdin:
    result = {}
    for path in json.loads(request):
        try:
            delta = os.path.isdir(os.path.join(path, "_delta_log"))
            frame = spark.read.format("delta").load(path) if delta else spark.read.parquet(path)
            result[path] = {
                "columns": frame.columns,
                "types": dict(frame.dtypes),
                "rows": json.loads(json.dumps([row.asDict() for row in frame.collect()], default=str)),
                "json": [json.loads(text) for text in frame.toJSON().collect()],
            }
        except Exception as error:
            result[path] = {"error": str(error)[:2000]}
    print("RESULT " + json.dumps(result), flush=True)
"""


@pytest.fixture(scope="session")
def new_application():
    """``read(paths)``: what a separate Spark application sees in each table, by path:
    ``columns``, ``types``, ``rows`` (Python values, dates as text) and ``json`` (rows as
    Spark's ``toJSON`` writes them), or ``error``. One application serves the whole run."""
    from source_framework.destinations.spark.jvm_cache import java_options
    from source_framework.destinations.spark.session import installed_jars

    process = subprocess.Popen(
        [sys.executable, "-c", NEW_APPLICATION, f"{java_options()} {TEST_JVM_OPTIONS}", ",".join(installed_jars())],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
    )

    def read(paths: list[str]) -> dict[str, Any]:
        assert process.stdin is not None and process.stdout is not None
        process.stdin.write(json.dumps(list(paths)) + "\n")
        process.stdin.flush()
        for line in process.stdout:
            if line.startswith("RESULT "):
                return json.loads(line[len("RESULT "):])
        raise AssertionError(f"the separate Spark application ended (exit code {process.wait()})")

    yield read
    process.stdin.close()  # type: ignore[union-attr]
    process.wait(timeout=60)


@pytest.fixture
def demo_api():
    with DemoApi(records=1500, api_key=API_KEY, seed=7).start() as api:
        yield api


@dataclass
class ReadRun:
    returncode: int
    messages: list[dict[str, Any]]
    stderr: str
    stdout: bytes = b""
    states: dict[str, dict[str, Any]] = field(default_factory=dict)

    def of_type(self, kind: str) -> list[dict[str, Any]]:
        return [m for m in self.messages if m["type"] == kind]

    def state_file(self, path: str) -> str:
        with open(path, "w") as handle:
            json.dump(list(self.states.values()), handle)
        return path


def write_json(path, content) -> str:
    with open(path, "w") as handle:
        json.dump(content, handle)
    return str(path)


def config_for(api: DemoApi, warehouse: str, **overrides: Any) -> dict[str, Any]:
    config = {
        "api_key": API_KEY,
        "api_url": api.url,
        "start_date": "2025-01-01T00:00:00Z",
        "page_size": 100,
        "state_checkpoint_interval": 250,
        "destination": {"type": "spark", "warehouse": str(warehouse), "spark_master": "local[1]"},
    }
    config.update(overrides)
    return config


def catalog(*names: str, overrides: dict[str, dict[str, Any]] | None = None) -> dict[str, Any]:
    """The integration catalog, narrowed to ``names`` (all five streams when none given)."""
    with open(os.path.join(HERE, "configured_catalog.json")) as handle:
        full = json.load(handle)
    streams = [s for s in full["streams"] if not names or s["stream"]["name"] in names]
    for entry in streams:
        entry.update((overrides or {}).get(entry["stream"]["name"], {}))
    return {"streams": streams}


def run_in_process(*args: str, source: Any = None) -> ReadRun:
    """``main.py args...`` of the demo connector, in this process: the same command line, checks and
    runtime, on the test run's one Spark session. For tests that need no process of their own (a
    kill, a terminal, the process's own stdout); ``stderr`` holds what the logs and the summary said."""
    import contextlib
    import io
    import logging

    from source_framework.demo.source import DemoSource
    from source_framework.runtime.entrypoint import build_parser, run_command, run_read

    parsed = build_parser().parse_args(list(args))
    protocol, errors = io.BytesIO(), io.StringIO()
    handler = logging.StreamHandler(errors)
    handler.setFormatter(logging.Formatter("%(levelname)s %(name)s: %(message)s"))
    root = logging.getLogger()
    root.addHandler(handler)
    level = root.level
    root.setLevel(logging.INFO)  # as main.py logs (setLevel, not .level =: loggers cache what is enabled)
    try:
        with contextlib.redirect_stderr(errors):
            if parsed.command == "read":
                code = run_read(source or DemoSource(), parsed, protocol_out=protocol)
            else:
                text = io.TextIOWrapper(protocol, encoding="utf-8", write_through=True)  # stdout with a .buffer
                with contextlib.redirect_stdout(text):
                    code = run_command(source or DemoSource(), parsed)
                text.flush()
                text.detach()
    finally:
        root.removeHandler(handler)
        root.setLevel(level)
    stdout = protocol.getvalue()
    messages = [json.loads(line) for line in stdout.splitlines() if line.strip()]
    run = ReadRun(code, messages, errors.getvalue(), stdout)
    for message in run.of_type("STATE"):
        run.states[message["state"]["stream"]["stream_descriptor"]["name"]] = message["state"]
    return run


def stream_states(run: ReadRun, stream: str) -> list[dict[str, Any]]:
    """The STATE messages ``run`` printed for ``stream``, in order."""
    return [m["state"] for m in run.of_type("STATE") if m["state"]["stream"]["stream_descriptor"]["name"] == stream]


def page_converters_of(pid: int) -> list[int]:
    """The page converter processes whose parent is ``pid`` (Linux's /proc)."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as stat, open(f"/proc/{entry}/cmdline", "rb") as cmdline:
                parent = int(stat.read().rpartition(")")[2].split()[1])
                if parent == pid and b"page_conversion_process.py" in cmdline.read():
                    found.append(int(entry))
        except (OSError, ValueError, IndexError):
            continue  # (gone meanwhile)
    return found


def run_main(*args: str, cwd: str | None = None, timeout: float = 300) -> ReadRun:
    process = subprocess.run(
        [sys.executable, MAIN, *args], capture_output=True, cwd=cwd or ROOT, timeout=timeout
    )
    messages = [json.loads(line) for line in process.stdout.splitlines() if line.strip()]
    run = ReadRun(process.returncode, messages, process.stderr.decode(errors="replace"), process.stdout)
    for message in run.of_type("STATE"):
        run.states[message["state"]["stream"]["stream_descriptor"]["name"]] = message["state"]
    return run


def all_records(api: DemoApi, path: str, params: dict[str, Any] | None = None) -> list[dict[str, Any]]:
    """Every record of an endpoint, straight from the API, following its pagination."""
    import requests

    session = requests.Session()
    session.headers["Authorization"] = f"Bearer {API_KEY}"
    records: list[dict[str, Any]] = []
    params = dict(params or {})
    if path == "users":
        params.setdefault("limit", 1000)
        while True:
            body = session.get(f"{api.url}/users", params=params, timeout=30).json()
            records += body["data"]
            if not body.get("next_cursor"):
                return records
            params["cursor"] = body["next_cursor"]
    if path == "orders":
        page = 1
        while True:
            body = session.get(f"{api.url}/orders", params={**params, "page": page, "per_page": 1000}, timeout=30).json()
            records += body["data"]
            if page >= body["total_pages"]:
                return records
            page += 1
    body = session.get(f"{api.url}/{path}", params={"limit": 1000, **params}, timeout=30).json()
    return body["data"]


@dataclass
class Killed:
    """A ``main.py`` process paused at a fault point and killed with SIGKILL there."""

    paused: bool
    returncode: int
    stdout: bytes
    stderr: str

    @property
    def messages(self) -> list[dict[str, Any]]:
        return [json.loads(line) for line in self.stdout.splitlines() if line.strip()]


def kill_at(point: str, *args: str, count: int = 1, timeout: float = 300, hold: Any | None = None) -> Killed:
    """Run ``main.py args...`` until it reaches fault point ``point`` for the ``count``-th time
    (``helpers/faults.py``), then SIGKILL it. ``hold(process)``, if given, runs while it is paused
    (e.g. to try a second writer on its table) before the kill."""
    import signal
    import threading
    import time

    env = {**os.environ, "SOURCE_FRAMEWORK_PAUSE_AT": f"{point}:{count}"}
    process = subprocess.Popen([sys.executable, MAIN, *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=ROOT, env=env)
    paused = threading.Event()
    out: list[bytes] = []
    err: list[bytes] = []

    def read_out() -> None:
        out.extend(process.stdout)

    def read_err() -> None:
        for line in process.stderr:
            err.append(line)
            if line.startswith(f"paused at {point}:".encode()):
                paused.set()

    readers = [threading.Thread(target=read_out), threading.Thread(target=read_err)]
    for reader in readers:
        reader.start()
    deadline = time.monotonic() + timeout
    while not paused.is_set() and process.poll() is None and time.monotonic() < deadline:
        time.sleep(0.02)
    if paused.is_set() and hold is not None:
        hold(process)
    if process.poll() is None:
        process.send_signal(signal.SIGKILL)
    code = process.wait(timeout=60)
    for reader in readers:
        reader.join()
    return Killed(paused.is_set(), code, b"".join(out), b"".join(err).decode(errors="replace"))


@pytest.fixture(scope="session")
def s3_server():
    """A local S3 server (moto's, which honours S3's conditional writes as delta-rs uses them) on
    127.0.0.1 for the whole run; its endpoint URL."""
    import socket
    import time
    import urllib.request

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    process = subprocess.Popen([sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    endpoint = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 60
    while True:
        try:
            urllib.request.urlopen(endpoint, timeout=2)
            break
        except OSError:
            if time.monotonic() > deadline or process.poll() is not None:
                process.kill()
                raise RuntimeError("the local S3 server did not start") from None
            time.sleep(0.2)
    yield endpoint
    process.terminate()
    process.wait(timeout=30)


@pytest.fixture
def s3_warehouse(s3_server, monkeypatch, request):
    """``s3://<a new bucket>/warehouse`` on the local S3 server, reached through the standard AWS
    variables (set for this test, and so for the processes it starts)."""
    import urllib.request
    import uuid

    for name, value in {"AWS_ENDPOINT_URL": s3_server, "AWS_REGION": "us-east-1", "AWS_ACCESS_KEY_ID": "test-key",
                        "AWS_SECRET_ACCESS_KEY": "test-secret", "AWS_ALLOW_HTTP": "true"}.items():
        monkeypatch.setenv(name, value)
    bucket = f"lake-{uuid.uuid4().hex[:12]}"
    urllib.request.urlopen(urllib.request.Request(f"{s3_server}/{bucket}", method="PUT"), timeout=30)
    return f"s3://{bucket}/warehouse"


def read_table(spark, path: str):
    """A table as a reader of its format sees it: through its Delta log, or Spark's file-sink log."""
    from source_framework.destinations.spark.delta_table import is_delta_table

    if path.startswith("s3://"):  # a table on the test's S3 server, read by Spark through s3a
        from source_framework.destinations.spark.session import get_spark

        spark = get_spark("local[2]")  # the test run's session, given this test's S3 settings (set after it started)
        return spark.read.format("delta").load(path.replace("s3://", "s3a://", 1))
    if is_delta_table(path):
        return spark.read.format("delta").load(path)
    return spark.read.parquet(path)


def landed_rows(spark, path: str) -> list[dict[str, Any]]:
    """Every row of the table at ``path`` (duplicates kept), for tests about which rows landed, where Spark's view of the
    table is not the point: a Delta table (on disk or S3) through its log by delta-rs, another Delta reader (Spark replays
    a small table's log in several jobs per read); a Parquet folder by Spark (its file-sink log).
    Timestamps as Spark's ``collect()`` gives them: naive, in UTC (the tests' time zone)."""
    import datetime as dt

    from deltalake import DeltaTable

    from source_framework.destinations.spark.delta_table import is_delta_table

    if not is_delta_table(path):
        return [row.asDict() for row in read_table(spark, path).collect()]
    return [{name: value.astimezone(dt.UTC).replace(tzinfo=None) if isinstance(value, dt.datetime) and value.tzinfo else value
             for name, value in row.items()} for row in DeltaTable(path).to_pyarrow_table().to_pylist()]
