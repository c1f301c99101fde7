"""Records converted from their pages' bytes, in a process of their own (``page_conversion_process.py``).

Converting records costs the reading interpreter about as much as reading does, so where a stream's records are its pages'
items, this process sends the pages' bytes and the other writes a checkpoint's rows as a fsynced Parquet file, counted in
its footer: a lost row fails the stream, and a dead process fails the commit before its STATE."""

from __future__ import annotations

import os
import struct
import subprocess
import sys
import threading
from collections import deque
from collections.abc import Mapping, Sequence
from contextlib import suppress
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import orjson

from source_framework.helpers.raw_pages import RawPage

if TYPE_CHECKING:  # (not imported for it: a converter starts before the sync's process imports Arrow)
    import pyarrow as pa

PROCESS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "page_conversion_process.py")
HEADER = struct.Struct("<BII")  # kind, meta length, data length (as the process reads them)
REPLY = struct.Struct("<I")
ANSWERED = (b"W", b"C")  # frames the process answers

#: Page bytes queued for the pipe before ``page`` waits (the other process is that far behind).
MAX_QUEUED_BYTES = 32 << 20

#: Frames that wait for the next other frame (runs, checkpoint ends, dropped pages), up to this many.
LAZY_FRAMES = (b"R", b"E", b"D")
MAX_LAZY_FRAMES = 256

#: Pieces the sender thread writes in one call at most (POSIX allows no fewer than 16).
MAX_PIECES = 16


#: Linux's ``F_SETPIPE_SZ``, and a larger pipe, so the sender and the other process trade fewer wake-ups.
F_SETPIPE_SZ = 1031
PIPE_BYTES = 1 << 20


def _widen(fd: int) -> None:
    try:
        import fcntl

        fcntl.fcntl(fd, F_SETPIPE_SZ, PIPE_BYTES)
    except (ImportError, OSError):
        pass  # the default size works, with more wake-ups


def _unwritten(pieces: list[bytes], written: int) -> list[bytes]:
    for index, piece in enumerate(pieces):
        if written < len(piece):
            return [piece[written:], *pieces[index + 1:]] if written else pieces[index:]
        written -= len(piece)
    return []


class PageConversionFailed(RuntimeError):
    """The converting process failed or ended; the commit that needed it fails."""


@dataclass(frozen=True)
class PageWrite:
    """What ``write`` put in its folder."""

    rows: int  # counted in the file's footer
    file: str  # its name in the folder; on disk (fsynced) when ``write`` returns
    counts: dict[str, Any]  # ``ConversionCounts.as_dict()`` of the conversions since the last answer


class PageConverter:
    """One stream's converting process, and the pipe to it."""

    def __init__(self) -> None:
        # A session of its own: Ctrl-C stops the sync's reading, but queued commits still need this process.
        self._process = subprocess.Popen(
            [sys.executable, "-P", PROCESS], stdin=subprocess.PIPE, stdout=subprocess.PIPE, close_fds=True,
            start_new_session=True,
        )
        assert self._process.stdin is not None and self._process.stdout is not None
        self._pipe, self._replies = self._process.stdin, self._process.stdout
        self._fd = self._pipe.fileno()
        _widen(self._fd)
        os.set_blocking(self._fd, False)  # (our end only: a write takes what fits, see ``_send``)
        self._lazy: list[bytes] = []  # small frames that go with the next other one
        self._queue: deque[bytes | None] = deque()  # pieces that did not fit in the pipe, in order
        self._queued_bytes = 0
        self._sending = False  # the sender thread is writing pieces it took from the queue
        lock = threading.Lock()
        self._frames = threading.Condition(lock)  # the sender waits for pieces to write
        self._room = threading.Condition(lock)  # senders of pages wait for the queue to drain
        self._failed: BaseException | None = None
        self._closed = False
        self._pages = 0
        self._ends = 0
        self._sender = threading.Thread(target=self._send_queued, name="page-converter", daemon=True)
        self._sender.start()
        self.begun = False

    def begin(self, schema: pa.Schema, sync_id: str, records_path: Sequence[str], parquet_options: Mapping[str, Any],
              on_type_mismatch: str = "null") -> None:
        """Before the first page, or for another stream once every write of the last was answered (the process forgets it)."""
        self._pages = self._ends = 0
        self._send(b"S", {"sync_id": sync_id, "path": list(records_path), "parquet_options": dict(parquet_options),
                          "on_type_mismatch": on_type_mismatch}, schema.serialize().to_pybytes())
        self.begun = True

    @property
    def usable(self) -> bool:
        return self._failed is None and not self._closed and self._process.poll() is None

    def page(self, page: RawPage) -> int:
        self._pages += 1
        self._send(b"P", [self._pages, page.extracted_at_ms], page.body)
        return self._pages

    def runs(self, runs: list[tuple[int, int, int]]) -> None:
        """``(page id, start, end)``: items written, in the order they were written."""
        self._send(b"R", runs)

    def drop(self, page_id: int) -> None:
        """No run will name this page again."""
        self._send(b"D", page_id)

    def end(self, runs: list[tuple[int, int, int]] | None = None, at: int | None = None) -> int:
        """A checkpoint: a token for the rows of every run sent so far plus ``runs``, or for the stream's first ``at`` of them."""
        self._ends += 1
        self._send(b"E", [self._ends, runs or [], at])
        return self._ends

    def write(self, token: int, seq: int, folder: str) -> PageWrite:
        """The rows up to ``token`` not yet written, numbered ``seq``, as one Parquet file in ``folder``."""
        answer = self._ask(b"W", {"token": token, "seq": seq, "folder": folder}, "while writing a commit's rows")
        return PageWrite(answer["rows"], answer["file"], answer["counts"])

    def publish(self, plan: Mapping[str, Any]) -> dict[str, Any]:
        """Carry out a commit's file work with the rows up to ``plan["token"]``; answers ``rows``, ``added``, ``counts`` or ``stopped``."""
        return self._ask(b"C", plan, "while committing")

    def _ask(self, kind: bytes, meta: Mapping[str, Any], when: str) -> dict[str, Any]:
        self._send(kind, meta)
        head = self._replies.read(REPLY.size)
        if len(head) < REPLY.size:
            raise self._failing(PageConversionFailed(self._ended(when)))
        answer: dict[str, Any] = orjson.loads(self._replies.read(REPLY.unpack(head)[0]))
        if "error" in answer:
            raise self._failing(PageConversionFailed(f"the page converter failed: {answer['error']}"))
        if "stopped" in answer:  # it stops at a simulated crash, as a killed process would
            self._failing(PageConversionFailed(f"the page converter stopped at {answer['stopped']} (a simulated crash)"))
        return answer

    def _failing(self, error: PageConversionFailed) -> PageConversionFailed:
        with self._frames:
            self._failed = self._failed or error
        return error

    def close(self) -> None:
        """Let the frames sent go, then end the process (it exits when its stdin closes)."""
        with self._frames:
            if self._closed:
                return
            self._closed = True
            self._queue.extend(self._lazy)
            self._lazy = []
            self._queue.append(None)
            self._frames.notify()
        self._sender.join()
        try:
            self._process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self._process.kill()
            self._process.wait()
        self._replies.close()

    def _send(self, kind: bytes, meta: Any, data: bytes = b"") -> None:
        """Send a frame: into the pipe now where it fits (waking the sender thread per page is costly), else by the sender."""
        blob = orjson.dumps(meta)
        head = HEADER.pack(kind[0], len(blob), len(data)) + blob
        with self._frames:
            if self._failed is not None or self._closed:
                if kind in ANSWERED:
                    raise PageConversionFailed(self._ended("before a commit's rows were asked for"))
                return  # the next write says what happened
            if kind in LAZY_FRAMES and len(self._lazy) < MAX_LAZY_FRAMES:
                self._lazy.append(head)
                return
            while self._queued_bytes > MAX_QUEUED_BYTES and self._failed is None:
                self._room.wait()
            if self._lazy:
                head = b"".join((*self._lazy, head))
                self._lazy = []
            pieces = [head, data] if data else [head]
            if not self._queue and not self._sending:
                try:
                    pieces = _unwritten(pieces, os.writev(self._fd, pieces))
                except BlockingIOError:
                    pass  # the pipe is full: the sender writes them as it drains
                except OSError as error:  # the process is gone: the commit that needs it fails
                    self._failed = error
                    if kind in ANSWERED:
                        raise PageConversionFailed(self._ended("before a commit's rows were asked for")) from error
                    return
                if not pieces:
                    return
            self._queue.extend(pieces)
            self._queued_bytes += sum(map(len, pieces))
            self._frames.notify()

    def _send_queued(self) -> None:
        """The sender thread: what did not fit, written blocking, so the interpreter is let go once, not per few kilobytes."""
        closing = False
        while not closing:  # (set below once ``close`` asked)
            with self._frames:
                while not self._queue:
                    self._frames.wait()
                queued = list(self._queue)
                self._queue.clear()
                if not self._sending:
                    self._sending = True
                    os.set_blocking(self._fd, True)
            pieces = [piece for piece in queued if piece is not None]
            closing = len(pieces) < len(queued)  # (``close`` queues None last)
            sent = sum(map(len, pieces))
            try:
                while pieces:  # (a signal may end a write early)
                    pieces = _unwritten(pieces, os.writev(self._fd, pieces[:MAX_PIECES]))
            except OSError as error:
                with self._frames:
                    self._failed = error
                    self._queue.clear()
                    self._queued_bytes = 0
                    self._sending = False
                    self._room.notify_all()
                break
            with self._frames:
                self._queued_bytes -= sent
                if not self._queue:
                    os.set_blocking(self._fd, False)
                    self._sending = False
                self._room.notify_all()
        with suppress(OSError):
            self._pipe.close()

    def _ended(self, when: str) -> str:
        try:  # its pipe closes as it exits: a moment may pass before its exit code is there
            code: int | None = self._process.wait(timeout=1.0)
        except subprocess.TimeoutExpired:
            code = None
        if code is not None:
            how = f"ended with exit code {code}"
        else:
            how = "stopped answering" + (f" ({self._failed!r})" if self._failed is not None else "")
        return f"the page converter process {how} {when}"


class ConverterPool:
    """Page converters for one sync's streams, one started ahead and each reused by the next stream (a start is slow)."""

    #: Idle converters kept; more are closed (streams synced at once may each have taken one).
    KEEP = 2

    def __init__(self) -> None:
        self._idle: list[PageConverter] = []
        self._made: list[PageConverter] = []  # every one, so that ``close`` ends those still lent out
        self._lock = threading.Lock()
        self._closed = False

    def warm(self) -> None:
        with self._lock:
            if self._closed or self._idle:
                return
        self.give_back(self._new())

    def take(self) -> PageConverter:
        with self._lock:
            while self._idle:
                converter = self._idle.pop()
                if converter.usable:
                    return converter
                converter.close()
        return self._new()

    def _new(self) -> PageConverter:
        converter = PageConverter()
        with self._lock:
            self._made.append(converter)
        return converter

    def give_back(self, converter: PageConverter) -> None:
        with self._lock:
            if not self._closed and converter.usable and len(self._idle) < self.KEEP:
                converter.begun = False
                self._idle.append(converter)
                return
        converter.close()

    def close(self) -> None:
        with self._lock:
            self._closed = True
            made, self._made, self._idle = self._made, [], []
        for converter in made:
            converter.close()
