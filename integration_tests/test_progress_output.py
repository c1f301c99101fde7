"""What a person sees while ``main.py read`` runs: progress and the summary on stderr, protocol
alone on stdout; ``--quiet`` silences the first two. Real runs against the demo API."""

from __future__ import annotations

import fcntl
import json
import os
import pty
import re
import signal
import struct
import subprocess
import sys
import termios
import threading

import pytest

from integration_tests.conftest import (
    API_KEY,
    MAIN,
    ROOT,
    catalog,
    config_for,
    read_table,
    run_in_process,
    write_json,
)
from source_framework.demo.api import DemoApi, Faults

PROTOCOL_TYPES = {"RECORD", "STATE", "LOG", "TRACE", "SPEC", "CONNECTION_STATUS", "CATALOG", "CONTROL"}
STREAMS = ["users", "orders", "stores", "store_orders"]
PROGRESS = re.compile(r"source_framework\.progress: (\w+): checkpoint (\d+) committed, .* state (.*)$")


def protocol_lines(stdout: bytes) -> list[dict]:
    """Every stdout line, each of which must be a protocol message."""
    messages = []
    for line in stdout.decode().splitlines():
        message = json.loads(line)
        assert message["type"] in PROTOCOL_TYPES, line
        messages.append(message)
    return messages


def states_by_stream(messages: list[dict]) -> dict[str, list[dict]]:
    states: dict[str, list[dict]] = {}
    for message in messages:
        if message["type"] == "STATE":
            stream = message["state"]["stream"]
            states.setdefault(stream["stream_descriptor"]["name"], []).append(stream["stream_state"])
    return states


def summary_rows(stderr: str) -> tuple[str, dict[str, dict[str, str]]]:
    """The summary's first line and its rows by stream, cells by column name."""
    lines = stderr.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("read finished in "))
    header = lines[start + 1]
    columns = ["stream", "status", "read", "committed", "skipped", "checkpoints", "commits", "final cursor", "time", "where"]
    starts = [header.index(name) for name in columns] + [None]
    rows = {}
    for line in lines[start + 2 : start + 2 + len(STREAMS)]:
        cells = {name: line[starts[i] : starts[i + 1]].strip() for i, name in enumerate(columns)}
        rows[cells["stream"]] = cells
    return lines[start], rows


# The two below run in this process (what stderr says does not need one of its own); the
# terminal tests and test_spark_table's stdout test run real processes.


def test_stderr_follows_the_run_and_ends_with_the_summary(spark, demo_api, tmp_path):
    warehouse = tmp_path / "warehouse"
    config = write_json(tmp_path / "config.json", config_for(demo_api, warehouse))
    catalog_path = write_json(tmp_path / "catalog.json", catalog(*STREAMS))
    run = run_in_process("read", "--config", config, "--catalog", catalog_path)
    assert run.returncode == 0, run.stderr

    messages = protocol_lines(run.stdout)
    states = states_by_stream(messages)
    assert set(states) == {"users", "orders", "store_orders", "stores"}
    # A full refresh prints one STATE, once its table is replaced, the one airbyte-cdk ends an HttpStream's with.
    assert states["stores"] == [{"__ab_full_refresh_sync_complete": True}]

    # Progress lines for committed checkpoints, numbered, in the order of the STATE lines: at most
    # one a second per stream, always the first and the last.
    lines: dict[str, list[tuple[int, str]]] = {}
    for line in run.stderr.splitlines():
        match = PROGRESS.search(line)
        if match:
            lines.setdefault(match.group(1), []).append((int(match.group(2)), match.group(3)))
    assert set(lines) == set(states), run.stderr[-3000:]
    for name, stream_states in states.items():
        numbers = [n for n, _ in lines[name]]
        assert numbers == sorted(set(numbers)) and numbers[0] == 1 and numbers[-1] == len(stream_states), name
    for name in ("users", "orders"):
        assert [text for _, text in lines[name]] == [f"updatedAt={states[name][n - 1]['updatedAt']}" for n, _ in lines[name]]
    # The live table is for terminals only.
    assert "\x1b[" not in run.stderr and "records/s  " not in run.stderr

    first, rows = summary_rows(run.stderr)
    assert first.endswith(f"{len(STREAMS)} stream(s), 0 failed")
    assert sorted(rows) == sorted(STREAMS)
    for name in STREAMS:
        path = os.path.join(str(warehouse), "demo", name)
        row = rows[name]
        assert row["status"] == "ok"
        assert row["where"] == path
        assert int(row["committed"].replace(",", "")) == read_table(spark, path).count(), name
        assert row["read"] == row["committed"] and row["skipped"] == "0", name
        assert int(row["checkpoints"]) == len(states.get(name, []))
        assert int(row["commits"]) >= 1
    assert rows["users"]["final cursor"] == f"updatedAt={states['users'][-1]['updatedAt']}"
    assert rows["stores"]["final cursor"] == "-"
    assert rows["store_orders"]["final cursor"].startswith("10 partitions, max updatedAt=")


def test_quiet_leaves_only_the_logs(spark, demo_api, tmp_path):
    config = write_json(tmp_path / "config.json", config_for(demo_api, tmp_path / "warehouse"))
    catalog_path = write_json(tmp_path / "catalog.json", catalog("users", "stores"))
    run = run_in_process("read", "--config", config, "--catalog", catalog_path, "--quiet")
    assert run.returncode == 0, run.stderr
    messages = protocol_lines(run.stdout)
    assert states_by_stream(messages)["users"]
    assert "source_framework.progress" not in run.stderr
    assert "checkpoint 1 committed" not in run.stderr
    assert "read finished" not in run.stderr


# -- on a terminal ---------------------------------------------------------------------------


def run_on_terminal(args: list[str], stdout_too: bool, tmp_path) -> tuple[int, bytes, bytes]:
    """``main.py`` with stderr (and stdout, if asked) on a pseudo-terminal 140 columns wide."""
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 40, 140, 0, 0))
    stdout_path = tmp_path / "stdout.jsonl"
    with open(stdout_path, "wb") as stdout_file:
        process = subprocess.Popen(
            [sys.executable, MAIN, *args],
            cwd=ROOT,
            stdin=subprocess.DEVNULL,
            stdout=slave if stdout_too else stdout_file,
            stderr=slave,
            # The terminal's size is the pty's: COLUMNS/LINES (a test runner's worker sets them) would win.
            env={**{k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES")}, "TERM": "xterm-256color"},
        )
    os.close(slave)
    chunks: list[bytes] = []

    def drain() -> None:
        while True:
            try:
                chunk = os.read(master, 65536)
            except OSError:  # the child closed its end
                return
            if not chunk:
                return
            chunks.append(chunk)

    reader = threading.Thread(target=drain, daemon=True)
    reader.start()
    try:
        returncode = process.wait(timeout=300)
        reader.join(timeout=10)
    finally:
        os.close(master)
    return returncode, b"".join(chunks), stdout_path.read_bytes()


@pytest.fixture
def slow_api():
    """The demo API waiting 40 ms before each page: a sync of it lasts over a second, so the live
    table (redrawn four times a second) is drawn several times however fast the machine reads."""
    with DemoApi(records=1500, api_key=API_KEY, seed=7, faults=Faults(delay_ms=40)).start() as api:
        yield api


@pytest.fixture
def stdout_read_args(slow_api, tmp_path):
    # Records through stdout (no JVM): what is tested here is the display, not the table.
    config = write_json(tmp_path / "config.json", config_for(slow_api, tmp_path / "warehouse", state_checkpoint_interval=100))
    catalog_path = write_json(tmp_path / "catalog.json", catalog("users", "orders", "stores"))
    return ["read", "--config", config, "--catalog", catalog_path, "--destination", "stdout"]


def test_on_a_terminal_the_live_table_shows_and_stdout_stays_protocol(stdout_read_args, tmp_path):
    returncode, terminal, stdout = run_on_terminal(stdout_read_args, stdout_too=False, tmp_path=tmp_path)
    assert returncode == 0, terminal.decode(errors="replace")
    messages = protocol_lines(stdout)
    assert len([m for m in messages if m["type"] == "RECORD"]) == 1500 * 2 + 10
    text = terminal.decode(errors="replace")
    for header in ("records", "slices", "checkpoints", "records/s", "last commit"):
        assert header in text
    assert "\x1b[" in text  # redrawn in place
    assert "source_framework.progress" not in text  # no per-checkpoint lines on a terminal
    assert re.search(r"orders\s+(reading|done)\s+[\d,]+\s+\d+/\d+", text)  # date windows: slices of a known total
    plain = re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", text).replace("\r", "")
    summary = plain[plain.index("read finished in ") :]
    assert re.search(r"^users\s+ok\s+1,500\s+1,500\s+0\s+\d+\s+-\s+updatedAt=\S+\s+\S+\s+stdout$", summary, re.M), summary


def test_with_stdout_on_the_same_terminal_protocol_lines_print_whole(stdout_read_args, tmp_path):
    returncode, terminal, stdout = run_on_terminal(stdout_read_args, stdout_too=True, tmp_path=tmp_path)
    assert returncode == 0, terminal.decode(errors="replace")
    assert stdout == b""
    lines = re.findall(rb'\{"type":"[A-Z_]+".*', terminal)
    messages = [json.loads(line.split(b"\r")[0]) for line in lines]
    assert len([m for m in messages if m["type"] == "RECORD"]) == 1500 * 2 + 10
    assert len([m for m in messages if m["type"] == "STATE"]) >= 2
    assert b"records/s" in terminal and b"read finished in " in terminal


def test_ctrl_c_stops_with_a_message_and_exit_code_130(tmp_path):
    with DemoApi(records=1500, api_key=API_KEY, seed=7, faults=Faults(delay_ms=200)).start() as api:
        config = write_json(tmp_path / "config.json", config_for(api, tmp_path / "warehouse"))
        catalog_path = write_json(tmp_path / "catalog.json", catalog("users", "orders"))
        process = subprocess.Popen(
            [sys.executable, MAIN, "read", "--config", config, "--catalog", catalog_path, "--destination", "stdout"],
            cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        )
        lines = []
        for line in process.stdout:  # wait for the first STATE, then press Ctrl-C
            lines.append(line)
            if b'"type":"STATE"' in line:
                process.send_signal(signal.SIGINT)
                break
        lines += process.stdout.readlines()
        stderr = process.stderr.read().decode(errors="replace")
        assert process.wait(timeout=60) == 130, stderr
    protocol_lines(b"".join(lines))
    assert "interrupted (Ctrl-C)" in stderr and "Traceback" not in stderr
    assert "read finished" not in stderr
