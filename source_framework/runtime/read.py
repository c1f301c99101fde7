"""``read``: pull records from each configured stream, hand them to the sink, checkpoint.

The schedule (docs/concepts.md, "When `read` checkpoints"), for incremental streams:

- a checkpoint after every slice, and every ``state_checkpoint_interval`` records *within* a
  slice; the counter restarts with each slice. (airbyte-cdk 7's ``Stream.read`` counts across
  the whole stream and can print the same state twice; we do neither.)
- a STATE the stream yields itself is a checkpoint too, with that state;
- a STATE is printed only when the state differs from the last one printed (or given as input);
- one final STATE per stream, even when nothing changed, so a run always ends with a state.

Full-refresh streams have no checkpoints: their sink publishes the data when the stream ends,
then the stream's one STATE says so, as airbyte-cdk's last STATE for it does
(``{"__ab_full_refresh_sync_complete": true}`` for an ``HttpStream``, else
``{"__ab_no_cursor_state_message": true}``).

The barrier: a checkpoint asks the sink to ``commit(state)`` and queues the STATE line behind the
returned future; lines leave the queue strictly in order, each only after its commit finished
and only if the commit holds every record handed to the sink before it (``results`` says how
the counts add up). Whatever a stream yields is a record, a message passed on, a checkpoint,
or an error that stops the stream (``stream_items``): nothing is dropped.

Concurrency (``runtime.concurrency``): a stream's next slices are fetched by worker threads
while the loop works on the current one, and streams of airbyte-cdk's concurrent framework are
synced several at once; each loop still takes its slices in order, so each stream's checkpoints
and STATEs are those of a sync that reads one slice after another.

A slice that fails fails its stream, except where the adapter's cursor tracks slices apart
(``StreamAdapter.slices_fail_apart``: airbyte-cdk's concurrent framework): there, as airbyte-cdk
does, the error is reported, the slice is not closed (its state does not move) and the other
slices are read; the stream ends INCOMPLETE (``SlicesFailed``).
"""

from __future__ import annotations

import copy
import json
import logging
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import closing
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import orjson
from airbyte_cdk.models import ConfiguredAirbyteCatalog
from airbyte_cdk.sources.types import Record

from source_framework.destinations.base import (
    OVERWRITE,
    CommitReceipt,
    Destination,
    StreamSink,
    StreamTarget,
)
from source_framework.destinations.checkpoint_record import ResumeNotes
from source_framework.helpers.faults import fault_point
from source_framework.runtime.boundary import Boundary
from source_framework.runtime.concurrency import ReadStopped, read_ahead, run_in_order
from source_framework.runtime.inputs import MAX_STATE_BYTES
from source_framework.runtime.output import ProtocolOutput, to_json
from source_framework.runtime.results import ReadResult, StreamResult
from source_framework.runtime.resume import TABLE_AHEAD, resume_from_table
from source_framework.runtime.stream_adapter_base import SliceRead, StreamAdapter
from source_framework.runtime.stream_items import CONTROL, LOG, RECORD, STATE, TRACE, StreamItem, classify, placed_record
from source_framework.streams.cursor import CursorValueError, cursor_sort_key

if TYPE_CHECKING:
    from source_framework.runtime.progress import Progress

logger = logging.getLogger("source_framework.read")

WARN_STATE_BYTES = 1024 * 1024

#: Records between two looks at finished background commits and side messages.
POLL_EVERY = 256

#: Checkpoints a stream may have asked for whose STATE is not printed yet; at the next one the
#: reading waits for the oldest. So at most (MAX_IN_FLIGHT + 1) x ``state_checkpoint_interval``
#: records (or as many slices) are read and not yet covered by a printed STATE, and queued
#: checkpoints share one commit: reading N records costs less than a commit, so at interval 100
#: the commits keep up by taking several checkpoints at once (``spark/buffer.HOLD_CHECKPOINTS``,
#: half of this, so one commit runs while the next is read).
#: The bound only binds where reading outpaces the commits, that is where the records are cheap to
#: read again: against an API that takes longer for a page than a commit takes, commits keep up and
#: few checkpoints are ever in flight (and a large interval meets the committer's back-pressure,
#: ``max_pending_records``, first). Why 128: each commit costs the page converter a Parquet file,
#: three file creations and six fsyncs whatever its size, and at interval 100 on 2 cores that
#: process, the reading process and the API share the cores, so the number of commits sets the
#: pace. 1,000,000 demo orders at interval 100, ``bench/run.py`` run alternately with 64 and 128
#: (12 repetitions each, 4 runs): 128 (about 215 commits, a hold then also ending 20 ms after
#: its first checkpoint; 100 ms since, see ``spark/buffer.HOLD_MS``) took a median 4.55 s against
#: 5.27 s for 64 (316 commits), slice checkpoints 3.74 s and 3.88 s; two shorter alternations
#: gave 4.16 s against 4.43 s, and 1% in ten rounds of the whole process. How much the count
#: matters follows what a file creation and an fsync cost the machine (see
#: bench/RESULTS.md), which is why an earlier day measured 2%.
#: Earlier, 64 against 32 (628 commits): 4.4-4.7 s against 4.9-5.4 s of reading. The price: a
#: crash at interval 100 costs up to 12,900 records read again (about 40 ms of reading at that
#: pace) instead of 6,500, never lost or written twice. It is the default of the config's
#: ``max_checkpoints_ahead`` (``read --max-checkpoints-ahead``), which trades that speed for less
#: read again after a crash: 1 leaves at most one checkpoint's STATE unprinted while the next is read.
MAX_IN_FLIGHT = 128
#: records read again below the resumed state held before the table is asked about them at once
HELD_RECORDS = 10_000


class StateRefused(Exception):
    """A state the runtime will not print: over the size limit, not JSON, or holding a secret."""


class RowsMissing(Exception):
    """The sink committed fewer rows than the records handed to it: the STATE is not printed."""


class SlicesFailed(Exception):
    """A stream was read to its end, but some of its slices failed (each reported as it failed)."""

    def __init__(self, stream: str, errors: list[Exception]) -> None:
        self.errors = errors
        first = errors[0]
        super().__init__(f"stream '{stream}': {len(errors)} slice(s) failed, the others were read; a failed slice's "
                         f"state stays where its reading stopped. The first: {getattr(first, 'message', None) or first}")


class SchemaMissing(Exception):
    """A stream has no JSON schema, so its table has no columns."""


@dataclass
class Shared:
    """What the streams synced at the same time share (``read_streams`` with concurrency > 1)."""

    #: set when one of them died: the others stop at their next slice or poll
    stop: threading.Event = field(default_factory=threading.Event)
    #: bounds the slices fetching at once across the streams (None: each stream's own bound)
    permits: threading.Semaphore | None = None


class StreamSync:
    """Reads one stream into its sink and prints its STATEs behind the barrier."""

    def __init__(
        self,
        adapter: StreamAdapter,
        target: StreamTarget,
        sink: StreamSink,
        output: ProtocolOutput,
        input_state: Mapping[str, Any] | None,
        side_messages: Callable[[], Iterable[Any]] = lambda: (),
        state_as_given: bool = False,
        concurrency: int = 1,
        shared: Shared | None = None,
        max_checkpoints_ahead: int = MAX_IN_FLIGHT,
    ) -> None:
        self.adapter = adapter
        #: slices read at once where the stream allows it (``runtime.concurrency``)
        self.concurrency = concurrency
        #: checkpoints asked whose STATE may be unprinted while reading goes on (``MAX_IN_FLIGHT``)
        self.max_checkpoints_ahead = max(1, max_checkpoints_ahead)
        self.shared = shared or Shared()
        self.name = adapter.name
        self.sink = sink
        self.output = output
        self.side_messages = side_messages
        self.incremental = adapter.incremental
        # An overwrite stream's data is published only when it completes, so a STATE in the
        # middle would claim records that no reader can see yet: it checkpoints once, at the end.
        self.checkpoints = self.incremental and target.destination_sync_mode != OVERWRITE
        self.result = StreamResult(name=self.name, location=sink.location)
        self._last_state: dict[str, Any] = copy.deepcopy(dict(input_state)) if input_state else {}
        self._printed_any = False
        # (future, state to print or None, records handed when the commit was asked for)
        self._queue: deque[tuple[Any, dict[str, Any] | None, int, int]] = deque()
        self._uncovered = 0  # records handed since the last commit was asked for
        self._held: list[Mapping[str, Any]] = []  # read again below the resumed state (``_write_held``)
        self._warned_size = False
        # A state the stream yielded itself, and what the adapter said then (see _current_state)
        self._yielded: tuple[dict[str, Any], Mapping[str, Any] | None] | None = None
        self._slice_error: Exception | None = None  # the slice being read failed (``_until_failure``)
        self._failed_slices: list[Exception] = []
        resumed = self._resume(state_as_given, target.cursor_field[0] if len(target.cursor_field) == 1 else None)
        self._start_state = copy.deepcopy(self._last_state)
        adapter.start(self._start_state)
        properties = target.json_schema.get("properties")
        self.boundary = Boundary(target.cursor_field if self.checkpoints else [], target.primary_key, resumed, stream=self.name,
                                 declared=list(properties) if isinstance(properties, Mapping) and properties else None)

    def _resume(self, state_as_given: bool, cursor_field: str | None) -> Mapping[str, Any] | None:
        """Pick the start state from the table's commits (``runtime.resume``: a state ahead of the
        table is refused); return the boundary to skip."""
        if not self._apply_pending_reset():
            return None
        if not self.checkpoints:
            return None
        if state_as_given:
            logger.info("stream %s: reading from the given state %s as given (--from-state-as-given)", self.name, _brief(self._last_state))
            return None
        point = resume_from_table(self.name, self._last_state, self.sink, cursor_field)  # (it logs which case it is)
        if point.reason == TABLE_AHEAD:
            self._last_state = copy.deepcopy(dict(point.state))
        return point.boundary

    def _apply_pending_reset(self) -> bool:
        """A ``state reset`` left a marker: it applies only to a sync that starts from an empty
        state (what the reset saved). Given another state, the reset did not finish, or ``state
        set`` came after it: the marker goes and the state is read as given. False when this
        sync starts over (nothing in the table counts for resuming)."""
        reset_id = self.sink.pending_reset()
        if reset_id is None:
            return True
        if not self._last_state:
            logger.info("stream %s: its state was reset; this sync reads it from the start and replaces its table", self.name)
            self.sink.apply_reset(reset_id)
            return False
        logger.warning(
            "stream %s: a state reset was left unfinished (or a later 'state set' replaced it) and this sync was "
            "given a state, %s; the reset is dropped and the state read as given", self.name, _brief(self._last_state),
        )
        self.sink.discard_reset(reset_id)
        return True

    def run(self) -> StreamResult:
        workers = self.concurrency if self.adapter.concurrency_safe else 1
        # Closed however the reading ends: slices read ahead hold fetch permits the whole sync shares.
        with closing(read_ahead(self.adapter.slices(), workers, permits=self.shared.permits)) as slices:
            return self._read(slices)

    def _read(self, slices: Iterable[SliceRead]) -> StreamResult:
        adapter, result, boundary = self.adapter, self.result, self.boundary
        interval = self._interval()
        write = self.sink.write
        transform = adapter.transform
        stopped = self.shared.stop.is_set
        # A failed slice fails the stream where a full refresh publishes only a complete read, and
        # where its records, committed under no state, could not be told apart when read again.
        apart = adapter.slices_fail_apart and self.checkpoints and (
            adapter.failed_slices_covered or self.sink.may_commit_uncovered_rows()
        )
        for stream_slice in slices:
            if stopped():
                raise ReadStopped(f"stream '{self.name}' stopped: another stream synced at the same time died")
            result.slices_total = adapter.slices_total
            in_slice = 0
            boundary.start_partition(stream_slice.partition)
            observe = stream_slice.observe
            items = stream_slice.items()
            for item in self._until_failure(items) if apart else items:
                data: Mapping[str, Any] | None
                if type(item) is dict:
                    data = item
                elif isinstance(item, Record):
                    data = item.data
                elif isinstance(item, Mapping):
                    data = item
                else:
                    data = self._message(item)
                    if data is None:
                        continue
                result.records += 1
                if observe is not None:
                    observe(item if data is item or isinstance(item, Mapping) else data)
                if transform is not None:
                    data = dict(data)
                    transform(data)
                seen = boundary.already_committed(data)
                if seen:
                    result.skipped += 1
                    continue
                if seen is None:  # read again below the resumed state: the table is asked before the commit
                    self._held.append(data)
                    if len(self._held) >= HELD_RECORDS:
                        self._write_held()
                    continue
                write(data)
                result.handed += 1
                self._uncovered += 1
                in_slice += 1
                if interval and in_slice % interval == 0:
                    self.checkpoint()
                elif not in_slice % POLL_EVERY:
                    self._poll()
            if self._slice_error is None:
                stream_slice.close()
            else:
                self._slice_failed()
            result.slices += 1
            self._drain_side_messages()
            if self.checkpoints:
                self.checkpoint()
        adapter.finish()
        if not self._failed_slices:  # else earlier runs' slots may still describe rows not read again
            boundary.finish()
        self._drain_side_messages()
        self._finish()
        if self._failed_slices:
            result.error = SlicesFailed(self.name, self._failed_slices)
        return result

    def _until_failure(self, items: Iterable[Any]) -> Iterator[Any]:
        """The slice's items; what reading them raises ends the slice, not the stream (see
        ``StreamAdapter.slices_fail_apart``). What the loop itself raises is not caught here."""
        try:
            yield from items
        except Exception as error:
            self._slice_error = error

    def _slice_failed(self) -> None:
        """Report the slice's error as airbyte-cdk does when a partition fails, and read on. Its
        records read before the error are committed with the next checkpoint, whose state does
        not cover them: a later sync reads them again and finds them in the table (``holds``)."""
        error, self._slice_error = self._slice_error, None
        assert error is not None
        self._failed_slices.append(error)
        report_error(self.output, self.name, self.adapter.namespace, error)
        logger.error("stream %s: a slice failed, its other slices are read on; its state stays where it was for that "
                     "slice: %s", self.name, self.output.secrets.mask(str(error)))

    def _write_held(self) -> None:
        """Write the records read again that the table does not hold yet; those it holds, row for
        row, are skipped: a resumed sync then writes nothing twice that a lookback window or a
        parent read from the start brings back (the boundary only knows the records at its cursor)."""
        held, self._held = self._held, []
        if not held:
            return
        for record, in_table in zip(held, self.sink.holds(held), strict=True):
            if in_table:
                self.result.skipped += 1
                continue
            self.sink.write(record)
            self.result.handed += 1
            self._uncovered += 1

    def _finish(self) -> None:
        self._write_held()
        if self.checkpoints:
            self.checkpoint(final=True)
            # Records that did not move the state (cursor ties) are committed under the last one.
            self._enqueue(self.sink.finish(self._last_state, self._notes()), None)
        else:
            state, encoded = self._current_state() if self.incremental else json_state(self.adapter.full_refresh_state())
            self._check_state(state, encoded)
            self._enqueue(self.sink.finish(state), state)
        self._print_ready(wait=True)
        if self.result.committed != self.result.handed:
            raise RowsMissing(
                f"stream '{self.name}': {self.result.handed:,} records were handed to the destination but "
                f"{self.result.committed:,} rows were committed; the stream's last STATE was not printed"
            )

    def _interval(self) -> int | None:
        if not self.checkpoints:
            return None
        interval = self.adapter.checkpoint_interval
        if interval is not None and (not isinstance(interval, int) or isinstance(interval, bool) or interval <= 0):
            raise ValueError(f"stream '{self.name}': state_checkpoint_interval must be a positive int or None, got {interval!r}")
        if interval and not self.adapter.is_sorted:
            logger.info(
                "stream %s is declared unsorted: it checkpoints only when a slice completes; "
                "its state_checkpoint_interval (%d) is not used", self.name, interval,
            )
            return None
        return interval

    # -- what the stream yields besides records ---------------------------------------------

    def _message(self, item: Any) -> Mapping[str, Any] | None:
        """Act on a non-record item; return the record's data if it is a RECORD message."""
        classified = classify(item, self.name)
        if classified.kind == RECORD:
            return placed_record(classified, self.name, self.adapter.namespace)
        if classified.kind == STATE:
            self._state_from_stream(classified)
            return None
        pass_on(self.output, classified)
        return None

    def _state_from_stream(self, item: StreamItem) -> None:
        if item.stream != self.name:
            raise ValueError(
                f"stream '{self.name}' yielded a STATE message for stream '{item.stream}'; only a stream's own "
                f"state can be checkpointed with its records"
            )
        if not self.checkpoints:
            logger.debug("stream %s: a STATE it yielded is not a checkpoint (a full refresh publishes once, at its end)", self.name)
            return
        self._yielded = (dict(item.state or {}), copy.deepcopy(self.adapter.state()))
        self.checkpoint()

    def _drain_side_messages(self) -> None:
        """Messages the source's components emitted on the side (airbyte-cdk's message repository).

        A concurrent cursor's STATE messages are not checkpoints: the adapter reads the same
        state from the cursor when a partition closes. A TRACE ERROR is printed, as airbyte-cdk
        prints it, and fails no stream: any stream synced at the same time may be the one
        draining it, and a component reports a failure it recovers from this way (a job retried);
        one it does not recover from raises in its stream. Anything unknown stops the stream.
        """
        for message in self.side_messages():
            classified = classify(message, self.name, errors_stop=False)
            if classified.kind == STATE:
                logger.debug("stream %s: a component emitted the state of %s; the cursor's own state is used", self.name, classified.stream)
            elif classified.kind == RECORD:
                raise ValueError(
                    f"stream '{self.name}': a component emitted a RECORD message for '{classified.stream}' outside the "
                    f"records the stream yields; it cannot be placed in any table's checkpoints"
                )
            else:
                pass_on(self.output, classified)

    def _poll(self) -> None:
        if self.shared.stop.is_set():
            raise ReadStopped(f"stream '{self.name}' stopped: another stream synced at the same time died")
        self._drain_side_messages()
        if self._queue:
            self._print_ready(wait=False)  # a background commit may have finished

    # -- checkpoints ----------------------------------------------------------------------

    def _current_state(self) -> tuple[dict[str, Any], bytes | None]:
        """The stream's state as its STATE line carries it, and its JSON (see ``json_state``)."""
        state = self.adapter.state()
        if self._yielded is not None:
            yielded, adapter_then = self._yielded
            if state is None or state == adapter_then:
                state = yielded  # the stream keeps its state in the STATEs it yields
        return json_state(state)

    def checkpoint(self, final: bool = False) -> None:
        """Commit what was read and queue its STATE, unless the state has not moved, or lags the
        records read (then they wait for a checkpoint whose state covers them)."""
        self._write_held()
        state, encoded = self._current_state()
        if not final and self._lags(state):
            self._print_ready(wait=False)
            return
        if state != self._last_state or (final and not self._printed_any):
            self._check_state(state, encoded)
            # The commits done since the last look are printed first: ``_notes`` then finds the
            # oldest commit in the queue not done yet at once, instead of walking past the done ones.
            self._print_ready(wait=False)
            self._enqueue(self.sink.commit(state, self._notes()), state)
            self._last_state, self._printed_any = state, True
        # Records that did not move the state (cursor ties, no cursor value) wait for the next
        # checkpoint, or for finish(), which commits them under the state already printed.
        self._print_ready(wait=False)
        # Reading stays at most max_checkpoints_ahead checkpoints ahead of the last STATE printed:
        # what a crash can cost stays a few checkpoints' records, whatever the commits' pace.
        while len(self._queue) > self.max_checkpoints_ahead:
            self._print_next()

    def _lags(self, state: Mapping[str, Any]) -> bool:
        """The state's cursor is behind the records read (a stream that sets its state after
        yielding a batch, as source-faker does). Committing those records under it would have a
        resumed run read them again and write them twice, so they are committed with the first
        state that covers them (at the latest the stream's last). Only a state that keeps the
        cursor at its top level can be compared; any other is taken at its word."""
        value = state.get(self.boundary.cursor_field) if self.boundary.cursor_field else None
        highest = self.boundary.highest
        if value is None or highest is None:
            return False
        try:
            key = cursor_sort_key(value)
        except CursorValueError:
            return False
        return key[0] == highest[0] and key < highest

    def _notes(self) -> Callable[[], ResumeNotes]:
        """What a later run needs from this commit to resume exactly (see ``runtime.resume``), as
        a function the sink calls if it keeps them: the boundary as of now is marked, and built
        only then (``Boundary.notes``).

        The boundary may be a delta over the newest commit known to be done; the commits not
        known done yet are the queue's newest entries (one per mark, completed in order)."""
        confirmed = 0  # commits complete in order: the ones known done are the queue's first
        for future, *_ in self._queue:
            if not (future.done() and not future.cancelled() and future.exception() is None):
                break
            confirmed += 1
        unconfirmed = len(self._queue) - confirmed
        boundary, start_state, mark = self.boundary, self._start_state, self.boundary.mark()

        def notes() -> ResumeNotes:
            delta, full = boundary.notes(mark, unconfirmed)
            return ResumeNotes(start_state=start_state, boundary=delta, boundary_full=full)
        return notes

    def _check_state(self, state: Mapping[str, Any], encoded: bytes | None) -> None:
        """Refuse a state that is not JSON, too large to be stored, or carries a config secret.
        ``encoded``: the state's JSON, where ``json_state`` made it (the state is then JSON), else None."""
        if encoded is None:
            problem = json_problem(state)
            if problem:
                raise StateRefused(
                    f"stream '{self.name}': its state is not JSON-serialisable: {problem}. A stream's state must "
                    f"hold only objects, lists, strings, numbers, booleans and null (format date-times as strings)"
                )
            encoded = to_json(state)  # measured as the STATE line and the state file will hold it
        if len(encoded) > MAX_STATE_BYTES:
            raise StateRefused(
                f"stream '{self.name}': its state is {len(encoded) / 1e6:.1f} MB, over the "
                f"{MAX_STATE_BYTES // 2**20} MB limit (too many partitions or too large a cursor?)"
            )
        if len(encoded) > WARN_STATE_BYTES and not self._warned_size:
            self._warned_size = True
            logger.warning("stream %s: its state is %.1f MB; states over 10 MB are refused", self.name, len(encoded) / 1e6)
        if self.output.secrets.contains_secret(encoded.decode("utf-8", "replace")):
            raise StateRefused(f"stream '{self.name}': its state contains a secret value from the config; refusing to emit it")

    def _enqueue(self, future: Any, state: dict[str, Any] | None) -> None:
        self._queue.append((future, state, self._uncovered, self.result.handed))
        self._uncovered = 0

    def _print_ready(self, wait: bool) -> None:
        """Print the STATEs whose commits are done (``wait``: all, as their commits complete), in
        order. Why one flush after them: checkpoints held back complete together, 32 at interval
        100, and a write per line cost this thread a system call, and whoever reads our stdout a
        wake-up, per line."""
        if not self._queue or not (wait or self._queue[0][0].done()):
            return  # (most calls: a look between records)
        try:
            while self._queue:
                if not self._queue[0][0].done():
                    if not wait:
                        break
                    self.output.flush()  # before waiting for the next commit, the STATEs ready are out
                self._print_next(flush=False)
        finally:
            self.output.flush()

    def print_committed(self) -> None:
        """The stream failed: print the STATEs of the commits that completed anyway, in order, up
        to the first that did not, so that the next run starts from what the table holds."""
        while self._queue:
            try:
                self._print_next()
            except Exception:
                return

    def _print_next(self, flush: bool = True) -> None:
        future, state, count, handed = self._queue.popleft()
        receipt: CommitReceipt = future.result()  # a failed commit raises here: no STATE
        self.result.committed = max(self.result.committed, receipt.rows_through)
        self.result.commits = receipt.writes
        if receipt.rows_through < handed:
            raise RowsMissing(
                f"stream '{self.name}': {handed:,} records were handed to the destination before this checkpoint "
                f"but its commit holds {receipt.rows_through:,} rows; the STATE was not printed"
            )
        if state is None:
            return
        self.output.state(self.name, self.adapter.namespace, state, count, flush=flush)
        fault_point("state.printed", before=self.output.flush)  # (a kill there finds the line out)
        self.result.states += 1
        self.result.final_state = state


def read_streams(
    adapters: Mapping[str, StreamAdapter],
    catalog: ConfiguredAirbyteCatalog,
    states: Mapping[str, Any],
    destination: Destination,
    output: ProtocolOutput,
    rebuild: Iterable[str] = (),
    progress: Progress | None = None,
    side_messages: Callable[[], Iterable[Any]] = lambda: (),
    state_as_given: bool = False,
    concurrency: int = 1,
    stop_on_failure: bool = False,
    max_checkpoints_ahead: int = MAX_IN_FLIGHT,
) -> ReadResult:
    """Sync every configured stream in catalog order; a failing stream does not stop the others,
    unless ``stop_on_failure`` (the source's ``stop_sync_on_stream_failure``, as airbyte-cdk
    reads it): then no stream starts after the first failure.

    ``adapters`` holds every stream the catalog names (see ``runtime.entrypoint``), so nothing
    here fails on bad input. Streams named in ``rebuild`` (``"*"``: all) start over and replace
    their tables. ``progress`` is told when each stream starts and ends. ``side_messages``
    yields what the source's components emitted outside the streams' items. ``concurrency``:
    slices fetched at once where the streams allow it, and streams synced at once where they
    share nothing (airbyte-cdk's concurrent framework; 1: one stream, one slice after another).
    Each stream's table, checkpoints and STATEs are the same whatever the concurrency; only the
    order in which lines of different streams interleave changes. ``max_checkpoints_ahead``: how
    many checkpoints of a stream may wait for their STATE while its reading goes on (``MAX_IN_FLIGHT``).
    """
    rebuild = set(rebuild)
    shared = Shared(permits=threading.Semaphore(concurrency) if concurrency > 1 else None)

    failed = threading.Event()

    def sync(configured: Any) -> Callable[[], StreamResult | None]:
        def task() -> StreamResult | None:
            name = configured.stream.name
            if failed.is_set():
                logger.info("stream %s is not synced: the source stops the sync at the first stream that fails "
                            "(stop_sync_on_stream_failure)", name)
                return None
            synced = _sync_one(adapters[name], configured.destination_sync_mode.value, states, destination, output,
                               rebuild, progress, side_messages, state_as_given, concurrency, shared,
                               max_checkpoints_ahead)
            if synced.error is not None and stop_on_failure:
                failed.set()
            return synced

        return task

    result = ReadResult()
    for together in _groups(catalog.streams, adapters):
        result.streams += [r for r in run_in_order([sync(c) for c in together], concurrency, shared.stop) if r]
        _print_leftovers(side_messages, output)
    return result


def pass_on(output: ProtocolOutput, item: StreamItem) -> None:
    """Print a LOG, TRACE or CONTROL message a stream or its components emitted."""
    if item.kind == LOG:
        output.log(item.level, item.text)
    elif item.kind in (TRACE, CONTROL) and item.message is not None:
        output.message(item.message)


def _print_leftovers(side_messages: Callable[[], Iterable[Any]], output: ProtocolOutput) -> None:
    """What components emitted after the last drain of the streams just synced (a stream that failed
    drains no more): printed, as airbyte-cdk prints it, so that it is neither lost nor taken by the
    next stream's drain as that stream's own."""
    for message in side_messages():
        try:
            item = classify(message, "", errors_stop=False)
        except Exception as error:  # UnknownStreamItem: no stream is left to stop for it
            logger.error("a component emitted a message no stream took: %s", error)
            continue
        if item.kind == RECORD:
            logger.error("a component emitted a RECORD message for '%s' after its stream ended; it was not written", item.stream)
        elif item.kind != STATE:  # a concurrent cursor's: its stream's own state was taken from the cursor
            pass_on(output, item)


def _groups(configured: Iterable[Any], adapters: Mapping[str, StreamAdapter]) -> list[list[Any]]:
    """The streams in catalog order, in groups synced at once: each run of streams that may be
    synced alongside others is one group, every other stream a group of its own."""
    groups: list[list[Any]] = []
    for entry in configured:
        alongside = adapters[entry.stream.name].syncs_alongside_others
        if alongside and groups and adapters[groups[-1][-1].stream.name].syncs_alongside_others:
            groups[-1].append(entry)
        else:
            groups.append([entry])
    return groups


def _sync_one(
    adapter: StreamAdapter,
    destination_sync_mode: str,
    states: Mapping[str, Any],
    destination: Destination,
    output: ProtocolOutput,
    rebuild: set,
    progress: Progress | None,
    side_messages: Callable[[], Iterable[Any]],
    state_as_given: bool,
    concurrency: int,
    shared: Shared,
    max_checkpoints_ahead: int = MAX_IN_FLIGHT,
) -> StreamResult:
    """One stream, start to end; whatever goes wrong (its set-up included) fails this stream only."""
    name, namespace = adapter.name, adapter.namespace
    output.stream_status(name, namespace, "STARTED")
    started = time.monotonic()
    sink: StreamSink | None = None
    sync: StreamSync | None = None
    try:
        target = StreamTarget(
            name=name,
            namespace=namespace,
            json_schema=_schema_of(adapter),
            incremental=adapter.incremental,
            destination_sync_mode=destination_sync_mode,
            primary_key=adapter.primary_key,
            cursor_field=adapter.cursor_field,
            rebuild=name in rebuild or "*" in rebuild,
            pages=adapter.raw_pages,
            state=states.get(name),
        )
        sink = destination.open_stream(target)
        sync = StreamSync(adapter, target, sink, output, states.get(name), side_messages, state_as_given, concurrency, shared,
                          max_checkpoints_ahead)
        output.stream_status(name, namespace, "RUNNING")
        if progress is not None:
            progress.stream_started(sync.result)
        stream_result = sync.run()
    except Exception as error:  # one stream's failure is reported, then the next stream runs
        if sink is not None:
            sink.abort()
        if sync is not None:
            sync.print_committed()
        stream_result = sync.result if sync is not None else StreamResult(name=name)
        report_error(output, name, namespace, error)
        stream_result.failed(error)
    if stream_result.error is None:
        output.stream_status(name, namespace, "COMPLETE")
    else:  # failed, or read to its end with failed slices (each reported when it failed)
        output.stream_status(name, namespace, "INCOMPLETE")
        logger.error("stream %s failed after %d records: %s", name, stream_result.records,
                     output.secrets.mask(str(stream_result.error)))
    stream_result.duration = time.monotonic() - started
    if sink is not None:
        stream_result.undeclared_fields = sink.undeclared_fields()
        stream_result.records_with_undeclared_fields = sink.records_with_undeclared_fields()
        stream_result.mismatched_values = sink.mismatched_values()
    if progress is not None:
        progress.stream_finished(stream_result)
    return stream_result


def report_error(output: ProtocolOutput, name: str, namespace: str | None, error: BaseException) -> None:
    """A TRACE ERROR for stream ``name``, with the error's own message and failure type where it
    carries them (airbyte-cdk's ``AirbyteTracedException``)."""
    failure_type = getattr(getattr(error, "failure_type", None), "value", "system_error")
    message = getattr(error, "message", None) or f"stream '{name}' failed: {error}"
    output.error(message, error, failure_type=failure_type, stream=name, namespace=namespace)


def _schema_of(adapter: StreamAdapter) -> Mapping[str, Any]:
    """The stream's JSON schema, or an error that says where it was looked for and how to give one."""
    try:
        schema = adapter.json_schema()
    except Exception as error:
        raise SchemaMissing(schema_missing_message(adapter.name, getattr(adapter, "stream", None), error)) from error
    if not isinstance(schema, Mapping):
        raise SchemaMissing(f"stream '{adapter.name}': get_json_schema() returned {type(schema).__name__}, not a JSON schema object")
    return schema


def schema_missing_message(name: str, stream: Any, error: BaseException) -> str:
    """Where airbyte-cdk looked for a stream's schema (``schemas/<name>.json`` in the package of the
    module that defines the stream class), and the two ways to provide one."""
    module = type(stream).__module__ if stream is not None else "?"
    package = module.split(".")[0]
    where = (
        "the stream class is defined in a script run as __main__, which has no package to look in"
        if package == "__main__"
        else f"it looked for schemas/{name}.json inside the package '{package}'"
    )
    return (
        f"stream '{name}' has no JSON schema ({type(error).__name__}: {error}): {where}. Provide one: put the schema "
        f"in a file schemas/{name}.json beside the module that defines the stream (source_framework's stream bases "
        f"look there, also for scripts), or override get_json_schema() in the stream class to return it"
    )


def json_state(state: Any) -> tuple[dict[str, Any], bytes | None]:
    """A copy of ``state`` as its STATE line carries it: what airbyte-cdk's serializer (orjson)
    writes, read back (a ``datetime`` becomes its ISO text, a tuple a list), and that JSON, which
    the copy writes again byte for byte. What orjson cannot write is copied as is, with None for
    its JSON, for ``json_problem`` to name."""
    try:
        encoded = orjson.dumps(state or {})
    except TypeError:
        return copy.deepcopy(dict(state or {})), None
    return dict(orjson.loads(encoded)), encoded


def json_problem(value: Any) -> str | None:
    """Where ``value`` holds something JSON cannot carry (``state.updatedAt is a datetime``), or None.
    Walks the value with a stack, so a deeply nested state is checked, not a RecursionError."""
    pending = [("state", value)]
    while pending:
        path, item = pending.pop()
        if item is None or isinstance(item, (str, bool, int)):
            continue
        if isinstance(item, float):
            if item != item or item in (float("inf"), float("-inf")):
                return f"{path} is {item}"
        elif isinstance(item, Mapping):
            for key, child in item.items():
                if not isinstance(key, str):
                    return f"{path} has the key {key!r}, which is not a string"
                pending.append((f"{path}.{key}", child))
        elif isinstance(item, (list, tuple)):
            pending.extend((f"{path}[{index}]", child) for index, child in enumerate(item))
        else:
            return f"{path} is a {type(item).__module__}.{type(item).__qualname__} ({_brief(item, 60)})"
    return None


def _brief(state: Any, limit: int = 160) -> str:
    text = json.dumps(state, sort_keys=True, default=str)
    return text if len(text) <= limit else text[:limit] + "..."
