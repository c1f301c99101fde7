"""One stream's records on their way to its table: the reading thread's side of the Spark sink.

Records become Arrow batches as they arrive; at a checkpoint they and the state become one ``CommitJob``, whose future the
runtime waits for before printing the STATE. Fast checkpoints are grouped into one job, far ones staged every ``stage_rows``
rows; records that are their pages' items are converted from the pages' bytes in another process (``page_conversion``)."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import Future
from typing import Any

import pyarrow as pa

from source_framework.destinations.base import OVERWRITE, CommitReceipt, StreamSink, ValuesNotKept, done
from source_framework.destinations.checkpoint_record import Notes, ResumeNotes, built
from source_framework.destinations.spark.commit_parts import ARROW_PARQUET_OPTIONS
from source_framework.destinations.spark.committer import BackgroundCommitter, CommitJob
from source_framework.destinations.spark.earlier_commits import CommitsInTable
from source_framework.destinations.spark.page_conversion import ConverterPool, PageConverter
from source_framework.destinations.spark.table_writer import TableWriter
from source_framework.helpers.raw_pages import RawPages
from source_framework.helpers.tuning import TUNING

logger = logging.getLogger("source_framework.spark")

#: Records per Arrow batch: converted at columnar speed, with few parsed dicts alive at once.
BATCH_ROWS = 4096

#: Records not yet in a batch converted here at a checkpoint, while still in the CPU's caches; fewer go to the committer.
CONVERT_AT_COMMIT_ROWS = 64

#: What the page path holds of a page once its last item was written: nothing, so the next parse does not run beside it.
NO_PAGE_ITEMS: tuple[Any, ...] = ()

STAGE_ROWS = 100_000

#: What a record not yet converted counts for against ``max_pending_bytes`` (generous, so the bound holds).
RAW_RECORD_BYTES = 2048

#: What a row the page converter holds counts for against ``max_pending_bytes``, keeping that process bounded alike.
PAGE_ROW_BYTES = 256


class StreamBuffer(StreamSink):
    """The ``StreamSink`` of one stream in a Spark table (reading thread only); ``earlier_commits`` are the table's."""

    def __init__(self, writer: TableWriter, committer: BackgroundCommitter, stage_rows: int = STAGE_ROWS,
                 pages: RawPages | None = None, converters: ConverterPool | None = None,
                 group_size: int = TUNING.group_checkpoints) -> None:
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
        # Checkpoints grouped: their states, one future, the records and page rows they cover, the last notes, the first's time.
        self._grouped: list[Mapping[str, Any] | None] = []
        self._group_future: _GroupedCheckpoint | None = None
        self._group_records = 0
        self._group_page_rows = 0
        self._group_notes: Notes | None = None
        self._group_since_ms = 0
        self._last_checkpoint_ms = 0
        self._group_size = max(1, group_size)
        # ``replaces_table`` also tells ``finish`` whether this run's first commit, still to come, replaces the table.
        self.earlier_commits: CommitsInTable = CommitsInTable(writer)
        # The page path: the current page, the item expected next, the runs not yet sent, and the ended rows no job took.
        self._raw = pages
        # Taken now, so its process has imported what it needs by the first page (told the schema then: a reset may change it).
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

    def write(self, record: Mapping[str, Any]) -> None:
        items = self._page_items
        if items is not None:  # the page path: the next item of the page, nothing else to do
            index = self._next_item
            if index < self._page_len and items[index] is record:
                self._next_item = index + 1
                if index + 1 == self._page_len:
                    self._page_items = NO_PAGE_ITEMS
                return
            if self._skip_to(record):
                return
        if self._raw is not None and self._raw.added != self._missed_at and self._claim(record):
            return
        now_ms = int(time.time() * 1000)
        if self._grouped and (not 0 <= now_ms - self._group_since_ms < TUNING.group_ms or len(self._records) >= self._batch_rows):
            self._hand_over()  # before a batch forms: grouped checkpoints end inside ``_records``
        self._records.append(record)
        self._extracted_at.append(now_ms)
        if len(self._records) >= self._batch_rows and not self._grouped:
            self._to_arrow()
            if self._batched_rows >= self._stage_rows:
                self._submit_stage()

    def commit(self, state: Mapping[str, Any] | None, notes: Notes | None = None) -> Future[CommitReceipt]:
        now_ms = int(time.time() * 1000)
        # (a clock set back counts as a pause: grouped checkpoints never wait on the clock's say-so)
        fast, self._last_checkpoint_ms = 0 <= now_ms - self._last_checkpoint_ms <= TUNING.fast_ms, now_ms
        if not self._grouped:
            if not fast:
                self._end_pages()
                return self._submit(state, notes)
            self._group_since_ms = now_ms
            self._group_future = _GroupedCheckpoint(self._hand_over)
        future = self._group_future
        assert future is not None
        self._grouped.append(state)
        # Only the last grouped checkpoint's end is sent: the one commit passes over the others'.
        self._group_records, self._group_page_rows, self._group_notes = len(self._records), self._page_rows(), notes
        if not fast or len(self._grouped) >= self._group_size or not 0 <= now_ms - self._group_since_ms < TUNING.group_ms:
            self._hand_over()
        return future

    def finish(self, state: Mapping[str, Any] | None, notes: Notes | None = None) -> Future[CommitReceipt]:
        self._hand_over()
        self._end_pages()
        if self._writer.target.destination_sync_mode == OVERWRITE or self.earlier_commits.replaces_table or self._has_uncommitted_rows():
            future = self._submit(state, notes)
        else:  # nothing left to write: the last commit's receipt already counts every row
            future = self._last_commit if self._last_commit is not None else done(CommitReceipt(0, 0))
        self._stop_pages()
        return future

    def abort(self) -> None:
        self._hand_over()  # checkpoints asked before the failure are committed, as if never grouped
        self._records, self._extracted_at = [], []
        self._batches, self._batched_rows = [], 0
        self._page_token, self._token_rows, self._runs = None, 0, []
        self._ended_at = self._run_rows
        self._stop_pages()

    def values_not_kept(self) -> ValuesNotKept:
        counts = self._writer.counts
        mismatched = {name: (count, counts.mismatch_reasons.get(name, "")) for name, count in counts.mismatched.items()}
        return ValuesNotKept(dict(counts.undeclared), counts.records_with_undeclared, mismatched)

    def _has_uncommitted_rows(self) -> bool:
        return bool(self._records or self._batches or self._staged_since_commit or self._page_token is not None)

    def _claim(self, record: Mapping[str, Any]) -> bool:
        """Whether ``record`` is an item of one of the stream's pages, which becomes the current page from that item on."""
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
            converter.begin(self._writer.schema, self._writer.sync_id, self._raw.path, ARROW_PARQUET_OPTIONS,
                            self._writer.on_type_mismatch)
        self._close_run()
        if self._page_items is not None:
            converter.runs(self._runs)
            self._runs = []
            converter.drop(self._page_id)
        self._page_id = converter.page(page)
        self._page_items, self._page_len = page.items, len(page.items)
        self._run_begins(index)
        if self._grouped and not 0 <= int(time.time() * 1000) - self._group_since_ms < TUNING.group_ms:
            self._hand_over()  # (checked at each page here, as at each record on the other path)
        elif not self._grouped and self._run_rows - self._ended_at + self._token_rows + self._batched_rows >= self._stage_rows:
            self._submit_stage()
        return True

    def _skip_to(self, record: Mapping[str, Any]) -> bool:
        """Whether ``record`` is a later item of the current page (the table held the ones before): a new run begins there."""
        assert self._page_items is not None
        for index in range(self._next_item, self._page_len):
            if self._page_items[index] is record:
                self._close_run()
                self._run_begins(index)
                return True
        return False

    def _run_begins(self, index: int) -> None:
        self._run_start, self._next_item = index, index + 1
        if index + 1 == self._page_len:
            self._page_items = NO_PAGE_ITEMS

    def _close_run(self) -> None:
        if self._next_item > self._run_start:
            self._runs.append((self._page_id, self._run_start, self._next_item))
            self._run_rows += self._next_item - self._run_start
            self._run_start = self._next_item

    def _page_rows(self) -> int:
        return self._run_rows + self._next_item - self._run_start

    def _end_pages(self, at: int | None = None) -> None:
        """A checkpoint: the page rows end here, or after the first ``at`` of them: a token the next job takes."""
        if self._converter is None or not self._converter.begun:
            return
        self._close_run()
        at = self._run_rows if at is None else at
        assert at >= self._ended_at, "an end before the last one: rows after a grouped checkpoint were ended"
        if at > self._ended_at:  # (runs not sent yet count there too)
            self._page_token = self._converter.end(self._runs, at)
            self._runs = []
            self._token_rows += at - self._ended_at
            self._ended_at = at

    def _stop_pages(self) -> None:
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
        if not self._records:
            return
        batch = self._writer.to_arrow(self._records, self._extracted_at)
        self._batches.append(batch)
        self._batched_rows += batch.num_rows
        self._records, self._extracted_at = [], []

    def _hand_over(self) -> None:
        """The grouped checkpoints become one job up to the last of them; records read since stay for the next checkpoint."""
        if not self._grouped:
            return
        self._end_pages(at=self._group_page_rows)
        grouped, self._grouped = self._grouped, []
        future, self._group_future = self._group_future, None
        later_records, later_extracted = self._records[self._group_records:], self._extracted_at[self._group_records:]
        del self._records[self._group_records:], self._extracted_at[self._group_records:]
        committed = self._submit(grouped[-1], self._group_notes, earlier_states=grouped[:-1])
        self._records, self._extracted_at = later_records, later_extracted
        assert future is not None
        future.follow(committed)

    def _submit(self, state: Mapping[str, Any] | None, notes: Notes | None,
                earlier_states: list[Mapping[str, Any] | None] | None = None) -> Future[CommitReceipt]:
        if len(self._records) >= CONVERT_AT_COMMIT_ROWS:
            self._to_arrow()
        self._staged_since_commit = 0
        job = self._job(state, built(notes), stage_only=False)  # (the grouped ones' notes are never built)
        job.earlier_states = earlier_states or []
        self._last_commit = self._last_job = self._committer.submit(job)
        self.earlier_commits.replaces_table = False  # that commit replaces it; the next ones add to it
        return self._last_commit

    def _submit_stage(self) -> None:
        """Hand the rows held so far to the writer ahead of their checkpoint (a failure surfaces at the next commit)."""
        self._end_pages()
        self._staged_since_commit += self._batched_rows + self._token_rows
        self._last_job = self._committer.submit(self._job(None, None, stage_only=True))

    def _job(self, state: Mapping[str, Any] | None, notes: ResumeNotes | None, stage_only: bool) -> CommitJob:
        batches, records, extracted = self._batches, self._records, self._extracted_at
        self._batches, self._batched_rows, self._records, self._extracted_at = [], 0, [], []
        # (``nbytes`` walks every buffer's slice: paid once a checkpoint)
        nbytes = sum(b.get_total_buffer_size() for b in batches) + RAW_RECORD_BYTES * len(records)
        rows = sum(b.num_rows for b in batches) + len(records)
        token, token_rows = self._page_token, self._token_rows
        self._page_token, self._token_rows = None, 0
        return CommitJob(self._writer, batches, rows + token_rows, nbytes + PAGE_ROW_BYTES * token_rows, state, notes,
                         stage_only=stage_only, records=records, extracted_at_ms=extracted,
                         pages=self._converter if token is not None else None, page_token=token, page_rows=token_rows)


class _GroupedCheckpoint(Future):
    """One future for the checkpoints the buffer groups (one each cost a lock and a callback); waiting for it hands them over."""

    def __init__(self, hand_over: Callable[[], None]) -> None:
        super().__init__()
        self._hand_over: Callable[[], None] | None = hand_over

    def follow(self, commit: Future[Any]) -> None:
        self._hand_over = None
        commit.add_done_callback(self._copy)

    def _copy(self, commit: Future[Any]) -> None:
        error = commit.exception()
        if error is not None:
            self.set_exception(error)
        else:
            self.set_result(commit.result())

    def result(self, timeout: float | None = None) -> Any:
        if self._hand_over is not None:
            self._hand_over()
        return super().result(timeout)

    def exception(self, timeout: float | None = None) -> BaseException | None:
        if self._hand_over is not None and not self.done():
            self._hand_over()
        return super().exception(timeout)
