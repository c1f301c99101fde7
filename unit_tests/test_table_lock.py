"""One writer per table: a second writer fails fast naming the holder, or waits; a dead holder's lock is free."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading

import pytest

from source_framework.destinations.spark.table_lock import TableLock, TableLocked

MODULE = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                      "source_framework", "destinations", "spark", "table_lock.py")
# The lock module alone (it needs nothing but the standard library): a holder up in milliseconds.
HOLD = """
import importlib.util, sys, time
spec = importlib.util.spec_from_file_location("table_lock", sys.argv[2])
module = importlib.util.module_from_spec(spec)
spec.loader.exec_module(module)
module.TableLock(sys.argv[1], purpose="read").acquire()
print("held", flush=True)
time.sleep(60)
"""


@pytest.fixture
def holder(tmp_path):
    """Another process holding the table's lock."""
    table = str(tmp_path / "users")
    process = subprocess.Popen([sys.executable, "-c", HOLD, table, MODULE], stdout=subprocess.PIPE, text=True)
    assert process.stdout.readline().strip() == "held"
    yield table, process
    if process.poll() is None:
        process.kill()
        process.wait()


def test_a_second_writer_fails_fast_naming_the_holder(holder):
    table, process = holder
    with pytest.raises(TableLocked) as error:
        TableLock(table).acquire()
    assert f"process {process.pid}" in str(error.value) and "--wait-for-lock" in str(error.value)


def test_the_kernel_frees_the_lock_of_a_killed_holder(holder):
    table, process = holder
    os.kill(process.pid, signal.SIGKILL)
    process.wait()
    with TableLock(table) as lock:
        assert lock.held


def test_wait_for_lock_waits_for_the_holder(holder):
    table, process = holder
    threading.Timer(0.5, lambda: process.kill()).start()
    with TableLock(table, wait=True, poll_seconds=0.05) as lock:
        assert lock.held
        assert process.poll() is not None  # got it only once the holder was gone


def test_a_writer_refused_just_as_the_holder_took_the_lock_still_names_it(holder):
    """The holder writes who it is right after taking the lock; a second writer looking in between
    waits a moment for the name instead of saying "another process" (the crash test's two reads
    started together met that moment)."""
    from source_framework.destinations.spark.table_lock import lock_file

    table, process = holder
    path = lock_file(table)
    with open(path, "rb") as handle:
        who = handle.read()
    os.truncate(path, 0)  # the moment between the holder's flock and its write

    def holder_writes_who_it_is() -> None:
        with open(path, "wb") as handle:
            handle.write(who)

    threading.Timer(0.1, holder_writes_who_it_is).start()
    with pytest.raises(TableLocked) as error:
        TableLock(table).acquire()
    assert f"process {process.pid}" in str(error.value)


def test_clean_up_waits_for_a_commit_a_page_converter_is_writing_in_the_folder(tmp_path, capsys):
    """Issue 49, item 7: the converter holds the folder's flock shared through a commit
    (``parquet_commit.committing_in``); clean-up takes it exclusively, after it."""
    import fcntl
    import time

    from source_framework.destinations.spark.table_lock import no_commit_in_flight

    table = tmp_path / "users"
    table.mkdir()
    converter = os.open(table, os.O_RDONLY)
    fcntl.flock(converter, fcntl.LOCK_SH)
    threading.Timer(0.5, os.close, [converter]).start()  # the commit's step ends
    started = time.monotonic()
    with no_commit_in_flight(str(table)):
        waited = time.monotonic() - started
    assert waited >= 0.4
    assert "still writing" in capsys.readouterr().err
    with no_commit_in_flight(str(tmp_path / "not yet made")):
        pass
