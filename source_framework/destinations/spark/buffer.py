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

Checkpoints that come in quick succession (``state_checkpoint_interval`` 100 on a fast API) are
held back, up to ``HOLD_CHECKPOINTS``, and handed over as one job: their futures complete
together, with one commit, and waiting for one hands them over (``_HeldCheckpoint``).

A checkpoint far away (a large slice, an ``overwrite`` stream that commits once at its end)
does not grow memory: every ``stage_rows`` rows the batches go to Spark as a stage job, written
to hidden staged files that the next commit publishes with the rest.

Fields a record carries that the table's schema does not declare get no column: the conversion
names them in the row's ``_sf_meta`` and counts them (``undeclared_fields``, for the end-of-run
summary), and each new one is logged once.

Why records are converted in this process, though converting holds the interpreter the reader
needs: a sync into Spark is bound by that one interpreter, not by the machine (1,000,000 records
on 2 cores: the sync keeps 1.05 cores busy, the API 0.03; ``bench/run.py``'s "cores" columns), so
only work that leaves the interpreter can speed it up. A helper process that converted batches
was measured and was no faster: packing a batch to send it (``marshal``) cost the reader 1.3 µs a
record, most of the 2.3 µs converting did, since the records are no longer in the CPU's caches by
then. Nor was having Arrow's C++ JSON reader type the batches on the committer's thread (it lets
go of the interpreter): orjson writing the records as one JSON document and the object/array
columns' texts cost the reader 1.3-1.6 µs a record in the sync (0.24 µs in a loop over parsed pages
alone), and 1,000,000 demo orders at slice checkpoints went 111,000-113,000 records/s against
118,000-130,000 this way, interval 100 no better. Nor, by enough to keep it, a helper process given
each page's bytes (branch ``experiment/page-converter``: streams whose records are a page's items
unchanged, converted there with this same code): 1,000,000 orders at slice checkpoints took 6.95 s
against 7.4 s (medians of 4), and 6.5 s with the helper converting nothing, while a buffer that
drops every record takes 4.5 s. So with the conversion gone from this process, two thirds of the
sink's cost to the reader stayed: the per-record and per-page handling around it (there: sending
pages, matching records to them; here: holding records until a batch), which is what to measure next.
Measured since, neither worth keeping: ``BATCH_ROWS`` 256 and 1,024 (records converted while still
in the CPU's caches) took 7.5-7.7 s and 6.6-9.5 s against 6.6-8.9 s at 4,096 (4 interleaved runs),
and turning the garbage collector off 7.2-8.2 s against 7.2-7.6 s. A batch of 4,096 demo orders
converts at 0.14 µs a record when its values repeat (hot in the caches), 1.1-1.3 µs when they are
4,096 distinct records just parsed, 2.3-3.5 µs inside a sync: the cost is memory traffic, not
Arrow's work.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterator, Mapping
from concurrent.futures import Future
from typing import Any

import pyarrow as pa

from source_framework.destinations.base import OVERWRITE, CommitReceipt, StreamSink, done
from source_framework.destinations.checkpoint_record import CheckpointRecord, ResumeNotes
from source_framework.destinations.spark.committer import BackgroundCommitter, CommitJob
from source_framework.destinations.spark.table_writer import TableWriter

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

#: Checkpoints that come fast (``HOLD_MS`` or less after the one before) are held in the buffer, up
#: to this many, and handed to the committer as one job: one conversion and one commit for all, each
#: STATE still printed after the commit that covers it. Why: at ``state_checkpoint_interval`` 100 a
#: checkpoint of 100 records is converted while the conversion's code and data are no longer in the
#: CPU's caches (3.8 µs a record in the sync, against 1.6 in a loop), and each commit costs the
#: committer's thread ~1 ms of the interpreter the reader needs. 1,000,000 demo orders at interval
#: 100 (``bench/run.py``, interleaved single runs): holding 30, median 9.8 s of 10 runs (8.1-11.9);
#: 16, 10.8 s (8.7-11.8); none, 10.6 s of 11 (9.3-12.3). A held checkpoint is in the runtime's
#: queue like any other, so reading still runs at most ``runtime.read.MAX_IN_FLIGHT`` (32)
#: checkpoints ahead of its last STATE: a crash costs no more records than before. Whoever waits
#: for a held one has it handed over (``_HeldCheckpoint``), so waiting never hangs.
HOLD_CHECKPOINTS = 30

#: A checkpoint is held only if the previous came at most this long before it, and held ones are
#: handed over once the first of them is this old, when the next record or checkpoint comes: a
#: stream reading a slow API holds none. (The runtime prints STATEs between records, so those of
#: checkpoints held while a slow page is awaited could not have left sooner than its first record.)
HOLD_MS = 20

#: Rows a buffer holds before it has them written to staged files ahead of their checkpoint.
STAGE_ROWS = 100_000

#: What a record not yet converted counts for against the committer's ``max_pending_bytes``
#: (a parsed dict of a dozen fields; generous, so the bound holds).
RAW_RECORD_BYTES = 2048


class StreamBuffer(StreamSink):
    """The ``StreamSink`` of one stream in a Spark table (reading thread only)."""

    def __init__(self, writer: TableWriter, committer: BackgroundCommitter, stage_rows: int = STAGE_ROWS) -> None:
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
        # Checkpoints held back (see ``HOLD_CHECKPOINTS``): their states and futures, how many of
        # ``_records`` they cover, the last one's notes, and when the first one was held.
        self._held: list[tuple[Mapping[str, Any] | None, _HeldCheckpoint]] = []
        self._held_records = 0
        self._held_notes: ResumeNotes | None = None
        self._held_since_ms = 0
        self._last_checkpoint_ms = 0
        # Whether this run's first commit replaces the table: known before the first job and
        # kept here, so the reading thread never asks the writer, which the committer's thread owns.
        self._replaces_table = writer.rebuilding

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
        now_ms = int(time.time() * 1000)
        if self._held and (not 0 <= now_ms - self._held_since_ms < HOLD_MS or len(self._records) >= self._batch_rows):
            self._hand_over()  # before a batch forms: held checkpoints end inside ``_records``
        self._records.append(record)
        self._extracted_at.append(now_ms)
        if len(self._records) >= self._batch_rows and not self._held:
            self._to_arrow()
            if self._batched_rows >= self._stage_rows:
                self._submit_stage()

    def commit(self, state: Mapping[str, Any] | None, notes: ResumeNotes | None = None) -> Future[CommitReceipt]:
        now_ms = int(time.time() * 1000)
        # (a clock set back counts as a pause: held checkpoints never wait on the clock's say-so)
        fast, self._last_checkpoint_ms = 0 <= now_ms - self._last_checkpoint_ms <= HOLD_MS, now_ms
        if not self._held:
            if not fast:
                return self._submit(state, notes)
            self._held_since_ms = now_ms
        future = _HeldCheckpoint(self._hand_over)
        self._held.append((state, future))
        self._held_records, self._held_notes = len(self._records), notes
        if not fast or len(self._held) >= HOLD_CHECKPOINTS or not 0 <= now_ms - self._held_since_ms < HOLD_MS:
            self._hand_over()
        return future

    def finish(self, state: Mapping[str, Any] | None, notes: ResumeNotes | None = None) -> Future[CommitReceipt]:
        self._hand_over()
        if self._writer.target.destination_sync_mode == OVERWRITE or self._replaces_table or self._holds_rows():
            return self._submit(state, notes)
        # Nothing left to write: the last commit's receipt already counts every row.
        return self._last_commit if self._last_commit is not None else done(CommitReceipt(0, 0))

    def abort(self) -> None:
        self._hand_over()  # checkpoints asked before the failure are committed, as if never held
        self._records, self._extracted_at = [], []
        self._batches, self._batched_rows = [], 0

    def holds(self, records: list[Mapping[str, Any]]) -> list[bool]:
        return self._writer.holds(records)

    def may_commit_uncovered_rows(self) -> bool:
        return self._writer.looks_up_rows

    def undeclared_fields(self) -> dict[str, int]:
        return dict(self._writer.undeclared.by_field)

    def records_with_undeclared_fields(self) -> int:
        return self._writer.undeclared.records

    def _holds_rows(self) -> bool:
        return bool(self._records or self._batches or self._staged_since_commit)

    def _to_arrow(self) -> None:
        """The records so far become one Arrow batch; its checkpoint number is set at commit."""
        if not self._records:
            return
        batch = self._writer.to_arrow(self._records, self._extracted_at)
        self._batches.append(batch)
        self._batched_rows += batch.num_rows
        self._records, self._extracted_at = [], []

    def _hand_over(self) -> None:
        """The held checkpoints become one job: the records up to the last of them, its state and
        notes, the others' states kept with the commit (their STATEs are printed too). Records
        read since the last of them stay here, for the next checkpoint."""
        if not self._held:
            return
        held, self._held = self._held, []
        later_records, later_extracted = self._records[self._held_records:], self._extracted_at[self._held_records:]
        del self._records[self._held_records:], self._extracted_at[self._held_records:]
        committed = self._submit(held[-1][0], self._held_notes, earlier_states=[state for state, _ in held[:-1]])
        self._records, self._extracted_at = later_records, later_extracted
        for _, future in held:
            future.follow(committed)

    def _submit(self, state: Mapping[str, Any] | None, notes: ResumeNotes | None,
                earlier_states: list[Mapping[str, Any] | None] | None = None) -> Future[CommitReceipt]:
        if len(self._records) >= CONVERT_AT_COMMIT_ROWS:
            self._to_arrow()
        self._staged_since_commit = 0
        job = self._job(state, notes, stage_only=False)
        job.earlier_states = earlier_states or []
        self._last_commit = self._committer.submit(job)
        self._replaces_table = False  # that commit replaces it; the next ones add to it
        return self._last_commit

    def _submit_stage(self) -> None:
        """Hand the rows held so far to the writer ahead of their checkpoint (a failure surfaces at
        the next commit: the writer refuses every job after a failed one). Called right after a
        full batch was made: the job holds batches only."""
        self._staged_since_commit += self._batched_rows
        self._committer.submit(self._job(None, None, stage_only=True))

    def _job(self, state: Mapping[str, Any] | None, notes: ResumeNotes | None, stage_only: bool) -> CommitJob:
        """The batches and records held so far, as one job; the buffer starts holding anew."""
        batches, records, extracted = self._batches, self._records, self._extracted_at
        self._batches, self._batched_rows, self._records, self._extracted_at = [], 0, [], []
        # (``nbytes`` walks every buffer's slice: ~20 µs a batch, paid once a checkpoint)
        nbytes = sum(b.get_total_buffer_size() for b in batches) + RAW_RECORD_BYTES * len(records)
        rows = sum(b.num_rows for b in batches) + len(records)
        return CommitJob(self._writer, batches, rows, nbytes, state, notes, stage_only=stage_only,
                         records=records, extracted_at_ms=extracted)


class _HeldCheckpoint(Future):
    """The future of a checkpoint the buffer holds back: it completes with the commit of the job
    it is handed over in. Whoever waits for it first has the buffer hand it over (the reading
    thread: the only one that waits for a stream's checkpoints), so a wait never hangs on it."""

    def __init__(self, hand_over: Callable[[], None]) -> None:
        super().__init__()
        self._hand_over: Callable[[], None] | None = hand_over

    def follow(self, commit: Future[Any]) -> None:
        """Complete as ``commit`` does."""
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
