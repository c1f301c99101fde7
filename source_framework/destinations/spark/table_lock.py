"""One writer per table: an OS file lock, held while a ``read`` (or a ``state`` command) works on the table, released by
the kernel when the process ends, however it ends. Two runs on one table would otherwise clean up each other's commits in
flight. The lock file ``.<table folder>.lock`` sits beside the table folder, so deleting a table never deletes its lock,
and says who holds it; nothing deletes a lock file, so two processes always lock the same file."""

from __future__ import annotations

import datetime as dt
import errno
import fcntl
import json
import os
import socket
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from typing import Any


def lock_file(table_path: str) -> str:
    return os.path.join(os.path.dirname(table_path), f".{os.path.basename(table_path)}.lock")


class TableLocked(RuntimeError):
    """Another process holds the table's lock."""


class TableLock:
    def __init__(self, table_path: str, purpose: str = "read", wait: bool = False, poll_seconds: float = 1.0) -> None:
        self.table_path = table_path
        self.path = lock_file(table_path)
        self.purpose = purpose
        self.wait = wait
        self.poll_seconds = poll_seconds
        self._fd: int | None = None

    @property
    def held(self) -> bool:
        return self._fd is not None

    def acquire(self) -> TableLock:
        if self._fd is not None:
            return self
        if not os.path.isdir(os.path.dirname(self.path)):
            # The namespace folder, made durably (imported only then: this module alone starts a holder in milliseconds).
            from source_framework.destinations.spark.atomic_files import make_folders

            make_folders(os.path.dirname(self.path))
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        told = False
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                holder = _wait_for_holder(self.path)
                if not self.wait:
                    os.close(fd)
                    raise TableLocked(
                        f"table {self.table_path} is being written by {holder}; two writers on one table would "
                        f"undo each other's commits. Wait for it to finish, or pass --wait-for-lock to wait"
                    ) from None
                if not told:
                    sys.stderr.write(f"waiting for the lock of table {self.table_path}, held by {holder}\n")
                    told = True
                time.sleep(self.poll_seconds)
        self._fd = fd
        self._write_holder()
        return self

    def release(self) -> None:
        if self._fd is None:
            return
        try:
            os.ftruncate(self._fd, 0)
            fcntl.flock(self._fd, fcntl.LOCK_UN)
        finally:
            os.close(self._fd)
            self._fd = None

    def __enter__(self) -> TableLock:
        return self.acquire()

    def __exit__(self, *exc: Any) -> None:
        self.release()

    def _write_holder(self) -> None:
        holder = {
            "pid": os.getpid(),
            "host": socket.gethostname(),
            "purpose": self.purpose,
            "command": " ".join(sys.argv)[:300],
            "since": dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        }
        assert self._fd is not None
        os.ftruncate(self._fd, 0)
        os.pwrite(self._fd, json.dumps(holder).encode("utf-8"), 0)


@contextmanager
def no_commit_in_flight(table_path: str, poll_seconds: float = 0.05) -> Iterator[None]:
    """Within the block, no page converter (whose process outlives a killed sync) is carrying out a commit in the folder."""
    try:
        fd = os.open(table_path, os.O_RDONLY | os.O_DIRECTORY)
    except FileNotFoundError:
        yield
        return
    try:
        told = False
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if not told:
                    sys.stderr.write(f"waiting for a commit on table {table_path} that an ended run's page converter is "
                                     f"still writing\n")
                    told = True
                time.sleep(poll_seconds)
            except OSError as error:
                if error.errno in (errno.ENOLCK, errno.EINVAL, errno.EOPNOTSUPP, errno.EBADF):
                    break  # (no flock here: nothing to wait for)
                raise
        yield
    finally:
        os.close(fd)


def _wait_for_holder(lock_path: str, seconds: float = 0.5) -> str:
    """``describe_holder``, given a moment: a process that just took the lock writes who it is right after."""
    deadline = time.monotonic() + seconds
    while True:
        holder = describe_holder(lock_path)
        if holder != UNKNOWN_HOLDER or time.monotonic() >= deadline:
            return holder
        time.sleep(0.01)


UNKNOWN_HOLDER = "another process"


def describe_holder(lock_path: str) -> str:
    holder: dict[str, Any] = {}
    with suppress(OSError, ValueError), open(lock_path, encoding="utf-8") as handle:
        holder = json.loads(handle.read() or "{}")
    if not holder:
        return UNKNOWN_HOLDER
    return (
        f"process {holder.get('pid')} on {holder.get('host')} ({holder.get('purpose')}, since {holder.get('since')}: "
        f"{holder.get('command')})"
    )
