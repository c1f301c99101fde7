"""The benchmark's cases: what each one runs, and how it is timed and measured.

Every case runs in a fresh child process whose tree (the Python process and, for Spark, its
JVM) is watched by ``PeakMemory``. The time that counts is the reading, from the first record
request to the last output, never the interpreter start or imports:

- worker cases (``bench/worker.py``) time themselves around the read call;
- ``FullSyncCase`` runs ``main.py read`` into Spark exactly as a user does and is timed from its
  first STREAM_STATUS line (reading starts; Spark starts in the background at the same moment)
  to its last protocol line (the final STATE and COMPLETE, after the last commit).

Usage::

    case = FullSyncCase("full-1000", "(4) full sync, interval 1000", interval=1000)
    measurement = case.run(bench_env)       # Measurement(records=..., seconds=..., commits=...)
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass, field
from typing import Any

from bench.memory import PeakMemory
from source_framework.compare.commits import commit_stats
from source_framework.compare.counters import ReadCounters
from source_framework.destinations.spark.destination import SparkDestination


@dataclass
class BenchEnv:
    """What every case shares: files, the API, where scratch data goes."""

    root: str  # the repository
    workdir: str  # scratch: configs, results, warehouses
    base_config: dict[str, Any]
    catalog_path: str
    streams: list[str]
    namespace: str = "demo"
    python: str = sys.executable
    #: the warehouses the cases wrote, removed once the whole benchmark is over (see
    #: ``new_warehouse``); one list for all the record counts of a run
    warehouses: list[str] = field(default_factory=list)

    def new_warehouse(self, tag: str) -> str:
        """A warehouse folder no earlier run used, kept until ``remove_warehouses``.

        Why not remove each after its run: on ext4 without a journal (the benchmark machine's
        disk), creating a file skips each inode of its group freed in the last minutes, reading
        each one's record to tell (the kernel's ``recently_deleted``). After an interval-100
        warehouse (~1,900 files) was removed, the next interval-100 sync's page converter spent
        1.1 s in opening files (3,800 opens, ~1,900 of them creating one; cProfile) and its stream
        took 6.4 s; after 6 quiet minutes its opens did not show among its costs and it took 4.9 s."""
        number = 1
        while (path := os.path.join(self.workdir, f"warehouse-{tag}-{number}")) in self.warehouses or os.path.exists(path):
            number += 1  # (one an earlier benchmark left in this workdir is not removed now either)
        self.warehouses.append(path)
        return path

    def config_path(self, interval: int | None, tag: str, concurrency: int, destination: dict[str, Any] | None = None) -> str:
        """The base config at ``interval`` and ``concurrency``; ``destination``: keys of its
        ``destination`` section this case sets (its table format or writer)."""
        path = os.path.join(self.workdir, f"config-{tag}.json")
        config = {**self.base_config, "state_checkpoint_interval": interval, "concurrency_level": concurrency}
        config["destination"] = {**config.get("destination", {}), **(destination or {})}
        with open(path, "w") as handle:
            json.dump(config, handle)
        return path

    def child_env(self) -> dict[str, str]:
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(p for p in (self.root, env.get("PYTHONPATH", "")) if p)
        env.pop("SOURCE_FRAMEWORK_PAUSE_AT", None)
        return env


@dataclass
class Measurement:
    case: str
    records: int
    seconds: float
    process_seconds: float
    python_peak_mb: float
    jvm_peak_mb: float = 0.0
    #: the page converters' processes (``destinations/spark/page_conversion.py``), added up
    converter_peak_mb: float = 0.0
    states: int = 0
    #: user + system CPU seconds of the case's processes (Python, and the JVM where one ran)
    cpu_seconds: float | None = None
    #: CPU seconds the demo API used while the case ran
    api_cpu_seconds: float | None = None
    commits: int | None = None
    data_files: int | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def records_per_second(self) -> float:
        return self.records / self.seconds if self.seconds > 0 else 0.0

    @property
    def cores(self) -> float | None:
        """The case's CPU seconds over its process's wall time: how many cores it kept busy."""
        return None if self.cpu_seconds is None or self.process_seconds <= 0 else self.cpu_seconds / self.process_seconds

    @property
    def api_cores(self) -> float | None:
        """The demo API's share of the cores over the same wall time."""
        return None if self.api_cpu_seconds is None or self.process_seconds <= 0 else self.api_cpu_seconds / self.process_seconds


class Case:
    name = ""
    label = ""

    def run(self, env: BenchEnv) -> Measurement:
        raise NotImplementedError


class WorkerCase(Case):
    """(1) framework with records dropped, (2) airbyte-cdk to /dev/null, (3) bare requests loop."""

    def __init__(self, name: str, label: str, interval: int | None = None, concurrency: int = 1, worker: str = "") -> None:
        self.name, self.label, self.interval, self.concurrency = name, label, interval, concurrency
        self.worker = worker or name

    def run(self, env: BenchEnv) -> Measurement:
        result_path = os.path.join(env.workdir, f"result-{self.name}.json")
        config = env.config_path(self.interval, self.name, self.concurrency)
        argv = [env.python, "-m", "bench.worker", self.worker, "--config", config,
                "--catalog", env.catalog_path, "--result", result_path]
        started = time.perf_counter()
        process = subprocess.Popen(argv, cwd=env.root, env=env.child_env(), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        with PeakMemory(process.pid) as peaks:
            _, stderr = process.communicate()
        process_seconds = time.perf_counter() - started
        if process.returncode != 0:
            raise RuntimeError(f"{self.name} failed ({process.returncode}):\n{stderr.decode(errors='replace')[-3000:]}")
        with open(result_path) as handle:
            result = json.load(handle)
        return Measurement(
            case=self.name, records=result["records"], seconds=result["seconds"], process_seconds=process_seconds,
            python_peak_mb=max(result.get("python_peak_mb", 0.0), peaks.python_mb), states=result.get("states", 0),
            extra={k: v for k, v in result.items() if k not in ("records", "seconds", "states", "python_peak_mb")},
        )


class FullSyncCase(Case):
    """(4) ``main.py read`` into a fresh Spark warehouse at one checkpoint interval; ``destination``:
    the destination settings this case sets (``table_format``, ``writer``) over the run's."""

    def __init__(self, name: str, label: str, interval: int | None, spark_master: str | None = None, concurrency: int = 1,
                 destination: dict[str, Any] | None = None) -> None:
        self.name, self.label, self.interval, self.spark_master = name, label, interval, spark_master
        self.concurrency, self.destination = concurrency, destination

    def run(self, env: BenchEnv) -> Measurement:
        warehouse = env.new_warehouse(self.name)
        config = env.config_path(self.interval, self.name, self.concurrency, self.destination)
        # Through the compare probe counting no records: it only notes when the first checkpoint was
        # asked, for the "first commit" figure (no cost per record).
        counters_path = os.path.join(env.workdir, f"{self.name}.counters")
        counters = ReadCounters.create(counters_path, [])
        argv = [env.python, "-m", "source_framework.compare.probe", "--counters", counters_path, "--streams", "",
                os.path.join(env.root, "main.py"), "read", "--config", config,
                "--catalog", env.catalog_path, "--warehouse", warehouse, "--quiet"]
        if self.spark_master:
            argv += ["--spark-master", self.spark_master]
        log_path = os.path.join(env.workdir, f"{self.name}.stderr.log")
        started = time.perf_counter()
        with open(log_path, "wb") as log:
            process = subprocess.Popen(argv, cwd=env.root, env=env.child_env(), stdout=subprocess.PIPE, stderr=log)
            assert process.stdout is not None
            with PeakMemory(process.pid) as peaks:
                first = last = first_state = first_state_wall = None
                states = 0
                for line in process.stdout:
                    now = time.perf_counter()
                    if first is None and b'"STREAM_STATUS"' in line:
                        first = now
                    if line.startswith(b'{"type":"STATE"'):
                        states += 1
                        if first_state is None:
                            first_state, first_state_wall = now, time.time()
                    last = now
                process.wait()
        process_seconds = time.perf_counter() - started
        if process.returncode != 0 or first is None or last is None:
            with open(log_path, errors="replace") as handle:
                raise RuntimeError(f"{self.name} failed ({process.returncode}):\n{handle.read()[-3000:]}")
        destination = SparkDestination(warehouse, default_namespace=env.namespace)  # only asked where tables are
        try:
            totals = [commit_stats(destination.committed_table(None, stream)) for stream in env.streams]
            resume_open = resume_open_seconds(destination, env.streams)
        finally:
            destination.close()
        measurement = Measurement(
            case=self.name, records=sum(t.rows for t in totals), seconds=last - first, process_seconds=process_seconds,
            python_peak_mb=peaks.python_mb, jvm_peak_mb=peaks.jvm_mb, converter_peak_mb=peaks.converters_mb, states=states,
            extra={"processes": peaks.processes(), "first_state_after_start_s": round((first_state or started) - started, 2),
                   "first_commit_s": _first_commit_seconds(counters.first_checkpoint_at(), first_state_wall),
                   "resume_open_s": round(resume_open, 3)},
            commits=sum(t.commits for t in totals), data_files=sum(t.files for t in totals),
        )
        counters.close()
        return measurement


def resume_open_seconds(destination: SparkDestination, streams: list[str]) -> float:
    """How long a resume takes to open the tables and find their last committed checkpoint, as
    ``read`` does before its first request (tables opened anew: nothing cached from the sync)."""
    started = time.perf_counter()
    for stream in streams:
        destination.committed_table(None, stream).last_checkpoint()
    return time.perf_counter() - started


def remove_warehouses(paths: list[str]) -> None:
    """Remove the warehouses ``BenchEnv.new_warehouse`` handed out (millions of rows add up on disk)."""
    while paths:
        shutil.rmtree(paths.pop(), ignore_errors=True)


def _first_commit_seconds(asked: float | None, state_at: float | None) -> float | None:
    """From the sync's first checkpoint asked (the end of its first slice) to that STATE line."""
    return None if asked is None or state_at is None else round(max(0.0, state_at - asked), 3)


def all_cases(spark_master: str | None = None, concurrency: tuple[int, ...] = (1, 4, 8)) -> list[Case]:
    """The cases; those named ``-c<N>`` read N slices at once (``concurrency_level``)."""
    cases: list[Case] = [
        WorkerCase("framework-null", "(1) our read, records dropped"),
        WorkerCase("cdk-devnull", "(2) airbyte-cdk read to /dev/null"),
        WorkerCase("bare-requests", "(3) bare requests + orjson loop"),
    ]
    for n in concurrency:
        if n > 1:  # framework-null itself reads one slice at a time
            cases.append(WorkerCase(f"framework-null-c{n}", f"(1) our read, records dropped, concurrency {n}",
                                    concurrency=n, worker="framework-null"))
        cases.append(WorkerCase(f"cdk-declarative-c{n}", f"(2b) airbyte-cdk declarative manifest, concurrency {n}, to /dev/null",
                                concurrency=n, worker="cdk-declarative"))
    for n in concurrency:
        cases.append(FullSyncCase(f"full-slice-c{n}", f"(4) full sync into Spark, slice checkpoints, concurrency {n}",
                                  None, spark_master, concurrency=n))
    parquet, spark_writer = {"table_format": "parquet"}, {"table_format": "delta", "writer": "spark"}
    cases += [
        FullSyncCase("full-10000", "(4) full sync into Spark, interval 10000", 10000, spark_master),
        FullSyncCase("full-1000", "(4) full sync into Spark, interval 1000", 1000, spark_master),
        FullSyncCase("full-100", "(4) full sync into Spark, interval 100", 100, spark_master),
        # the table formats and writers side by side (the cases above: the run's, Delta by default)
        FullSyncCase("parquet-slice", "(4p) full sync into Parquet folders, slice checkpoints", None, spark_master, destination=parquet),
        FullSyncCase("parquet-100", "(4p) full sync into Parquet folders, interval 100", 100, spark_master, destination=parquet),
        FullSyncCase("spark-writer-slice", "(4s) full sync into Delta by Spark's Delta writer, slice checkpoints", None,
                     spark_master, destination=spark_writer),
    ]
    return cases  # (bench/run.py adds dlt's case, bench/dlt_case.py, which builds on this module's Case)
