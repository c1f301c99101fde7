"""Run one sync in a child process, follow its stdout, and optionally kill it mid-way."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import IO, Any

import orjson

from source_framework.compare.counters import ReadCounters
from source_framework.compare.risk import ScheduleTracker

KILL_POLL_SECONDS = 0.002  # how often the counters are checked while a kill is pending
STOP_GRACE_SECONDS = 10  # a child told to stop (we were interrupted) gets this long before SIGKILL
_RECORD_PREFIX = b'{"type":"RECORD","record":{"stream":"'


@dataclass
class RunResult:
    name: str
    returncode: int | None
    killed: bool
    seconds: float
    records: int
    states: int
    repeated_states: int
    max_at_risk: int
    at_risk_at_end: int  # read but not covered by a received STATE when the run ended (or was killed)
    last_states: dict[str, dict[str, Any]] = field(default_factory=dict)
    reads: dict[str, int] = field(default_factory=dict)
    errors: list[str] = field(default_factory=list)
    stderr_path: str = ""
    first_state_seconds: float | None = None  # from the process's start to its first STATE line
    first_commit_seconds: float | None = None
    first_state_wall: float | None = None  # time.time() when the first STATE line arrived
    first_state_walls: dict[str, float] = field(default_factory=dict)
    states_by_stream: dict[str, int] = field(default_factory=dict)
    max_checkpoints_ahead: int | None = None
    reading_seconds: float | None = None
    first_record_wall: float | None = None  # time.time() of the first RECORD line (CDK's read)
    ended_wall: float | None = None

    @property
    def records_per_second(self) -> float:
        """From the first record read: the process's start (imports, Spark) is not reading."""
        seconds = self.seconds if self.reading_seconds is None else self.reading_seconds
        return self.records / seconds if seconds > 0 else 0.0

    def stderr_tail(self, lines: int = 25) -> str:
        try:
            with open(self.stderr_path, encoding="utf-8", errors="replace") as handle:
                return "".join(handle.readlines()[-lines:])
        except OSError:
            return ""


class SyncRunner:
    def __init__(self, workdir: str, script: str, streams: Sequence[str]) -> None:
        self.workdir = workdir
        self.script = os.path.abspath(script)
        self.streams = list(streams)
        os.makedirs(workdir, exist_ok=True)

    def run_ours(self, name: str, read_args: Sequence[str], kill_after: int | None = None) -> RunResult:
        """``script read ...`` through the probe; SIGKILL once ``kill_after`` records were read."""
        counter_path = os.path.join(self.workdir, f"{name}.counters")
        counters = ReadCounters.create(counter_path, self.streams)
        argv = [
            sys.executable, "-m", "source_framework.compare.probe",
            "--counters", counter_path, "--streams", ",".join(self.streams),
            self.script, *read_args,
        ]
        try:
            run = self._run(name, argv, counters, kill_after)
            run.first_commit_seconds = first_commit_seconds(counters, run)
            run.reading_seconds = _reading_seconds(counters.first_record_at(), run)
            return run
        finally:
            counters.close()

    def run_cdk(self, name: str, read_args: Sequence[str]) -> RunResult:
        argv = [sys.executable, "-m", "source_framework.compare.cdk_read", self.script, *read_args]
        run = self._run(name, argv, None, None)
        run.reading_seconds = _reading_seconds(run.first_record_wall, run)
        return run

    def write_states(self, name: str, run: RunResult) -> str | None:
        if not run.last_states:
            return None
        path = os.path.join(self.workdir, f"{name}.state.json")
        with open(path, "w", encoding="utf-8") as handle:
            json.dump(list(run.last_states.values()), handle)
        return path

    def _run(self, name: str, argv: list[str], counters: ReadCounters | None, kill_after: int | None) -> RunResult:
        """``argv`` in a child, followed; with ``counters`` (ours), SIGKILLed once they total ``kill_after`` records."""
        reads = counters.snapshot if counters else None
        asked = counters.checkpoints_asked if counters else None
        tracker = ScheduleTracker()
        stderr_path = os.path.join(self.workdir, f"{name}.stderr.log")
        started = time.perf_counter()
        with open(stderr_path, "wb") as stderr:
            process: subprocess.Popen[bytes] | None = None
            killed = False
            try:
                with _stops_held():
                    process = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=stderr, env=_child_env())
                assert process.stdout is not None
                reader = threading.Thread(target=_follow, args=(process.stdout, tracker, reads, asked), daemon=True)
                reader.start()
                if kill_after is not None and counters is not None:
                    while process.poll() is None:
                        if counters.total() >= kill_after:
                            process.kill()  # SIGKILL: no clean-up of any kind, as in a real crash
                            killed = True
                            break
                        time.sleep(KILL_POLL_SECONDS)
                returncode = process.wait()
            except BaseException:  # Ctrl-C or SIGTERM (see command.py): no sync goes on without us
                if process is not None:
                    _stop(process)
                raise
            seconds = time.perf_counter() - started
            ended_wall = time.time()
            reader.join()
        final_reads = reads() if reads is not None else dict(tracker.record_lines)
        return RunResult(
            name=name,
            returncode=None if killed else returncode,
            killed=killed,
            seconds=seconds,
            records=sum(final_reads.values()),
            states=tracker.states,
            repeated_states=tracker.repeated_states,
            max_at_risk=max(tracker.max_at_risk, tracker.at_risk(final_reads) if killed else 0),
            at_risk_at_end=tracker.at_risk(final_reads),
            last_states=tracker.last_states,
            reads=dict(final_reads),
            stderr_path=stderr_path,
            first_state_seconds=None if tracker.first_state_at is None else tracker.first_state_at - started,
            first_state_wall=tracker.first_state_wall,
            first_state_walls=dict(tracker.first_state_walls),
            errors=list(tracker.errors),
            states_by_stream=dict(tracker.states_by_stream),
            max_checkpoints_ahead=tracker.max_checkpoints_ahead,
            first_record_wall=tracker.first_record_wall,
            ended_wall=ended_wall,
        )


def first_commit_seconds(counters: ReadCounters, run: RunResult) -> float | None:
    """From the sync's first checkpoint asked to that stream's first STATE line (another stream's may come earlier)."""
    asked, stream = counters.first_checkpoint_at(), counters.first_checkpoint_stream()
    state_at = run.first_state_walls.get(stream) if stream is not None else run.first_state_wall
    return None if asked is None or state_at is None else max(0.0, state_at - asked)


def _reading_seconds(first_record: float | None, run: RunResult) -> float | None:
    if first_record is None or run.ended_wall is None:
        return None
    return max(0.0, run.ended_wall - first_record)


def _follow(
    stdout: IO[bytes],
    tracker: ScheduleTracker,
    reads: Callable[[], dict[str, int]] | None,
    asked: Callable[[], dict[str, int]] | None = None,
) -> None:
    for line in stdout:
        if line.startswith(_RECORD_PREFIX):
            end = line.find(b'"', len(_RECORD_PREFIX))
            tracker.on_record(line[len(_RECORD_PREFIX):end].decode())
            continue
        try:
            message = orjson.loads(line)
        except orjson.JSONDecodeError:
            continue
        if not isinstance(message, dict):
            continue
        kind = message.get("type")
        if kind == "RECORD":
            tracker.on_record(str(message.get("record", {}).get("stream", "")))
        elif kind == "STATE":
            state = message.get("state") or {}
            stream = ((state.get("stream") or {}).get("stream_descriptor") or {}).get("name", "")
            count = (state.get("sourceStats") or {}).get("recordCount")
            tracker.on_state(stream, state, count, reads() if reads else None, asked() if asked else None)
        elif kind == "TRACE":
            trace = message.get("trace") or {}
            if trace.get("type") == "ERROR":
                # airbyte-cdk reports failures on stdout, not stderr.
                tracker.errors.append(str((trace.get("error") or {}).get("message", "")))
            status = trace.get("stream_status") or {}
            if trace.get("type") == "STREAM_STATUS" and status.get("status") == "COMPLETE":
                stream = (status.get("stream_descriptor") or {}).get("name", "")
                tracker.on_complete(stream, reads() if reads else None)


@contextmanager
def _stops_held() -> Iterator[None]:
    """Ctrl-C or SIGTERM arriving while a child starts takes effect once it has started, so the caller can stop it."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    arrived: list[int] = []
    previous = {number: signal.signal(number, lambda number, frame: arrived.append(number))
                for number in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for number, handler in previous.items():
            signal.signal(number, handler)
        for signum in arrived:
            signal.raise_signal(signum)  # now under the handler the program had


def _stop(process: subprocess.Popen[bytes]) -> None:
    """SIGTERM first, so the sync releases its table locks and stops its JVM; SIGKILL if it lingers."""
    if process.poll() is None:
        process.terminate()
        try:
            process.wait(STOP_GRACE_SECONDS)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def _child_env() -> dict[str, str]:
    env = dict(os.environ)
    env.pop("SOURCE_FRAMEWORK_PAUSE_AT", None)  # a fault point left in the environment would hang a run
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    env["PYTHONPATH"] = os.pathsep.join(p for p in (root, env.get("PYTHONPATH", "")) if p)
    return env
