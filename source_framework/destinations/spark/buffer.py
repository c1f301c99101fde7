"""One stream's records on their way to its table: the reading thread's side of the Spark sink.

Records become Arrow batches of ``BATCH_ROWS`` as they arrive (typed once per batch from the
stream's JSON schema by the writer's ``to_arrow``, see ``arrow_conversion``), so what waits for
the committer is columnar, several times smaller than the parsed dicts. At a checkpoint the
records since the last full batch become one more batch (``CONVERT_AT_COMMIT_ROWS`` says when
the writer converts them instead), and the batches and the state become one ``CommitJob`` for
the background committer; ``commit`` returns the job's future: the runtime prints the STATE when
it completes. Reading goes on meanwhile::

    buffer = StreamBuffer(writer, committer, stage_rows=100_000)
    buffer.write({"id": 1, "updatedAt": "2025-01-01T00:00:00Z"})
    buffer.commit({"updatedAt": "2025-01-01T00:00:00Z"}, notes).result()   # CommitReceipt

Checkpoints that come in quick succession (``state_checkpoint_interval`` 100 on a fast API) come
as one: the runtime holds them back, up to ``HOLD_CHECKPOINTS`` (``runtime.checkpoint_hold``), and
asks for one commit with the earlier ones' states.

A checkpoint far away (a large slice, an ``overwrite`` stream that commits once at its end)
does not grow memory: every ``stage_rows`` rows the batches go to Spark as a stage job, written
to hidden staged files that the next commit publishes with the rest.

Fields a record carries that the table's schema does not declare get no column: the conversion
names them in the row's ``_sf_meta`` and counts them (``undeclared_fields``, for the end-of-run
summary), and each new one is logged once.

Records of a stream whose records are its pages' items unchanged (``pages``: a ``records_path``
stream) are not converted here at all: ``write`` checks that each is the next item of its page,
and the page converter (``page_conversion``) makes their rows from the pages' bytes in a process
of its own. A checkpoint then also ends the rows sent to it (a token the job carries), and the
committer asks that process for them as a staged file. Why: reading and converting share this
process's one interpreter, which bounds a sync however many threads it runs (1,000,000 demo
orders on 2 cores: the reading thread spent ~3.0 s reading and ~2.5 s converting).

Measured before the page converter, for records still converted here (other streams): a helper
process sent each batch's records (``marshal``) was no faster (packing cost the reader most of
what converting did), nor was Arrow's JSON reader on the committer's thread (writing the records
as JSON cost as much), nor smaller batches (256, 1,024), nor the garbage collector off. A batch of
4,096 distinct demo orders converts at 1.1-1.3 µs a record just parsed, 2.3-3.5 µs inside a
sync: the cost is memory traffic, not Arrow's work.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator, Mapping, Sequence
from concurrent.futures import Future
from typing import Any

import pyarrow as pa

from source_framework.destinations.base import OVERWRITE, CommitReceipt, StreamSink, done
from source_framework.destinations.checkpoint_record import CheckpointRecord, ResumeNotes
from source_framework.destinations.spark.committer import BackgroundCommitter, CommitJob
from source_framework.destinations.spark.page_conversion import ConverterPool, PageConverter
from source_framework.destinations.spark.table import ARROW_PARQUET_OPTIONS
from source_framework.destinations.spark.table_writer import TableWriter
from source_framework.helpers.raw_pages import RawPages

logger = logging.getLogger("source_framework.spark")

#: Records per Arrow batch: large enough that conversion runs at columnar speed, small enough
#: that few parsed dicts are alive at once.
BATCH_ROWS = 4096

#: At a checkpoint, records not yet in a batch are converted here, in the reading thread, when
#: there are at least this many; fewer go to the committer as they are, which converts those of
#: all the checkpoints it merges at once. Why here: converting in the committer costs the
#: interpreter both threads share more than here (the records are no longer in the CPU's caches,
#: and the two threads trade the interpreter back and forth): 1,000,000 demo orders at
#: ``state_checkpoint_interval`` 100 took 11.6-12.9 s against 13.2-14.6 s (4 interleaved runs).
#: Why not always: a conversion costs ~50 µs whatever its size, so a checkpoint every few records
#: (interval 1) would pay it per record, where the committer pays it once per merged commit.
CONVERT_AT_COMMIT_ROWS = 64

#: Checkpoints the runtime may hold back and have committed as one (``max_checkpoints_per_commit``,
#: see ``runtime.checkpoint_hold``): one conversion and one commit for all, each STATE still printed
#: after the commit that covers it. Why: at ``state_checkpoint_interval`` 100 a checkpoint of 100
#: records is converted while the conversion's code and data are no longer in the CPU's caches (3.8
#: µs a record in the sync, against 1.6 in a loop), and each commit costs the committer's thread the
#: interpreter the reader needs. Why no more: a held checkpoint counts against
#: ``runtime.read.MAX_IN_FLIGHT`` (128) like any other, and reading runs at most that many
#: checkpoints ahead of its last STATE (a crash costs no more records than before); half of that
#: lets one job commit while the next is read (holding 30 of 32 made them take turns). That pays
#: since the page converter carries out a commit's file work (``SparkTable.commit(pages=...)``):
#: 1,000,000 demo orders at interval 100, 5 interleaved runs each, 32 in flight, holding 16:
#: 6.3-7.6 s (median 7.3), reading waiting 0.7-1.1 s for commits; 30: 8.0-9.4 s (9.1), waiting
#: 1.8-2.7 s. Since 128 in flight, 64 (see ``runtime.read.MAX_IN_FLIGHT``). Before, the committer's
#: thread did that work, and holding 16 was slower than 30 (10.8 s against 9.8 s, medians of 10):
#: the commits' file operations each waited for the interpreter the reading thread held.
HOLD_CHECKPOINTS = 64

#: What the page path holds of a page once its last item was written: nothing. Why not the page
#: until the next page's first record: that comes after the next page was parsed, and the parse
#: then ran beside a thousand records still alive instead of in the memory they had just freed,
#: which slowed it (orjson's allocations) and the whole reading thread. 1,000,000 demo orders at
#: slice checkpoints, 16 interleaved pairs (either first): the reading thread's CPU was lower in
#: each, 3.6-4.7 s against 4.1-6.3 s (the stream: 3.5-4.6 s against 3.9-6.3 s). The read loop alone,
#: into a destination that keeps the last 1,000 records: 3.3-5.0 s against 3.1-4.0 s keeping none.
PAGE_DONE: tuple[Any, ...] = ()

#: Rows a buffer holds before it has them written to staged files ahead of their checkpoint.
STAGE_ROWS = 100_000

#: What a record not yet converted counts for against the committer's ``max_pending_bytes``
#: (a parsed dict of a dozen fields; generous, so the bound holds).
RAW_RECORD_BYTES = 2048

#: What a row the page converter holds counts for against ``max_pending_bytes`` (its memory is
#: the other process's; this keeps the committer's queue, and that process, bounded alike).
PAGE_ROW_BYTES = 256


class StreamBuffer(StreamSink):
    """The ``StreamSink`` of one stream in a Spark table (reading thread only)."""

    def __init__(self, writer: TableWriter, committer: BackgroundCommitter, stage_rows: int = STAGE_ROWS,
                 pages: RawPages | None = None, converters: ConverterPool | None = None) -> None:
        """``pages``: the stream's pages, where its records are their items unchanged
        (``RecordsAtPath``): records found in them are converted from the pages' bytes by a
        ``PageConverter`` from ``converters`` (the sync's pool); any other record is converted here."""
        if pages is not None and converters is None:
            raise ValueError("a stream's pages need the sync's page converters")
        self._writer = writer
        self._committer = committer
        self.location = writer.table.path
        self._records: list[Mapping[str, Any]] = []
        self._extracted_at: list[int] = []
        self._batches: list[pa.Table] = []
        self._batched_rows = 0
        self._stage_rows = max(1, stage_rows)
        self._batch_rows = min(BATCH_ROWS, self._stage_rows)
        self._staged_since_commit = 0  # rows handed over in stage jobs since the last commit
        self._last_commit: Future[Any] | None = None
        # Whether this run's first commit replaces the table: known before the first job and
        # kept here, so the reading thread never asks the writer, which the committer's thread owns.
        self._replaces_table = writer.rebuilding
        # The page path (``page_conversion``): the page the records come from, the item expected
        # next and where the current run of written items began; runs not yet sent; rows in the
        # runs closed so far and where the last end was (counted from the stream's first page row),
        # and the rows of ends (tokens) no job has taken yet.
        self._raw = pages
        # Taken now, so that its process has imported what it needs by the first page; told the
        # table's schema at the first page only, as a reset may yet change it.
        self._converters = converters
        self._converter: PageConverter | None = converters.take() if pages is not None and converters else None
        self._page_items: Sequence[Any] | None = None
        self._page_len = 0
        self._page_id = 0
        self._next_item = 0
        self._run_start = 0
        self._runs: list[tuple[int, int, int]] = []
        self._run_rows = 0
        self._ended_at = 0
        self._page_token: int | None = None
        self._token_rows = 0
        self._missed_at = -1  # ``pages.added`` when a record was last not found in them
        self._last_job: Future[Any] | None = None
        if pages is not None:
            pages.enabled = True

    # -- before reading: where the stream resumes ----------------------------------------------

    def committed(self) -> Iterator[CheckpointRecord]:
        if self._replaces_table:
            return iter(())  # a rebuild starts over: nothing in the table counts
        return self._writer.table.committed_checkpoints()

    def pending_reset(self) -> str | None:
        return self._writer.table.pending_reset()

    def apply_reset(self, reset_id: str) -> None:
        self._writer.rebuild_from_reset(reset_id)  # before the first job: the writer is still ours
        self._replaces_table = True

    def discard_reset(self, reset_id: str) -> None:
        self._writer.check_schema()  # the table stays: it must take the stream's schema
        self._writer.table.clear_reset()

    # -- reading ---------------------------------------------------------------------------------

    def write(self, record: Mapping[str, Any]) -> None:
        items = self._page_items
        if items is not None:  # the page path: the next item of the page, nothing else to do
            index = self._next_item
            if index < self._page_len and items[index] is record:
                self._next_item = index + 1
                if index + 1 == self._page_len:
                    self._page_items = PAGE_DONE
                return
            if self._skip_to(record):
                return
        if self._raw is not None and self._raw.added != self._missed_at and self._claim(record):
            return
        self._records.append(record)
        self._extracted_at.append(int(time.time() * 1000))
        if len(self._records) >= self._batch_rows:
            self._to_arrow()
            if self._batched_rows >= self._stage_rows:
                self._submit_stage()

    max_checkpoints_per_commit = HOLD_CHECKPOINTS

    def commit(self, state: Mapping[str, Any] | None, notes: ResumeNotes | None = None,
               earlier_states: Sequence[Mapping[str, Any] | None] = ()) -> Future[CommitReceipt]:
        self._end_pages()
        return self._submit(state, notes, earlier_states=list(earlier_states))

    def finish(self, state: Mapping[str, Any] | None, notes: ResumeNotes | None = None) -> Future[CommitReceipt]:
        self._end_pages()
        if self._writer.target.destination_sync_mode == OVERWRITE or self._replaces_table or self._holds_rows():
            future = self._submit(state, notes)
        else:  # nothing left to write: the last commit's receipt already counts every row
            future = self._last_commit if self._last_commit is not None else done(CommitReceipt(0, 0))
        self._stop_pages()
        return future

    def abort(self) -> None:
        self._records, self._extracted_at = [], []
        self._batches, self._batched_rows = [], 0
        self._page_token, self._token_rows, self._runs = None, 0, []
        self._ended_at = self._run_rows
        self._stop_pages()

    def holds(self, records: list[Mapping[str, Any]]) -> list[bool]:
        return self._writer.holds(records)

    def may_commit_uncovered_rows(self) -> bool:
        return self._writer.looks_up_rows

    def undeclared_fields(self) -> dict[str, int]:
        return dict(self._writer.undeclared.by_field)

    def records_with_undeclared_fields(self) -> int:
        return self._writer.undeclared.records

    def _holds_rows(self) -> bool:
        return bool(self._records or self._batches or self._staged_since_commit or self._page_token is not None)

    # -- the page path ---------------------------------------------------------------------------

    def _claim(self, record: Mapping[str, Any]) -> bool:
        """Whether ``record`` is an item of one of the stream's pages: that page becomes the one
        records are expected from (sent to the converter first), from that item on."""
        assert self._raw is not None
        added = self._raw.added
        found = self._raw.claim(record)
        if found is None:
            self._missed_at = added  # converted here; looked for again once a page is added
            return False
        page, index = found
        converter = self._converter
        assert converter is not None  # (there since the buffer was made, until the stream ends)
        if not converter.begun:
            converter.begin(self._writer.schema, self._writer.sync_id, self._raw.path, ARROW_PARQUET_OPTIONS)
        self._close_run()
        if self._page_items is not None:
            converter.runs(self._runs)
            self._runs = []
            converter.drop(self._page_id)
        self._page_id = converter.page(page)
        self._page_items, self._page_len = page.items, len(page.items)
        self._run_begins(index)
        if self._run_rows - self._ended_at + self._token_rows + self._batched_rows >= self._stage_rows:
            self._submit_stage()
        return True

    def _skip_to(self, record: Mapping[str, Any]) -> bool:
        """Whether ``record`` is a later item of the current page (the ones before it were not
        written: the table held them): a new run begins there."""
        assert self._page_items is not None
        for index in range(self._next_item, self._page_len):
            if self._page_items[index] is record:
                self._close_run()
                self._run_begins(index)
                return True
        return False

    def _run_begins(self, index: int) -> None:
        """A run begins with the page's item ``index``, just written (the page is let go if it was
        its last: see ``PAGE_DONE``)."""
        self._run_start, self._next_item = index, index + 1
        if index + 1 == self._page_len:
            self._page_items = PAGE_DONE

    def _close_run(self) -> None:
        """The items written since the run began become one run (sent with the next frame)."""
        if self._next_item > self._run_start:
            self._runs.append((self._page_id, self._run_start, self._next_item))
            self._run_rows += self._next_item - self._run_start
            self._run_start = self._next_item

    def _end_pages(self) -> None:
        """A checkpoint: the rows written on the page path end here: a token the next job takes."""
        if self._converter is None or not self._converter.begun:
            return
        self._close_run()
        if self._run_rows > self._ended_at:  # (runs not sent yet count there too)
            self._page_token = self._converter.end(self._runs)
            self._runs = []
            self._token_rows += self._run_rows - self._ended_at
            self._ended_at = self._run_rows

    def _stop_pages(self) -> None:
        """The stream ends: its pages are no longer kept, and the converter goes back to the pool
        once the last job that may need it is done."""
        if self._raw is not None:
            self._raw.enabled = False
        self._page_items = None
        converter, self._converter, pool = self._converter, None, self._converters
        if converter is not None and pool is not None:
            if self._last_job is None or self._last_job.done():
                pool.give_back(converter)
            else:
                self._last_job.add_done_callback(lambda _: pool.give_back(converter))

    def _to_arrow(self) -> None:
        """The records so far become one Arrow batch; its checkpoint number is set at commit."""
        if not self._records:
            return
        batch = self._writer.to_arrow(self._records, self._extracted_at)
        self._batches.append(batch)
        self._batched_rows += batch.num_rows
        self._records, self._extracted_at = [], []

    def _submit(self, state: Mapping[str, Any] | None, notes: ResumeNotes | None,
                earlier_states: list[Mapping[str, Any] | None] | None = None) -> Future[CommitReceipt]:
        if len(self._records) >= CONVERT_AT_COMMIT_ROWS:
            self._to_arrow()
        self._staged_since_commit = 0
        job = self._job(state, notes, stage_only=False)
        job.earlier_states = earlier_states or []
        self._last_commit = self._last_job = self._committer.submit(job)
        self._replaces_table = False  # that commit replaces it; the next ones add to it
        return self._last_commit

    def _submit_stage(self) -> None:
        """Hand the rows held so far to the writer ahead of their checkpoint (a failure surfaces at
        the next commit: the writer refuses every job after a failed one). Called right after a
        full batch was made, or at a new page: the job holds batches and pages' rows."""
        self._end_pages()
        self._staged_since_commit += self._batched_rows + self._token_rows
        self._last_job = self._committer.submit(self._job(None, None, stage_only=True))

    def _job(self, state: Mapping[str, Any] | None, notes: ResumeNotes | None, stage_only: bool) -> CommitJob:
        """The batches and records held so far, as one job; the buffer starts holding anew."""
        batches, records, extracted = self._batches, self._records, self._extracted_at
        self._batches, self._batched_rows, self._records, self._extracted_at = [], 0, [], []
        # (``nbytes`` walks every buffer's slice: ~20 µs a batch, paid once a checkpoint)
        nbytes = sum(b.get_total_buffer_size() for b in batches) + RAW_RECORD_BYTES * len(records)
        rows = sum(b.num_rows for b in batches) + len(records)
        token, token_rows = self._page_token, self._token_rows
        self._page_token, self._token_rows = None, 0
        return CommitJob(self._writer, batches, rows + token_rows, nbytes + PAGE_ROW_BYTES * token_rows, state, notes,
                         stage_only=stage_only, records=records, extracted_at_ms=extracted,
                         pages=self._converter if token is not None else None, page_token=token, page_rows=token_rows)

