"""One commit of a Parquet table folder: planned as plain data (``CommitPlan``) by ``SparkTable.commit`` and carried out by
:func:`carry_out`, here or in the page converter's process. The steps: the checkpoint record, the files moved in and written,
the folder fsynced, the staging removed, then the log's batch: the commit point (``docs/tables.md``)."""

from __future__ import annotations

import errno
import fcntl
import json
import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from typing import Any

from source_framework.destinations.spark.atomic_files import fsync_directory, fsync_file, remove_folder, write_atomically


@dataclass(frozen=True)
class CommitPlan:
    """What one commit writes, and where; paths are absolute."""

    table: str
    record: str
    record_text: str
    moves: list[tuple[str, str]]  # (a staged file, its path in the table)
    unsynced: list[str]  # the moved files their writer did not fsync
    file: str | None  # the file the carrier writes into the table itself, if any
    folders: list[str]
    batch: str  # the log's batch file: its appearance is the commit
    head: list[str]
    added: list[str]

    def as_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, plan: dict[str, Any]) -> CommitPlan:
        return cls(**{**plan, "moves": [(source, target) for source, target in plan["moves"]]})


def carry_out(plan: CommitPlan, write_file: Callable[[str], None], at_point: Callable[[str], None]) -> list[str]:
    """The commit's steps; returns the batch's lines for the files added."""
    write_atomically(plan.record, plan.record_text.encode("utf-8"))
    at_point("commit.record_written")
    for source, target in plan.moves:
        os.rename(source, target)
    for target in plan.unsynced:
        fsync_file(target)
    if plan.file is not None:
        write_file(plan.file)
    fsync_directory(plan.table)
    for folder in plan.folders:
        remove_folder(folder)
    targets = [target for _, target in plan.moves] + ([plan.file] if plan.file is not None else [])
    added = [_with_stat(line, target) for line, target in zip(plan.added, targets, strict=True)]
    at_point("commit.files_written")
    write_atomically(plan.batch, "\n".join([*plan.head, *added]).encode("utf-8"), overwrite=False)
    return added


@contextmanager
def committing_in(table: str) -> Iterator[None]:
    """Hold the table folder's ``flock`` shared through a commit in another process, so clean-up waits for it."""
    fd = os.open(table, os.O_RDONLY | os.O_DIRECTORY)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_SH)
        except OSError as error:
            if error.errno not in (errno.ENOLCK, errno.EINVAL, errno.EOPNOTSUPP, errno.EBADF):
                raise
        yield
    finally:
        os.close(fd)


def _with_stat(line: str, path: str) -> str:
    entry = json.loads(line)
    stat = os.stat(path)
    entry["size"], entry["modificationTime"] = stat.st_size, stat.st_mtime_ns // 1_000_000
    return json.dumps(entry, separators=(",", ":"))
