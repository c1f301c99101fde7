"""Read and append Spark's file-sink metadata log (``<table>/_spark_metadata/``) from Python.

When a folder holds ``_spark_metadata``, ``spark.read.parquet(folder)`` reads exactly the files this log lists, so writing
it ourselves gives plain Spark readers all-or-nothing commits with no extra jars. Spark's rules for reading it: batch ids
where ``(id + 1) % k == 0`` must be ``<id>.compact`` files listing every live file (else readers fail), and a reader loads
the latest one plus every batch after it; ``"action": "delete"`` is not honoured, so a replace jumps to the next compaction
id and lists only its files; readers infer ``k`` from the gap between the two newest ``.compact`` files."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path

from source_framework.destinations.spark.atomic_files import write_atomically

METADATA_DIR = "_spark_metadata"
VERSION_LINE = "v1"
COMPACT_SUFFIX = ".compact"
DEFAULT_COMPACT_INTERVAL = 10
ADD_ACTION = "add"
#: What Hadoop's local file system reports, and so what Spark's own sink writes.
LOCAL_BLOCK_SIZE = 32 * 1024 * 1024


def local_path(uri: str) -> str:
    """The local path of a log line's ``file:`` URI (anything else as it is)."""
    from urllib.parse import unquote, urlparse

    return unquote(urlparse(uri).path) if uri.startswith("file:") else uri


class DamagedLog(ValueError):
    """A log batch with a line that is not one of Spark's file statuses (cut or changed)."""


@dataclass(frozen=True)
class SinkFileStatus:
    """One line of a batch file (Spark's ``SinkFileStatus``)."""

    path: str
    size: int
    modification_time: int
    is_dir: bool = False
    block_replication: int = 1
    block_size: int = LOCAL_BLOCK_SIZE
    action: str = ADD_ACTION

    @classmethod
    def for_local_file(cls, path: str) -> SinkFileStatus:
        absolute = Path(os.path.abspath(path))
        stat = absolute.stat()
        return cls(path=absolute.as_uri(), size=stat.st_size, modification_time=stat.st_mtime_ns // 1_000_000)

    def to_json(self) -> str:
        return self._json

    @cached_property
    def _json(self) -> str:
        # Cached: a compaction batch writes every live file's line again.
        return json.dumps(
            {
                "path": self.path,
                "size": self.size,
                "isDir": self.is_dir,
                "modificationTime": self.modification_time,
                "blockReplication": self.block_replication,
                "blockSize": self.block_size,
                "action": self.action,
            },
            separators=(",", ":"),
        )

    @classmethod
    def from_json(cls, line: str) -> SinkFileStatus:
        entry = json.loads(line)
        return cls(
            path=entry["path"],
            size=entry["size"],
            modification_time=entry["modificationTime"],
            is_dir=entry.get("isDir", False),
            block_replication=entry.get("blockReplication", 1),
            block_size=entry.get("blockSize", LOCAL_BLOCK_SIZE),
            action=entry.get("action", ADD_ACTION),
        )


class FileSinkLog:
    """The ``_spark_metadata`` log of one table folder. One writer at a time."""

    def __init__(self, table_dir: str, compact_interval: int = DEFAULT_COMPACT_INTERVAL):
        if compact_interval < 1:
            raise ValueError("compact_interval must be positive")
        self.directory = os.path.join(os.path.abspath(table_dir), METADATA_DIR)
        self.compact_interval = compact_interval
        # This object's own last write (newest batch id, live files), so a frequent writer reads the folder once.
        self._written: tuple[int, list[SinkFileStatus] | None] | None = None

    def forget(self) -> None:
        """Read the folder again from now on (another object may have written the log)."""
        self._written = None

    def is_compact_batch(self, batch_id: int) -> bool:
        return (batch_id + 1) % self.compact_interval == 0

    def batch_path(self, batch_id: int) -> str:
        suffix = COMPACT_SUFFIX if self.is_compact_batch(batch_id) else ""
        return os.path.join(self.directory, f"{batch_id}{suffix}")

    def batch_ids(self) -> list[int]:
        """Ids of the batch files present, ascending (as Spark lists them)."""
        if not os.path.isdir(self.directory):
            return []
        ids = []
        for name in os.listdir(self.directory):
            stem = name[: -len(COMPACT_SUFFIX)] if name.endswith(COMPACT_SUFFIX) else name
            if stem.isascii() and stem.isdigit():
                ids.append(int(stem))
        return sorted(ids)

    def latest_batch_id(self) -> int | None:
        if self._written is not None:
            return self._written[0]
        ids = self.batch_ids()
        return ids[-1] if ids else None

    def read_batch(self, batch_id: int) -> list[SinkFileStatus] | None:
        try:
            with open(self.batch_path(batch_id), encoding="utf-8") as batch:
                lines = batch.read().split("\n")
        except FileNotFoundError:
            return None
        if lines[0] != VERSION_LINE:
            raise ValueError(f"{self.batch_path(batch_id)}: unsupported log version {lines[0]!r}")
        entries = []
        for number, line in enumerate(lines[1:], start=2):
            if not line.strip():
                continue
            try:
                entries.append(SinkFileStatus.from_json(line))
            except (ValueError, KeyError, TypeError) as error:
                reason = f"no {error}" if isinstance(error, KeyError) else str(error)
                raise DamagedLog(
                    f"{self.batch_path(batch_id)}, line {number}: cannot be read ({reason}); the log batch was cut or "
                    f"damaged outside of any commit (Spark's readers fail on it too). Nothing was changed. Put the "
                    f"batch back from a backup, or rebuild the table: 'state reset --tables' for the stream, then "
                    f"sync it again"
                ) from None
        return entries

    def live_files(self) -> list[SinkFileStatus]:
        """The files a Spark reader sees now, computed exactly as Spark does."""
        if self._written is not None and self._written[1] is not None:
            return list(self._written[1])
        latest = self.latest_batch_id()
        if latest is None:
            return []
        first = max(0, (latest + 1) // self.compact_interval * self.compact_interval - 1)
        files: list[SinkFileStatus] = []
        for batch_id in range(first, latest + 1):
            entries = self.read_batch(batch_id)
            if entries is None:  # Spark would fail the same way
                raise FileNotFoundError(f"{self.batch_path(batch_id)} is missing (latest batch: {latest})")
            files.extend(entries)
        return files

    def next_batch_id(self, *, replace: bool) -> int:
        """Id for the next batch; for a replace, the next compaction id."""
        latest = self.latest_batch_id()
        next_id = 0 if latest is None else latest + 1
        if replace:
            interval = self.compact_interval
            next_id = -(-(next_id + 1) // interval) * interval - 1  # round up to a compaction id
        return next_id

    def write_batch(self, batch_id: int, added: list[SinkFileStatus], *, replace: bool) -> None:
        """Publish ``added`` atomically; the batch file's appearance is the commit (``replace``: the only live files after)."""
        head, live_before = self.batch_head(batch_id, replace=replace)
        content = "\n".join([*head, *(entry.to_json() for entry in added)])
        write_atomically(self.batch_path(batch_id), content.encode("utf-8"), overwrite=False)
        self.batch_written(batch_id, live_before, added, replace=replace)

    def batch_head(self, batch_id: int, *, replace: bool) -> tuple[list[str], list[SinkFileStatus] | None]:
        """The lines of batch ``batch_id`` before its files, and the live files before it where known (then ``batch_written``)."""
        expected = self.next_batch_id(replace=replace)
        if batch_id != expected:
            raise ValueError(f"batch {batch_id} is not the next batch ({expected}); was the log changed?")
        live_before = None if replace else (self._written[1] if self._written is not None else None)
        entries: list[SinkFileStatus] = []
        if not replace and self.is_compact_batch(batch_id):
            live_before = entries = self.live_files()
        self._written = None  # a failed write leaves the folder to be read again
        return [VERSION_LINE, *(entry.to_json() for entry in entries)], live_before

    def batch_written(self, batch_id: int, live_before: list[SinkFileStatus] | None, added: list[SinkFileStatus],
                      *, replace: bool) -> None:
        if replace:
            live_after: list[SinkFileStatus] | None = list(added)
        else:  # known once this object has written a compaction batch or a replace
            live_after = None if live_before is None else live_before + list(added)
        self._written = (batch_id, live_after)
