"""The page converter's own process: pages' bytes in, a table's Parquet files out (run as ``python -P <this file>``).

Frames on stdin: ``S`` a stream's start, ``P`` a page, ``R`` runs of items written, ``D`` a page dropped, ``E`` a
checkpoint's end, ``W`` write a checkpoint's rows, ``C`` carry out a commit; ``W`` and ``C`` are answered on a copy of
stdout (descriptor 1 points at stderr). It ignores SIGINT, as queued commits still need it, and ends when stdin closes."""

from __future__ import annotations

import gc
import importlib.util
import os
import signal
import struct
import sys
import time
import traceback
import uuid
from collections import deque
from types import ModuleType
from typing import Any, BinaryIO


class _RefusePandasNumpy:
    """An import finder that refuses pandas and NumPy here: Arrow works without them, and importing them delayed the first commit."""

    REFUSED = ("numpy", "pandas")

    @classmethod
    def find_spec(cls, name: str, path: Any = None, target: Any = None) -> None:
        if name.partition(".")[0] in cls.REFUSED:
            raise ModuleNotFoundError(f"{name} is not imported by the page converter", name=name)
        return None


if __name__ == "__main__":  # (the tests import this module: their process keeps what it has)
    sys.meta_path.insert(0, _RefusePandasNumpy)

import orjson  # noqa: E402  (after the finder: Arrow looks for NumPy when it is imported)
import pyarrow as pa  # noqa: E402
import pyarrow.parquet as pq  # noqa: E402

HEADER = struct.Struct("<BII")  # kind, meta length, data length
REPLY = struct.Struct("<I")
ANSWERED = (ord("W"), ord("C"))  # frames answered on the replies' pipe
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


# arrow_conversion.py imports arrow_columns by the package's name: that name is given the file first, so no package is imported.
COLUMNS = "source_framework.destinations.spark.arrow_columns"
if COLUMNS not in sys.modules:
    _load(COLUMNS, os.path.join(HERE, "arrow_columns.py"))
conversion = _load("_sf_arrow_conversion", os.path.join(HERE, "arrow_conversion.py"))
records_path = _load("_sf_records_path", os.path.join(HERE, "..", "..", "helpers", "records_path.py"))
ATOMIC_FILES = "source_framework.destinations.spark.atomic_files"
if ATOMIC_FILES not in sys.modules:
    _load(ATOMIC_FILES, os.path.join(HERE, "atomic_files.py"))
parquet_commit = _load("_sf_parquet_commit", os.path.join(HERE, "parquet_commit.py"))


class Converter:
    """The rows of the runs received, converted in order, written a checkpoint's worth at a time."""

    def __init__(self, schema: pa.Schema, sync_id: str, path: list[str], parquet_options: dict[str, Any],
                 on_type_mismatch: str = "null") -> None:
        self.schema, self.sync_id, self.path, self.on_type_mismatch = schema, sync_id, tuple(path), on_type_mismatch
        self.options = conversion.parquet_options(parquet_options, schema)
        self.pages: dict[int, tuple[list[Any], int]] = {}
        self.records: list[Any] = []
        self.extracted_at: list[int] = []
        self.converted: list[pa.Table] = []
        self.received = 0  # rows received in runs
        self.written = 0  # rows written to files
        self.ends: deque[tuple[int, int]] = deque()  # (token, rows received before it)
        self.counts = conversion.ConversionCounts()  # since the last answer

    def page(self, page_id: int, extracted_at_ms: int, body: bytes) -> None:
        # The runs before a page are converted now, while no write waits for them.
        self.convert()
        self.pages[page_id] = (records_path.records_at(orjson.loads(body), self.path), extracted_at_ms)

    def end(self, token: int, runs: list[list[int]], at: int | None) -> None:
        """A checkpoint's end: ``token`` names the stream's first ``at`` rows (None: all received so far)."""
        self.runs(runs)
        at = self.received if at is None else at
        if not (self.ends[-1][1] if self.ends else self.written) <= at <= self.received:
            raise RuntimeError(f"checkpoint {token} ends after row {at}, outside the rows not ended yet "
                               f"(up to {self.received} received)")
        self.ends.append((token, at))

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
                counts=self.counts, on_type_mismatch=self.on_type_mismatch,
            ))
            self.records, self.extracted_at = [], []

    def write(self, token: int, seq: int, folder: str) -> dict[str, Any]:
        part = self._rows_to(token, seq)
        name = f"part-00000-{uuid.uuid4().hex}.parquet"
        self._write(part, os.path.join(folder, name))
        return {"rows": part.num_rows, "file": name, "counts": self._counts_since()}

    def publish(self, ask: dict[str, Any]) -> dict[str, Any]:
        """A commit carried out here with the rows up to ``ask["token"]`` as the plan's own file; answers the log's new lines."""
        part = self._rows_to(ask["token"], ask["seq"])
        if part.num_rows != ask["rows"]:  # before anything is written: the commit fails whole
            raise RuntimeError(f"{part.num_rows} rows up to checkpoint {ask['token']}, the commit expects {ask['rows']}")
        plan = parquet_commit.CommitPlan.from_json(ask["plan"])
        with parquet_commit.committing_in(plan.table):
            _exit_if_orphaned()
            added = parquet_commit.carry_out(plan, lambda path: self._write(part, path),
                                             lambda point: _stop_if_asked(ask.get("stop"), point))
        return {"rows": part.num_rows, "added": added, "counts": self._counts_since()}

    def _rows_to(self, token: int, seq: int) -> pa.Table:
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
        return part.set_column(part.schema.get_field_index(conversion.CHECKPOINT), conversion.CHECKPOINT, column)

    def _write(self, part: pa.Table, path: str) -> None:
        footer_rows = write_durably(part, os.path.dirname(path), os.path.basename(path), self.options)
        if footer_rows != part.num_rows:
            raise RuntimeError(f"{path}: {footer_rows} rows in its footer, {part.num_rows} were written")

    def _counts_since(self) -> dict[str, Any]:
        counts, self.counts = self.counts, conversion.ConversionCounts()
        return counts.as_dict()


class Stopped(Exception):
    """A simulated crash the sync asked for (``helpers.faults.crash_at``): nothing more is done."""


#: The sync's process: a commit is not carried on once it is gone (see ``_exit_if_orphaned``).
PARENT = os.getppid()


def _exit_if_orphaned() -> None:
    """Exit if the sync's process is gone: a commit it no longer waits for is not carried on (a step begun ends first)."""
    if os.getppid() != PARENT:
        os._exit(0)


def _stop_if_asked(stop: dict[str, Any] | None, point: str) -> None:
    """The fault point ``point``, counted by the sync's process, which says what to do: pause (until killed) or crash."""
    _exit_if_orphaned()
    if stop is None or stop["at"] != point:
        return
    if stop["how"] == "crash":
        raise Stopped(point)
    sys.stderr.write(f"paused at {stop['label']}\n")
    sys.stderr.flush()
    while os.read(0, 1 << 16):  # until the sync's process is killed (its pipe closes)
        pass
    if stop["how"] != "linger":
        os._exit(0)
    time.sleep(float(stop["seconds"]))  # then on with the step, as one begun before the kill


def write_durably(table: pa.Table, folder: str, name: str, options: dict[str, Any]) -> int:
    """Write ``table`` durably as ``folder/name``; returns its footer's rows (here, off the committer's interpreter)."""
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
            if kind in ANSWERED:
                if failure is not None:
                    raise RuntimeError(failure)
                assert converter is not None
                if kind == ord("W"):
                    answer = converter.write(meta["token"], meta["seq"], meta["folder"])
                else:
                    answer = converter.publish(meta)
            elif failure is not None:
                continue
            elif kind == ord("S"):
                schema = pa.ipc.read_schema(pa.py_buffer(data))
                converter = Converter(schema, meta["sync_id"], meta["path"], meta["parquet_options"],
                                      meta.get("on_type_mismatch", "null"))
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
                converter.end(*meta)
                continue
            else:
                raise RuntimeError(f"unknown frame {kind!r}")
        except Stopped as stopped:
            failure = f"stopped at {stopped} (a simulated crash)"
            answer = {"stopped": str(stopped)}
        except Exception as error:
            if failure is None:
                failure = f"{type(error).__name__}: {error}"
                traceback.print_exc(file=sys.stderr)
            if kind not in ANSWERED:
                continue
            answer = {"error": failure}
        reply = orjson.dumps(answer)
        replies.write(REPLY.pack(len(reply)) + reply)
        replies.flush()


def main() -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    # Below the reading process and the API it waits on: a reader woken by a page should not wait for a core.
    os.nice(NICENESS)
    replies = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)
    # As in the sync's own process (runtime/process.py): pages are thousands of fresh dicts.
    gc.collect()
    gc.freeze()
    gc.set_threshold(50_000, 20, 100)
    # Arrow's thread pools would take the core the reading process needs.
    pa.set_cpu_count(1)
    pa.set_io_thread_count(1)
    conversion.warm_up()  # what Arrow's first conversion and Parquet write load, before the first page
    serve(sys.stdin.buffer, replies)


if __name__ == "__main__":
    main()
