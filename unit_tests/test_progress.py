"""The progress display of ``read`` and its end-of-run summary: what they show, how often, where."""

from __future__ import annotations

import io
import logging
import os
import pty
import sys
import threading
from collections.abc import Callable
from typing import Any

import pytest
from airbyte_cdk.sources.streams import Stream
from rich.console import Console

from source_framework.destinations.base import ValuesNotKept
from source_framework.runtime.output import ProtocolOutput
from source_framework.runtime.progress import (
    LineProgress,
    LiveProgress,
    Progress,
    checkpoint_line,
    make_progress,
)
from source_framework.runtime.read import read_streams
from source_framework.runtime.results import ReadResult, StreamResult
from source_framework.runtime.stream_adapters import adapt
from source_framework.runtime.summary import format_summary, human_seconds, short_state
from unit_tests.conftest import CursorStream, RecordingDestination, catalog_of, configured


class Clock:
    """Time that moves only when the test moves it. It also counts the live table's redraw
    attempts on its own thread (each reads the clock once), so a test waits for those attempts
    instead of sleeping."""

    def __init__(self, now: float = 100.0) -> None:
        self.now = now
        self._attempts = threading.Semaphore(0)

    def __call__(self) -> float:
        if threading.current_thread().name == "progress" and sys._getframe(1).f_code.co_name == "refresh":
            self._attempts.release()
        return self.now

    def wait_for_attempts(self, count: int) -> None:
        for _ in range(count):
            assert self._attempts.acquire(timeout=10), "the live table's own thread stopped redrawing"

    def wait_until(self, condition: Callable[[], bool]) -> None:
        while not condition():
            self.wait_for_attempts(1)


def terminal_console(width: int = 160) -> Console:
    return Console(file=io.StringIO(), force_terminal=True, width=width, color_system=None)


def rendered(progress: LiveProgress) -> str:
    console = Console(file=io.StringIO(), width=160, color_system=None)
    console.print(progress.render())
    return console.file.getvalue()


# -- what is shown ---------------------------------------------------------------------------


def test_a_checkpoint_line_names_the_stream_and_its_counters():
    clock = Clock()
    progress = LineProgress(clock=clock)
    result = StreamResult(name="users", records=1500, committed=1000, slices=1, slices_total=4)
    progress.stream_started(result)
    clock.now += 2.0
    view = progress.views()[0]
    view.checkpoints = 3
    line = checkpoint_line(view, {"updatedAt": "2025-03-01T00:00:00Z"}, clock())
    assert line == (
        "users: checkpoint 3 committed, 1,000 rows written, 1,500 records read, 1/4 slices, 750 records/s, "
        "state updatedAt=2025-03-01T00:00:00Z"
    )


def test_without_a_terminal_each_committed_checkpoint_logs_one_line(caplog):
    clock = Clock()
    progress = LineProgress(clock=clock)
    result = StreamResult(name="orders")
    with caplog.at_level(logging.INFO, logger="source_framework.progress"):
        with progress:
            progress.stream_started(result)
            for n in range(1, 4):
                result.records += 10
                result.slices += 1
                clock.now += 1
                progress.checkpoint_committed("orders", None, {"updatedAt": f"2025-0{n}-01T00:00:00Z"})
            progress.checkpoint_committed("not-started", None, {"x": 1})  # ignored: never started
            progress.stream_finished(result)
    lines = [r.getMessage() for r in caplog.records if r.name == "source_framework.progress"]
    assert len(lines) == 3
    assert lines[0].startswith("orders: checkpoint 1 committed,") and "10 records read, 1 slices" in lines[0]
    assert lines[2].startswith("orders: checkpoint 3 committed,") and "updatedAt=2025-03-01T00:00:00Z" in lines[2]


def test_without_a_terminal_checkpoints_within_a_second_share_a_line_and_the_last_is_shown_at_the_end(caplog):
    """At a small ``state_checkpoint_interval`` a stream commits many checkpoints a second: the log
    gets at most one line a second per stream, and the newest checkpoint not shown when it ends."""
    clock = Clock()
    progress = LineProgress(clock=clock)
    orders, users = StreamResult(name="orders"), StreamResult(name="users")
    with caplog.at_level(logging.INFO, logger="source_framework.progress"):
        with progress:
            progress.stream_started(orders)
            progress.stream_started(users)
            for n in range(1, 24):  # 23 checkpoints in 2.75 s
                orders.records += 100
                progress.checkpoint_committed("orders", None, {"n": n})
                if n == 3:
                    progress.checkpoint_committed("users", None, {"n": 1})  # another stream: its own second
                clock.now += 0.125
            progress.stream_finished(orders)
            progress.stream_finished(users)
    lines = [r.getMessage() for r in caplog.records if r.name == "source_framework.progress"]
    assert [line.split(",")[0] for line in lines] == [
        "orders: checkpoint 1 committed", "users: checkpoint 1 committed", "orders: checkpoint 9 committed",
        "orders: checkpoint 17 committed", "orders: checkpoint 23 committed",
    ]
    assert lines[-1].endswith("state n=23") and "2,300 records read" in lines[-1]


def test_quiet_shows_nothing(caplog, capsys):
    progress = make_progress(quiet=True)
    assert type(progress) is Progress
    result = StreamResult(name="users")
    with caplog.at_level(logging.DEBUG):
        with progress:
            progress.stream_started(result)
            progress.checkpoint_committed("users", None, {"updatedAt": "2025-01-01T00:00:00Z"})
            progress.stream_finished(result)
    assert not [r for r in caplog.records if r.name == "source_framework.progress"]
    captured = capsys.readouterr()
    assert captured.out == "" and captured.err == ""


def test_the_live_table_shows_each_stream_with_its_counters():
    clock = Clock()
    progress = LiveProgress(terminal_console(), clock=clock)
    users = StreamResult(name="users", records=20000, slices=1, slices_total=1)
    orders = StreamResult(name="orders", records=1234, slices=2, slices_total=13)
    progress.stream_started(users)
    clock.now += 4
    progress.checkpoint_committed("users", None, {"updatedAt": "x"})
    progress.stream_finished(users)
    progress.stream_started(orders)
    clock.now += 1
    progress.checkpoint_committed("orders", None, {"updatedAt": "y"})
    progress.checkpoint_committed("orders", None, {"updatedAt": "z"})
    clock.now += 1.5
    text = rendered(progress)
    for header in ("stream", "status", "records", "slices", "checkpoints", "records/s", "last commit"):
        assert header in text
    users_row = next(line for line in text.splitlines() if "users" in line).split()
    orders_row = next(line for line in text.splitlines() if "orders" in line).split()
    assert users_row[:5] == ["users", "done", "20,000", "1/1", "1"]
    assert "5,000" in users_row  # 20,000 records in 4 s
    assert orders_row[:5] == ["orders", "reading", "1,234", "2/13", "2"]
    assert "1.5s" in orders_row and "ago" in orders_row  # time since its last commit
    assert "494" in orders_row  # 1,234 records in 2.5 s


def test_slices_of_unknown_total_show_the_count_alone():
    progress = LiveProgress(terminal_console(), clock=Clock())
    progress.stream_started(StreamResult(name="store_orders", records=7, slices=3))
    row = next(line for line in rendered(progress).splitlines() if "store_orders" in line).split()
    assert row[:4] == ["store_orders", "reading", "7", "3"]


def test_a_failed_stream_shows_as_failed():
    progress = LiveProgress(terminal_console(), clock=Clock())
    result = StreamResult(name="users")
    progress.stream_started(result)
    result.error = RuntimeError("boom")
    progress.stream_finished(result)
    assert "failed" in next(line for line in rendered(progress).splitlines() if "users" in line)


# -- how often -------------------------------------------------------------------------------


def test_redraws_are_throttled_to_the_refresh_rate():
    clock = Clock()
    progress = LiveProgress(terminal_console(), refresh_per_second=4, clock=clock)
    assert progress.refresh() is True
    assert [progress.refresh() for _ in range(100)] == [False] * 100  # same instant: nothing drawn
    clock.now += 0.2
    assert progress.refresh() is False
    clock.now += 0.05
    assert progress.refresh() is True
    for _ in range(40):  # 10 s of events at 1 kHz-ish bursts: at most 4 draws a second
        clock.now += 0.25
        for _ in range(25):
            progress.refresh()
    assert progress.draws == 2 + 40


def test_the_live_table_redraws_on_its_own_at_most_four_times_a_second():
    console = terminal_console()
    clock = Clock()
    progress = LiveProgress(console, refresh_per_second=4, clock=clock)
    result = StreamResult(name="users")
    with progress:
        progress.stream_started(result)  # the first draw
        for _ in range(200_000):  # what the read loop does per record: an integer increment
            result.records += 1
        assert progress.showing
        clock.now += 0.125
        clock.wait_for_attempts(1)
        assert progress.draws == 1  # asked again under a quarter second after the last draw: not drawn
        clock.now += 0.125
        clock.wait_until(lambda: progress.draws == 2)  # a quarter second on: the table redraws on its own
        assert "200,000" in console.file.getvalue()  # drawn from the read loop's counter
        clock.now += 1.0  # a whole second at once: one draw, not a burst to catch up
        clock.wait_until(lambda: progress.draws == 3)
        clock.wait_for_attempts(1)
        assert progress.draws == 3
    assert not progress.showing
    assert "users" in console.file.getvalue()


# -- where -----------------------------------------------------------------------------------


def test_the_mode_follows_whether_stderr_is_a_terminal(monkeypatch):
    monkeypatch.setenv("TERM", "xterm")
    assert isinstance(make_progress(quiet=False, stream=io.StringIO()), LineProgress)
    master, slave = pty.openpty()
    try:
        with os.fdopen(slave, "w", closefd=False) as terminal:
            assert isinstance(make_progress(quiet=False, stream=terminal), LiveProgress)
            assert type(make_progress(quiet=True, stream=terminal)) is Progress
            monkeypatch.setenv("TERM", "dumb")
            assert isinstance(make_progress(quiet=False, stream=terminal), LineProgress)
    finally:
        os.close(master)
        os.close(slave)


def test_log_lines_print_above_the_live_table_and_go_back_after(monkeypatch):
    master, slave = pty.openpty()
    terminal = os.fdopen(slave, "w", closefd=True)
    handler = logging.StreamHandler(terminal)
    root = logging.getLogger()
    monkeypatch.setattr("sys.stderr", terminal)
    root.addHandler(handler)
    reader = threading.Thread(target=_drain, args=(master,), daemon=True)
    reader.start()
    try:
        progress = make_progress(quiet=False, stream=terminal)
        assert isinstance(progress, LiveProgress)
        with progress:
            assert handler.stream is not terminal  # rich's proxy, which prints above the table
        assert handler.stream is terminal
    finally:
        root.removeHandler(handler)
        terminal.close()


def _drain(fd: int) -> None:
    try:
        while os.read(fd, 65536):
            pass
    except OSError:
        pass


def test_protocol_lines_on_the_same_terminal_print_above_the_table_whole():
    master, slave = pty.openpty()
    reader = threading.Thread(target=_drain, args=(master,), daemon=True)
    reader.start()
    terminal = os.fdopen(slave, "w", closefd=False)
    protocol = os.fdopen(os.dup(slave), "wb")
    try:
        console = Console(file=terminal, force_terminal=True, width=100)
        progress = LiveProgress(console)
        stream = progress.protocol_stream(protocol)
        assert stream is not protocol
        printed: list[str] = []
        print_now = console.print

        def print_and_keep(renderable: Any = "", **kwargs: Any) -> None:
            if isinstance(renderable, str):
                printed.append(renderable)
            print_now(renderable, **kwargs)

        console.print = print_and_keep  # type: ignore[method-assign]
        with progress:
            stream.write(b'{"type":"RECORD","n":1}\n')
            stream.write(b'{"type":"STATE","n":1}\n')
            assert printed == []  # held until the protocol flushes: one redraw for many lines
            stream.flush()
            assert printed == ['{"type":"RECORD","n":1}\n{"type":"STATE","n":1}']
            for _ in range(1200):  # or until 64 KB wait (1,200 lines of 68 bytes)
                stream.write(b'{"type":"RECORD","data":"' + b"x" * 40 + b'"}\n')
            assert len(printed) == 2 and printed[1].count("\n") > 900
            stream.write(b'{"type":"RECORD","n":2}\n')
        # the table is gone: what was held, then the rest, straight to the stream
        stream.write(b'{"type":"LOG"}\n')
        stream.flush()
        assert len(printed) == 2
        # not a terminal: the protocol stream is left alone
        assert LiveProgress(console).protocol_stream(io.BytesIO()).__class__ is io.BytesIO
    finally:
        protocol.close()
        terminal.close()
        os.close(slave)
        os.close(master)


# -- the read loop feeds it ------------------------------------------------------------------


class OneSlice(CursorStream):
    """airbyte-cdk's default slicing, one ``None`` slice: the shared stream always names its slices."""

    stream_slices = Stream.stream_slices

    def read_records(self, sync_mode, cursor_field=None, stream_slice=None, stream_state=None):
        yield from super().read_records(sync_mode, cursor_field, {"index": 0}, stream_state)


@pytest.mark.parametrize(
    "stream, total",
    [
        (CursorStream([[1, 2, 3], [4, 5]], interval=2, slices_as_list=True), 2),
        (CursorStream([[1, 2, 3], [4, 5]], interval=2), None),
        (OneSlice([[1, 2, 3]], interval=2), 1),
    ],
    ids=["list", "generator", "default-single-slice"],
)
def test_read_streams_feeds_the_progress(stream, total, caplog):
    output = ProtocolOutput(io.BytesIO())
    progress = LineProgress(every_seconds=0)
    output.add_state_listener(progress.checkpoint_committed)
    with caplog.at_level(logging.INFO, logger="source_framework.progress"):
        entry = configured(stream.name, cursor_field=["n"])
        sinks = RecordingDestination(location="/warehouse/demo/users")
        result = read_streams({stream.name: adapt(stream, entry)}, catalog_of(entry), {}, sinks, output, progress=progress)
    (stream_result,) = result.streams
    assert stream_result.slices_total == total
    assert stream_result.duration > 0
    assert stream_result.location == "/warehouse/demo/users"
    lines = [r.getMessage() for r in caplog.records if r.name == "source_framework.progress"]
    assert len(lines) == stream_result.states > 0  # one line per committed checkpoint
    view = progress.views()[0]
    assert view.finished is not None and view.checkpoints == stream_result.states
    assert stream_result.rows == stream_result.records == sum(len(s) for s in stream._slices)
    assert stream_result.commits == sinks.sinks[stream.name].commits


def test_state_listeners_run_in_order_after_the_line_is_out():
    out = io.BytesIO()
    calls: list[Any] = []
    output = ProtocolOutput(out, on_state=lambda *a: calls.append(("file", out.getvalue().count(b"\n"))))
    output.add_state_listener(lambda stream, namespace, state: calls.append(("progress", stream, dict(state))))
    output.state("users", None, {"n": 1}, 5)
    assert calls == [("file", 1), ("progress", "users", {"n": 1})]


# -- the summary -----------------------------------------------------------------------------


def test_the_summary_has_a_row_per_stream_with_counts_commits_cursor_time_and_table():
    result = ReadResult(
        streams=[
            StreamResult(name="users", records=20010, handed=20000, skipped=10, committed=20000, states=7, commits=4,
                         final_state={"updatedAt": "2025-12-31T00:00:00Z"}, duration=6.04, location="/warehouse/demo/users"),
            StreamResult(name="stores", records=10, handed=10, committed=10, states=1, commits=1, duration=0.4,
                         location="/warehouse/demo/stores"),
            StreamResult(name="orders", records=900, handed=900, committed=500, states=1, commits=1,
                         error=RuntimeError("x"), duration=75, location="/warehouse/demo/orders"),
            StreamResult(name="products", records=42, handed=42, committed=42, states=1, location="stdout"),
        ]
    )
    text = format_summary(result, 81.9)
    lines = text.splitlines()
    assert lines[0] == "read finished in 1m21s: 4 stream(s), 1 failed"
    assert lines[1].split() == ["stream", "status", "read", "committed", "skipped", "checkpoints", "commits", "final",
                                "cursor", "time", "where"]
    assert lines[2].split() == ["users", "ok", "20,010", "20,000", "10", "7", "4", "updatedAt=2025-12-31T00:00:00Z", "6.0s",
                                "/warehouse/demo/users"]
    assert lines[3].split() == ["stores", "ok", "10", "10", "0", "1", "1", "-", "0.4s", "/warehouse/demo/stores"]
    assert lines[4].split() == ["orders", "FAILED", "900", "500", "0", "1", "1", "-", "1m15s", "/warehouse/demo/orders"]
    assert lines[5].split() == ["products", "ok", "42", "42", "0", "1", "-", "-", "0.0s", "stdout"]
    assert lines[6] == "orders failed: RuntimeError: x"  # why, under the table
    # columns line up
    assert all(line[lines[1].index("where"):].startswith(("/", "stdout", "where")) for line in lines[1:6])


def test_short_states():
    assert short_state(None) == "-" and short_state({}) == "-"
    assert short_state({"updatedAt": "2025-01-01T00:00:00Z"}) == "updatedAt=2025-01-01T00:00:00Z"
    partitioned = {
        "states": [
            {"partition": {"store_id": 1}, "cursor": {"updatedAt": "2025-03-01T00:00:00Z"}},
            {"partition": {"store_id": 2}, "cursor": {"updatedAt": "2025-05-01T00:00:00Z"}},
        ]
    }
    assert short_state(partitioned) == "2 partitions, max updatedAt=2025-05-01T00:00:00Z"
    assert short_state({"k": "x" * 100}).endswith("...") and len(short_state({"k": "x" * 100})) == 60
    assert [human_seconds(s) for s in (0.04, 12.345, 65, 7380)] == ["0.0s", "12.3s", "1m05s", "2h03m"]


def test_the_summary_names_fields_the_schema_does_not_declare():
    result = ReadResult(streams=[
        StreamResult(name="users", records=10, handed=10, committed=10, states=1, location="/w/users",
                     values_not_kept=ValuesNotKept(undeclared_fields={"nickname": 7, "age": 2}, records_with_undeclared_fields=8)),
        StreamResult(name="stores", records=1, handed=1, committed=1, states=1, location="/w/stores"),
    ])
    lines = format_summary(result, 1.0).splitlines()
    assert lines[-1] == "users: 8 records carried fields the schema does not declare (nickname: 7, age: 2); see _sf_meta"
    assert not any(line.startswith("stores:") for line in lines)


def test_a_full_refresh_read_page_by_page_has_no_known_number_of_slices():
    """airbyte-cdk reads a full-refresh HttpStream one page per slice (its resumable full-refresh
    cursor): the progress line said "5/1 slices" for the demo's five pages of products (issue 51).
    The number of slices is unknown there, one page or five, until the last page is read."""
    from airbyte_cdk.models import AirbyteStream, ConfiguredAirbyteStream, DestinationSyncMode, SyncMode

    from source_framework.demo.api import DemoApi
    from source_framework.demo.source import DemoSource
    from source_framework.runtime.stream_adapters import adapt

    with DemoApi(records=50, seed=1).start() as api:
        streams = {s.name: s for s in DemoSource().streams({"api_url": api.url, "api_key": "", "page_size": 10})}
        totals = {}
        for name in ("products", "stores"):
            configured = ConfiguredAirbyteStream(
                stream=AirbyteStream(name=name, json_schema={}, supported_sync_modes=[SyncMode.full_refresh]),
                sync_mode=SyncMode.full_refresh, destination_sync_mode=DestinationSyncMode.overwrite)
            adapter = adapt(streams[name], configured)
            adapter.start({})
            read = 0
            for stream_slice in adapter.slices():
                list(stream_slice.items())
                stream_slice.close()
                read += 1
            totals[name] = (read, adapter.slices_total)
    assert totals == {"products": (5, None), "stores": (1, None)}
