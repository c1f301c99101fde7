"""Progress of a running ``read`` on stderr: a live table on a terminal, log lines otherwise, nothing with ``--quiet``.

The live table is redrawn by a background thread from counters the read loop keeps anyway, so reading costs nothing more.
"""

from __future__ import annotations

import logging
import os
import sys
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, BinaryIO, TextIO, cast

from source_framework.runtime.results import StreamResult
from source_framework.runtime.summary import human_seconds, short_state

REFRESH_PER_SECOND = 4

#: Without a terminal: seconds between two progress lines of a stream, at least.
LINE_EVERY_SECONDS = 1.0

logger = logging.getLogger("source_framework.progress")


@dataclass
class StreamView:
    """One stream as the display sees it: its live result plus the times of its events."""

    result: StreamResult
    started: float
    checkpoints: int = 0
    last_commit: float | None = None
    finished: float | None = None

    def elapsed(self, now: float) -> float:
        return (self.finished if self.finished is not None else now) - self.started

    def rate(self, now: float) -> float:
        elapsed = self.elapsed(now)
        return self.result.records / elapsed if elapsed > 0 else 0.0

    def slices(self) -> str:
        done, total = self.result.slices, self.result.slices_total
        # A total the count passed was a wrong guess: "5/1" would mislead, so only the count is shown.
        return f"{done}/{total}" if total is not None and done <= total else str(done)

    def status(self) -> str:
        if self.finished is None:
            return "reading"
        return "failed" if self.result.error is not None else "done"


class Progress:
    """Follows the streams of one ``read`` and shows nothing (``--quiet``); subclasses show."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self.clock = clock
        self._lock = threading.Lock()
        self._views: dict[str, StreamView] = {}

    def __enter__(self) -> Progress:
        self.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.stop()

    def start(self) -> None:
        """Begin showing (before the first stream)."""

    def protocol_stream(self, stream: BinaryIO) -> BinaryIO:
        """The stream protocol lines should be written to while this progress shows (see ``LiveProgress``)."""
        return stream

    def stop(self) -> None:
        """Stop showing and leave the terminal as it was."""

    def views(self) -> list[StreamView]:
        with self._lock:
            return list(self._views.values())

    def stream_started(self, result: StreamResult) -> None:
        with self._lock:
            self._views[result.name] = StreamView(result, self.clock())

    def checkpoint_committed(self, stream: str, namespace: str | None, state: Mapping[str, Any]) -> None:
        """A ``ProtocolOutput`` state listener: ``stream``'s STATE is out, so its checkpoint committed."""
        view = self._views.get(stream)
        if view is None:
            return
        view.checkpoints += 1
        view.last_commit = self.clock()
        self.on_checkpoint(view, state)

    def stream_finished(self, result: StreamResult) -> None:
        view = self._views.get(result.name)
        if view is not None:
            view.finished = self.clock()

    def on_checkpoint(self, view: StreamView, state: Mapping[str, Any]) -> None:
        """What a subclass shows for a committed checkpoint."""


class LineProgress(Progress):
    """For logs: a line per committed checkpoint, at most one every ``every_seconds`` per stream (a line per checkpoint
    would flood the log and slow the reading thread); the last one unshown is shown when the stream ends."""

    def __init__(self, clock: Callable[[], float] = time.monotonic, every_seconds: float = LINE_EVERY_SECONDS) -> None:
        super().__init__(clock)
        self.every_seconds = every_seconds
        self._shown_at: dict[str, float] = {}
        self._unshown: dict[str, Mapping[str, Any]] = {}  # the newest state not shown, per stream

    def on_checkpoint(self, view: StreamView, state: Mapping[str, Any]) -> None:
        now, name = self.clock(), view.result.name
        shown_at = self._shown_at.get(name)
        if shown_at is not None and now - shown_at < self.every_seconds:
            self._unshown[name] = state
            return
        self._unshown.pop(name, None)
        self._shown_at[name] = now
        logger.info("%s", checkpoint_line(view, state, now))

    def stream_finished(self, result: StreamResult) -> None:
        super().stream_finished(result)
        view, state = self._views.get(result.name), self._unshown.pop(result.name, None)
        if view is not None and state is not None:
            logger.info("%s", checkpoint_line(view, state, self.clock()))


def checkpoint_line(view: StreamView, state: Mapping[str, Any], now: float) -> str:
    return (
        f"{view.result.name}: checkpoint {view.checkpoints} committed, {view.result.rows:,} rows written, "
        f"{view.result.records:,} records read, {view.slices()} slices, {view.rate(now):,.0f} records/s, "
        f"state {short_state(state)}"
    )


class LiveProgress(Progress):
    """For a terminal: a table of the streams, redrawn in place at most ``refresh_per_second``."""

    def __init__(
        self,
        console: Any,
        refresh_per_second: float = REFRESH_PER_SECOND,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        from rich.live import Live

        super().__init__(clock)
        self.console = console
        self.interval = 1.0 / refresh_per_second
        self.draws = 0
        self._last_draw: float | None = None
        self._begun = clock()
        self._draw_lock = threading.Lock()
        self._live = Live(console=console, auto_refresh=False, transient=True, get_renderable=self.render)
        self._stopping = threading.Event()
        self._ticker = threading.Thread(target=self._tick, name="progress", daemon=True)
        self._rerouted: list[logging.StreamHandler] = []

    def start(self) -> None:
        self._begun = self.clock()
        self._live.start()
        self._route_logs_above_the_table()
        self._ticker.start()

    def stop(self) -> None:
        self._stopping.set()
        if self._ticker.is_alive():
            self._ticker.join()
        for handler in self._rerouted:
            handler.setStream(self.console.file)
        self._rerouted = []
        self._live.stop()

    def protocol_stream(self, stream: BinaryIO) -> BinaryIO:
        """Where stdout is this same terminal, protocol lines print above the table instead of across it."""
        if not same_terminal(stream, self.console.file):
            return stream
        return cast(BinaryIO, _AboveTheTable(self, stream))

    @property
    def showing(self) -> bool:
        return self._live.is_started

    def _route_logs_above_the_table(self) -> None:
        """Logging handlers on our terminal go through rich's stderr proxy, which prints above the table."""
        from rich.file_proxy import FileProxy

        if not isinstance(sys.stderr, FileProxy):
            return
        for handler in logging.getLogger().handlers:
            if isinstance(handler, logging.StreamHandler) and handler.stream is self.console.file:
                handler.setStream(sys.stderr)
                self._rerouted.append(handler)

    def _tick(self) -> None:
        while not self._stopping.wait(self.interval):
            self.refresh()

    def refresh(self) -> bool:
        """Redraw, unless the last redraw was less than ``interval`` ago; True if it drew."""
        now = self.clock()
        with self._draw_lock:
            if self._last_draw is not None and now - self._last_draw < self.interval:
                return False
            self._last_draw = now
        self._live.refresh()
        with self._draw_lock:
            self.draws += 1  # counted once drawn: whoever waits for a draw then sees it on the console
        return True

    def stream_started(self, result: StreamResult) -> None:
        super().stream_started(result)
        self.refresh()

    def stream_finished(self, result: StreamResult) -> None:
        super().stream_finished(result)
        self.refresh()

    def render(self) -> Any:
        from rich import box
        from rich.table import Table

        now = self.clock()
        table = Table(box=box.SIMPLE_HEAD, show_edge=False, title_justify="left", title=f"reading, {human_seconds(now - self._begun)}")
        for name in ("stream", "status"):
            table.add_column(name)
        for name in ("records", "slices", "checkpoints", "rows written", "records/s", "last commit", "time"):
            table.add_column(name, justify="right")
        for view in self.views():
            since = "-" if view.last_commit is None or view.finished is not None else f"{human_seconds(now - view.last_commit)} ago"
            table.add_row(
                view.result.name,
                view.status(),
                f"{view.result.records:,}",
                view.slices(),
                f"{view.checkpoints:,}",
                f"{view.result.rows:,}",
                f"{view.rate(now):,.0f}",
                since,
                human_seconds(view.elapsed(now)),
            )
        return table


class _AboveTheTable:
    """A binary stream whose lines print above the table while it shows, held until ``flush`` or 64 KB since each print
    redraws the table."""

    LIMIT = 1 << 16

    def __init__(self, progress: LiveProgress, stream: BinaryIO) -> None:
        self._progress, self._stream, self._held = progress, stream, bytearray()

    def write(self, data: bytes) -> int:
        if not self._progress.showing:
            self._print_held()
            return self._stream.write(data)
        self._held += data
        if len(self._held) >= self.LIMIT:
            self._print_held()
        return len(data)

    def flush(self) -> None:
        self._print_held()
        self._stream.flush()

    def _print_held(self) -> None:
        if not self._held:
            return
        if not self._progress.showing:
            self._stream.write(bytes(self._held))
            self._held.clear()
            return
        end = self._held.rfind(b"\n")
        if end < 0:
            return
        text = self._held[:end].decode("utf-8", "replace")
        del self._held[: end + 1]
        self._stream.flush()  # whatever was written before the table showed comes first
        self._progress.console.print(text, markup=False, highlight=False, emoji=False, soft_wrap=True)

    def fileno(self) -> int:
        return self._stream.fileno()


def make_progress(quiet: bool, stream: TextIO | None = None, terminal: bool = True) -> Progress:
    """``--quiet``: nothing; a terminal: the live table; anything else: a logged line per checkpoint."""
    if quiet:
        return Progress()
    stream = stream or sys.stderr
    if terminal and is_terminal(stream):
        from rich.console import Console

        return LiveProgress(Console(file=stream))
    return LineProgress()


def same_terminal(one: Any, other: Any) -> bool:
    try:
        return os.isatty(one.fileno()) and os.path.samestat(os.fstat(one.fileno()), os.fstat(other.fileno()))
    except (AttributeError, OSError, ValueError):
        return False


def is_terminal(stream: TextIO) -> bool:
    try:
        return stream.isatty() and os.environ.get("TERM") != "dumb"
    except (AttributeError, ValueError):  # no isatty, or closed
        return False
