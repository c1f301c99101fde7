"""The README's tutorial, run as written, so that it cannot rot.

Its connector is ``examples/orders_connector/main.py``: the README shows that file verbatim, and
it stays under 40 lines of code. Here it syncs the demo API's orders (started as the tutorial
starts it) into Spark, is killed with SIGKILL in the middle, resumes from its ``--state-file``,
and the table ends with every order exactly once.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time

import pytest

from integration_tests.conftest import ROOT, read_table

EXAMPLE = os.path.join(ROOT, "examples", "orders_connector")
CONNECTOR = os.path.join(EXAMPLE, "main.py")
RECORDS = 30_000


def code_lines(text: str) -> int:
    return sum(1 for line in text.splitlines() if line.strip() and not line.strip().startswith("#"))


def test_the_tutorial_connector_is_under_40_lines_and_the_readme_shows_it_verbatim():
    with open(CONNECTOR, encoding="utf-8") as handle:
        code = handle.read()
    assert code_lines(code) < 40
    with open(os.path.join(ROOT, "README.md"), encoding="utf-8") as handle:
        readme = handle.read()
    assert "```python\n" + code + "```\n" in readme


@pytest.fixture
def demo_api_process():
    """``python -m source_framework.demo.api``, as the tutorial starts it (on a free port, slowed
    down so that a sync takes long enough to be killed in the middle)."""
    process = subprocess.Popen(
        [sys.executable, "-m", "source_framework.demo.api", "--port", "0", "--records", str(RECORDS),
         "--api-key", "secret", "--delay-ms", "150"],
        cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
    )
    line = process.stderr.readline()
    assert line.startswith("demo API listening on "), line
    yield line.split()[-1]
    process.terminate()
    process.wait(timeout=30)


@pytest.mark.slow
def test_sync_kill_resume_every_order_exactly_once(spark, demo_api_process, tmp_path):
    with open(os.path.join(EXAMPLE, "config.json")) as handle:
        config = json.load(handle)
    config["api_url"] = demo_api_process  # everything else as in the tutorial: ./warehouse, the key, start_date
    (tmp_path / "config.json").write_text(json.dumps(config))
    shutil.copy(os.path.join(EXAMPLE, "catalog.json"), tmp_path / "catalog.json")
    command = [sys.executable, CONNECTOR, "read", "--config", "config.json", "--catalog", "catalog.json",
               "--state-file", "state.json"]
    state_path = tmp_path / "state.json"

    # The first sync, killed with SIGKILL once its first checkpoints are committed.
    with open(tmp_path / "first.jsonl", "wb") as stdout, open(tmp_path / "first.err", "wb") as stderr:
        first = subprocess.Popen(command, cwd=tmp_path, stdout=stdout, stderr=stderr)
        deadline = time.monotonic() + 240
        while not state_path.exists() and first.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        assert first.poll() is None, "the sync ended before it could be killed: " + (tmp_path / "first.err").read_text()
        first.send_signal(signal.SIGKILL)
        assert first.wait(timeout=30) == -signal.SIGKILL
    killed_at = json.loads(state_path.read_text())[0]["stream"]["stream_state"]["updatedAt"]
    table = str(tmp_path / "warehouse" / "shop" / "orders")
    committed = read_table(spark, table).count()
    assert 0 < committed < RECORDS, "the kill should land in the middle of the sync"

    # The same command again resumes from the state file and finishes.
    resumed = subprocess.run(command, cwd=tmp_path, capture_output=True, timeout=300)
    assert resumed.returncode == 0, resumed.stderr.decode(errors="replace")
    messages = [json.loads(line) for line in resumed.stdout.splitlines()]
    final = [m for m in messages if m["type"] == "STATE"][-1]["state"]["stream"]["stream_state"]["updatedAt"]
    assert killed_at < final
    assert json.loads(state_path.read_text())[0]["stream"]["stream_state"]["updatedAt"] == final
    assert b"read finished in " in resumed.stderr and table.encode() in resumed.stderr

    frame = read_table(spark, table)
    ids = [row["id"] for row in frame.select("id").collect()]
    assert len(ids) == RECORDS, f"{len(ids) - len(set(ids))} duplicate rows, {RECORDS - len(set(ids))} orders missing"
    assert set(ids) == set(range(1, RECORDS + 1))
    # The resumed run went on from where the first one stopped: it wrote only what was missing.
    written = sum(m["state"]["sourceStats"]["recordCount"] for m in messages if m["type"] == "STATE")
    assert 0 < written <= RECORDS - committed
