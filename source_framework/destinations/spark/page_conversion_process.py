"""The page converter's own process: pages' bytes in, a table's Parquet files out.

Run by ``page_conversion.PageConverter`` as ``python -P <this file>``; it loads only
``arrow_conversion.py`` and ``helpers/records_path.py``, by their paths, so it starts in a
fraction of the package's import time. It reads frames from stdin, in the order the reading
thread sent them, and answers each write on its own copy of stdout (descriptor 1 itself points
at stderr, so nothing stray can reach the answers):

- ``S`` at each stream's start (one process serves a sync's streams one after another): the
  table's Arrow schema (IPC bytes), the sync id, the records path, the Parquet options; what the
  last stream left is forgotten;
- ``P`` a page: its id, when it was read, its body; parsed here with orjson, as the stream
  parsed it, so its items are equal to the records the stream yielded;
- ``R`` runs: ``[page id, start, end]`` items, in the order the stream's records were written;
- ``D`` a page no further run will name;
- ``E`` a checkpoint's end: a token naming the rows before it;
- ``W`` write: the rows up to a token's end, numbered with a commit's sequence, as one Parquet
  file in a folder, fsynced, its footer's rows checked; answered ``{"rows": n, "file": name,
  "undeclared": {...}, "undeclared_records": n}`` or ``{"error": "..."}``.

Records are converted by ``records_to_arrow`` in batches as their runs arrive, so a write finds
most of its rows converted. It runs in a session of its own and ignores SIGINT (Ctrl-C stops the
sync, whose queued commits still need it), and ends when stdin closes.
"""

from __future__ import annotations

import gc
import importlib.util
import os
import signal
import struct
import sys
import traceback
import uuid
from collections import Counter, deque
from types import ModuleType
from typing import Any, BinaryIO

import orjson
import pyarrow as pa
import pyarrow.parquet as pq

HEADER = struct.Struct("<BII")  # kind, meta length, data length
REPLY = struct.Struct("<I")
BATCH_ROWS = 4096
NICENESS = 10
HERE = os.path.dirname(os.path.abspath(__file__))


def _load(name: str, path: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # dataclasses and annotations look modules up by name
    spec.loader.exec_module(module)
    return module


conversion = _load("_sf_arrow_conversion", os.path.join(HERE, "arrow_conversion.py"))
records_path = _load("_sf_records_path", os.path.join(HERE, "..", "..", "helpers", "records_path.py"))


class Converter:
    """The rows of the runs received, converted in order, written a checkpoint's worth at a time."""

    def __init__(self, schema: pa.Schema, sync_id: str, path: list[str], parquet_options: dict[str, Any]) -> None:
        self.schema, self.sync_id, self.path, self.options = schema, sync_id, tuple(path), parquet_options
        self.pages: dict[int, tuple[list[Any], int]] = {}
        self.records: list[Any] = []
        self.extracted_at: list[int] = []
        self.converted: list[pa.Table] = []
        self.received = 0  # rows received in runs
        self.written = 0  # rows written to files
        self.ends: deque[tuple[int, int]] = deque()  # (token, rows received before it)
        self.undeclared = conversion.UndeclaredFields()
        self.reported: Counter[str] = Counter()
        self.reported_records = 0

    def page(self, page_id: int, extracted_at_ms: int, body: bytes) -> None:
        # The runs before a page are those of the pages before it: converted now, while a write is
        # not waiting for them (at a checkpoint every 100 records, a write would otherwise convert
        # thousands of rows while the commit waits: 8.5 ms a commit against 2-3).
        self.convert()
        self.pages[page_id] = (records_path.records_at(orjson.loads(body), self.path), extracted_at_ms)

    def runs(self, runs: list[list[int]]) -> None:
        for page_id, start, end in runs:
            items, extracted_at_ms = self.pages[page_id]
            self.records.extend(items[start:end])
            self.extracted_at.extend([extracted_at_ms] * (end - start))
            self.received += end - start
        if len(self.records) >= BATCH_ROWS:
            self.convert()

    def convert(self) -> None:
        if self.records:
            self.converted.append(conversion.records_to_arrow(
                self.records, self.schema, extracted_at_ms=self.extracted_at, sync_id=self.sync_id, checkpoint=-1,
                undeclared=self.undeclared,
            ))
            self.records, self.extracted_at = [], []

    def write(self, token: int, seq: int, folder: str) -> dict[str, Any]:
        while self.ends and self.ends[0][0] != token:
            self.ends.popleft()  # a merged commit: its earlier checkpoints' rows go with it
        if not self.ends:
            raise RuntimeError(f"no checkpoint {token} to write")
        _, end = self.ends.popleft()
        rows = end - self.written
        self.convert()
        table = pa.concat_tables(self.converted) if self.converted else self.schema.empty_table()
        part, rest = table.slice(0, rows), table.slice(rows)
        self.converted = [rest] if rest.num_rows else []
        self.written = end
        column = pa.repeat(pa.scalar(seq, pa.int64()), rows)
        part = part.set_column(part.schema.get_field_index(conversion.CHECKPOINT), conversion.CHECKPOINT, column)
        name = f"part-00000-{uuid.uuid4().hex}.parquet"
        footer_rows = write_durably(part, folder, name, self.options)
        if footer_rows != rows:
            raise RuntimeError(f"{os.path.join(folder, name)}: {footer_rows} rows in its footer, {rows} were written")
        counts = Counter(self.undeclared.by_field)
        new, self.reported = counts - self.reported, counts
        new_records, self.reported_records = self.undeclared.records - self.reported_records, self.undeclared.records
        return {"rows": rows, "file": name, "undeclared": dict(new), "undeclared_records": new_records}


def write_durably(table: pa.Table, folder: str, name: str, options: dict[str, Any]) -> int:
    """Write ``table`` as ``folder/name``, on disk before this returns; the rows its footer counts.
    Why here: every file operation the committer's thread makes costs it the interpreter the
    reading thread holds, ~1 ms each at a 1 ms switch interval, and the commit then only renames
    the file (the rows are counted and the bytes made durable once, by whoever wrote them)."""
    os.makedirs(folder, exist_ok=True)
    path = os.path.join(folder, name)
    with open(path, "wb") as handle:
        pq.write_table(table, handle, **options)
        handle.flush()
        os.fsync(handle.fileno())
    return pq.read_metadata(path).num_rows


def serve(source: BinaryIO, replies: BinaryIO) -> None:
    converter: Converter | None = None
    failure: str | None = None  # once anything failed, every write answers with it
    while True:
        head = source.read(HEADER.size)
        if len(head) < HEADER.size:
            return  # the sync closed the pipe (or died)
        kind, meta_size, data_size = HEADER.unpack(head)
        meta: Any = orjson.loads(source.read(meta_size)) if meta_size else None
        data = source.read(data_size) if data_size else b""
        try:
            if kind == ord("W"):
                if failure is not None:
                    raise RuntimeError(failure)
                assert converter is not None
                answer = converter.write(meta["token"], meta["seq"], meta["folder"])
            elif failure is not None:
                continue
            elif kind == ord("S"):
                schema = pa.ipc.read_schema(pa.py_buffer(data))
                converter = Converter(schema, meta["sync_id"], meta["path"], meta["parquet_options"])
                continue
            elif converter is None:
                raise RuntimeError("a frame came before the schema")
            elif kind == ord("P"):
                converter.page(meta[0], meta[1], data)
                continue
            elif kind == ord("R"):
                converter.runs(meta)
                continue
            elif kind == ord("D"):
                converter.pages.pop(meta, None)
                continue
            elif kind == ord("E"):
                converter.ends.append((meta, converter.received))
                continue
            else:
                raise RuntimeError(f"unknown frame {kind!r}")
        except Exception as error:
            if failure is None:
                failure = f"{type(error).__name__}: {error}"
                traceback.print_exc(file=sys.stderr)
            if kind != ord("W"):
                continue
            answer = {"error": failure}
        reply = orjson.dumps(answer)
        replies.write(REPLY.pack(len(reply)) + reply)
        replies.flush()


def main() -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    # Below the reading process and the API it waits on: this process works in their gaps, and a
    # reader woken by a page should not wait for a core (1,000,000 orders at slice checkpoints,
    # from the process's start: 4.8-5.5 s against 5.0-5.5 s at the same priority, 4 runs each).
    os.nice(NICENESS)
    replies = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)
    # As in the sync's own process (runtime/process.py): pages are thousands of fresh dicts.
    gc.collect()
    gc.freeze()
    gc.set_threshold(50_000, 20, 100)
    # Arrow's thread pools would take the core the reading process needs (measured: the sync's
    # reading thread lost 10-20% with them at 2 threads on 2 cores).
    pa.set_cpu_count(1)
    pa.set_io_thread_count(1)
    serve(sys.stdin.buffer, replies)


if __name__ == "__main__":
    main()
