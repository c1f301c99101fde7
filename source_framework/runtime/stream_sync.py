"""One stream's read loop: pull its records, hand them to its sink, checkpoint.

A checkpoint's STATE is printed only after the commit of every record read before it (``runtime.state_barrier``), so a
killed sync resumes without loss; a STATE is printed only when it changed, and every stream ends with one.
"""

from __future__ import annotations

import copy
import logging
import threading
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import closing
from dataclasses import dataclass, field
from typing import Any

from airbyte_cdk.sources.types import Record

from source_framework.destinations.base import OVERWRITE, StreamSink, StreamTarget
from source_framework.destinations.checkpoint_record import ResumeNotes
from source_framework.helpers.tuning import TUNING
from source_framework.runtime.boundary import Boundary
from source_framework.runtime.concurrency import ReadStopped, read_ahead
from source_framework.runtime.output import ProtocolOutput
from source_framework.runtime.results import StreamResult
from source_framework.runtime.resume import plan_start
from source_framework.runtime.side_messages import drain_side_messages, pass_on
from source_framework.runtime.state_barrier import RowsMissing, StateBarrier
from source_framework.runtime.state_checks import StateCheck, json_state
from source_framework.runtime.stream_adapter_base import SliceRead, StreamAdapter
from source_framework.runtime.stream_items import RECORD, STATE, StreamItem, classify, placed_record
from source_framework.streams.cursor import CursorValueError, cursor_sort_key

logger = logging.getLogger("source_framework.read")

POLL_EVERY = 256
#: records read again below the resumed state awaiting look-up before the table is asked about them at once
LOOKUP_BATCH = 10_000


class SlicesFailed(Exception):
    """A stream was read to its end, but some of its slices failed (each reported as it failed)."""

    def __init__(self, stream: str, errors: list[Exception]) -> None:
        self.errors = errors
        first = errors[0]
        super().__init__(f"stream '{stream}': {len(errors)} slice(s) failed, the others were read; a failed slice's "
                         f"state stays where its reading stopped. The first: {getattr(first, 'message', None) or first}")


@dataclass
class SyncControls:
    """What the streams synced at the same time share (``read_streams`` with concurrency > 1)."""

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
        shared: SyncControls | None = None,
        max_checkpoints_ahead: int = TUNING.max_in_flight,
    ) -> None:
        self.adapter = adapter
        self.concurrency = concurrency
        self.shared = shared or SyncControls()
        self.name = adapter.name
        self.sink = sink
        self.output = output
        self.side_messages = side_messages
        self.incremental = adapter.incremental
        # An overwrite stream publishes only when it completes, so a STATE in the middle would claim invisible rows.
        self.checkpoints = self.incremental and target.destination_sync_mode != OVERWRITE
        self.result = StreamResult(name=self.name, location=sink.location)
        self.barrier = StateBarrier(self.name, adapter.namespace, output, self.result, max_checkpoints_ahead)
        self._check_state = StateCheck(self.name, output)
        self._printed_any = False
        self._awaiting_lookup: list[Mapping[str, Any]] = []
        self._yielded: tuple[dict[str, Any], Mapping[str, Any] | None] | None = None
        self._slice_error: Exception | None = None
        self._failed_slices: list[Exception] = []
        self._last_state, resumed = plan_start(
            self.name, copy.deepcopy(dict(input_state)) if input_state else {}, sink.earlier_commits, self.checkpoints, state_as_given,
            target.cursor_field[0] if len(target.cursor_field) == 1 else None,
        )
        self._start_state = copy.deepcopy(self._last_state)
        adapter.start(self._start_state)
        properties = target.json_schema.get("properties")
        self.boundary = Boundary(target.cursor_field if self.checkpoints else [], target.primary_key, resumed, stream=self.name,
                                 declared=list(properties) if isinstance(properties, Mapping) and properties else None)

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
        fail_alone = adapter.slices_fail_alone and self.checkpoints and (
            adapter.failed_slices_covered or self.sink.earlier_commits.may_commit_rows_ahead_of_state()
        )
        for stream_slice in slices:
            if stopped():
                raise ReadStopped(f"stream '{self.name}' stopped: another stream synced at the same time died")
            result.slices_total = adapter.slices_total
            in_slice = 0
            boundary.start_partition(stream_slice.partition)
            observe = stream_slice.observe
            items = stream_slice.items()
            for item in self._until_failure(items) if fail_alone else items:
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
                if seen is None:
                    self._awaiting_lookup.append(data)
                    if len(self._awaiting_lookup) >= LOOKUP_BATCH:
                        self._look_up_and_write()
                    continue
                write(data)
                result.handed += 1
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
        try:
            yield from items
        except Exception as error:
            self._slice_error = error

    def _slice_failed(self) -> None:
        """Report the slice's error and read on; a later sync reads its records again and finds them in the table."""
        error, self._slice_error = self._slice_error, None
        assert error is not None
        self._failed_slices.append(error)
        report_error(self.output, self.name, self.adapter.namespace, error)
        logger.error("stream %s: a slice failed, its other slices are read on; its state stays where it was for that "
                     "slice: %s", self.name, self.output.secrets.mask(str(error)))

    def _look_up_and_write(self) -> None:
        awaiting, self._awaiting_lookup = self._awaiting_lookup, []
        if not awaiting:
            return
        for record, in_table in zip(awaiting, self.sink.earlier_commits.already_in_table(awaiting), strict=True):
            if in_table:
                self.result.skipped += 1
                continue
            self.sink.write(record)
            self.result.handed += 1

    def _finish(self) -> None:
        self._look_up_and_write()
        if self.checkpoints:
            self.checkpoint(final=True)
            # Records that did not move the state (cursor ties) are committed under the last one.
            self.barrier.enqueue(self.sink.finish(self._last_state, self._notes()), None)
        else:
            state, encoded = self._current_state() if self.incremental else json_state(self.adapter.full_refresh_state())
            self._check_state(state, encoded)
            self.barrier.enqueue(self.sink.finish(state), state)
        self.barrier.print_ready(wait=True)
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

    def _message(self, item: Any) -> Mapping[str, Any] | None:
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
        drain_side_messages(self.side_messages, self.name, self.output)

    def _poll(self) -> None:
        if self.shared.stop.is_set():
            raise ReadStopped(f"stream '{self.name}' stopped: another stream synced at the same time died")
        self._drain_side_messages()
        if self.barrier:
            self.barrier.print_ready(wait=False)

    def _current_state(self) -> tuple[dict[str, Any], bytes | None]:
        state = self.adapter.state()
        if self._yielded is not None:
            yielded, adapter_then = self._yielded
            if state is None or state == adapter_then:
                state = yielded  # the stream keeps its state in the STATEs it yields
        return json_state(state)

    def checkpoint(self, final: bool = False) -> None:
        """Commit what was read and queue its STATE, unless the state has not moved or lags the records read."""
        self._look_up_and_write()
        state, encoded = self._current_state()
        if not final and self._lags(state):
            self.barrier.print_ready(wait=False)
            return
        if state != self._last_state or (final and not self._printed_any):
            self._check_state(state, encoded)
            # Print the commits already done first, so ``_notes`` finds the oldest pending one at once.
            self.barrier.print_ready(wait=False)
            self.barrier.enqueue(self.sink.commit(state, self._notes()), state)
            self._last_state, self._printed_any = state, True
        # Records that did not move the state wait for the next checkpoint, or for finish().
        self.barrier.print_ready(wait=False)
        self.barrier.bound()

    def _lags(self, state: Mapping[str, Any]) -> bool:
        """The state's cursor is behind the records read (source-faker sets it after a batch): committing them under it
        would make a resumed run write them twice."""
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
        """What a later run needs from this commit to resume exactly; built only if the sink keeps it."""
        unconfirmed = self.barrier.unconfirmed()
        boundary, start_state, mark = self.boundary, self._start_state, self.boundary.mark()

        def notes() -> ResumeNotes:
            delta, full = boundary.notes(mark, unconfirmed)
            return ResumeNotes(start_state=start_state, boundary=delta, boundary_full=full)
        return notes


def report_error(output: ProtocolOutput, name: str, namespace: str | None, error: BaseException) -> None:
    """A TRACE ERROR for stream ``name``, with the error's own message and failure type where it carries them."""
    failure_type = getattr(getattr(error, "failure_type", None), "value", "system_error")
    message = getattr(error, "message", None) or f"stream '{name}' failed: {error}"
    output.error(message, error, failure_type=failure_type, stream=name, namespace=namespace)
