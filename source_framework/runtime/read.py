"""``read``: pull records from each configured stream, hand them to the sink, checkpoint.

The schedule (SPEC.md, "Checkpoint rules"), for incremental streams:

- a checkpoint after every slice, and every ``state_checkpoint_interval`` records *within* a
  slice; the counter restarts with each slice. (airbyte-cdk 7's ``Stream.read`` counts across
  the whole stream and can print the same state twice; we do neither.)
- a STATE is printed only when the state differs from the last one printed (or given as input);
- one final STATE per stream, even when nothing changed, so a run always ends with a state.

Full-refresh streams have no checkpoints: their sink publishes the data when the stream ends.

The barrier: a checkpoint asks the sink to ``commit(state)`` and queues the STATE line behind the
returned future; lines leave the queue strictly in order, each only after its commit finished.
"""

from __future__ import annotations

import copy
import json
import logging
import time
from collections import deque
from dataclasses import dataclass, field
from typing import (
    TYPE_CHECKING,
    Any,
    Deque,
    Dict,
    Iterable,
    List,
    Mapping,
    Optional,
    Sized,
    Tuple,
)

import orjson
from airbyte_cdk.models import (
    ConfiguredAirbyteCatalog,
    ConfiguredAirbyteStream,
    SyncMode,
)
from airbyte_cdk.sources.streams import Stream
from airbyte_cdk.sources.streams.checkpoint import ResumableFullRefreshCursor

from source_framework.destinations.base import (
    OVERWRITE,
    Destination,
    StreamSink,
    StreamTarget,
)
from source_framework.runtime.boundary import Boundary
from source_framework.runtime.faults import fault_point
from source_framework.runtime.inputs import MAX_STATE_BYTES
from source_framework.runtime.output import ProtocolOutput
from source_framework.runtime.resume import EDITED, TABLE_AHEAD, choose_resume_point

if TYPE_CHECKING:
    from source_framework.runtime.progress import Progress

logger = logging.getLogger("source_framework.read")

WARN_STATE_BYTES = 1024 * 1024


class StateRefused(Exception):
    """A state the runtime will not print: over the size limit, or holding a secret."""


@dataclass
class StreamResult:
    """What happened to one stream, for the progress display and the end-of-run summary.

    Updated as the stream is read (``records`` and ``slices`` are the read loop's own counters,
    which the progress display samples), final once ``read_streams`` moves to the next stream.
    """

    name: str
    records: int = 0
    states: int = 0
    slices: int = 0
    #: how many slices the stream has, where that is known without reading (see ``_slice_total``)
    slices_total: Optional[int] = None
    final_state: Optional[Mapping[str, Any]] = None
    error: Optional[BaseException] = None
    #: seconds from the stream's start to its end (its last commit, or its failure)
    duration: float = 0.0
    sink: Optional[StreamSink] = field(default=None, repr=False, compare=False)

    @property
    def location(self) -> str:
        """Where the records went: the table's path, "stdout", ..."""
        return self.sink.location if self.sink is not None else ""

    @property
    def commits(self) -> Optional[int]:
        """Writes that reached the table (queued checkpoints may share one); None if not counted."""
        return self.sink.commits if self.sink is not None else None

    @property
    def rows(self) -> int:
        """Rows the sink wrote (for a failed stream, fewer than the records read)."""
        rows = self.sink.rows if self.sink is not None else None
        return self.records if rows is None else rows


@dataclass
class ReadResult:
    streams: List[StreamResult] = field(default_factory=list)

    @property
    def failed(self) -> List[StreamResult]:
        return [s for s in self.streams if s.error is not None]


class StreamSync:
    """Reads one stream into its sink and prints its STATEs behind the barrier."""

    def __init__(
        self,
        stream: Stream,
        configured: ConfiguredAirbyteStream,
        target: StreamTarget,
        sink: StreamSink,
        output: ProtocolOutput,
        input_state: Optional[Mapping[str, Any]],
    ) -> None:
        self.stream = stream
        self.configured = configured
        self.sink = sink
        self.output = output
        self.incremental = configured.sync_mode == SyncMode.incremental
        # An overwrite stream's data is published only when it completes, so a STATE in the
        # middle would claim records that no reader can see yet: it checkpoints once, at the end.
        self.checkpoints = self.incremental and configured.destination_sync_mode.value != OVERWRITE
        self.result = StreamResult(name=stream.name, sink=sink)
        self._last_state: Optional[Dict[str, Any]] = copy.deepcopy(dict(input_state)) if input_state else {}
        self._printed_any = False
        self._uncovered = 0  # records read since the last checkpoint was asked for
        self._queue: Deque[Tuple[Any, Dict[str, Any], int]] = deque()
        self._warned_size = False
        resumed = self._resume()
        self._start_state = copy.deepcopy(self._last_state)
        self.boundary = Boundary(target.cursor_field if self.checkpoints else [], target.primary_key, resumed)

    def _resume(self) -> Optional[Mapping[str, Any]]:
        """Pick the start state from the table's commits; return the boundary to skip."""
        if not self.checkpoints:
            return None
        point = choose_resume_point(self._last_state or {}, self.sink.committed())
        if point.reason == TABLE_AHEAD:
            logger.warning(
                "stream %s: the given state %s is older than the table's checkpoint %s (a run died after its "
                "commit, before its STATE was saved); resuming from the table's state %s",
                self.stream.name, _brief(self._last_state), point.seq, _brief(point.state),
            )
            self.stream.state = dict(point.state)
            self._last_state = copy.deepcopy(dict(point.state))
        elif point.reason == EDITED:
            logger.info(
                "stream %s: the given state %s matches no checkpoint of the table; reading from it as given "
                "(a partial re-sync)", self.stream.name, _brief(self._last_state),
            )
        return point.boundary

    def run(self) -> StreamResult:
        stream, sync_mode = self.stream, self.configured.sync_mode
        cursor_field = self.configured.cursor_field or None
        interval = self._interval()
        if not self.incremental and isinstance(stream.get_cursor(), ResumableFullRefreshCursor):
            # The CDK reads such streams one page per call and keeps a page token as state; a
            # full refresh here reads everything and replaces the table, so plain paging it is.
            stream.cursor = None
        stream_state = self._current_state() if self.incremental else {}
        boundary = self.boundary
        slices = stream.stream_slices(sync_mode=sync_mode, cursor_field=cursor_field, stream_state=stream_state)
        self.result.slices_total = _slice_total(stream, slices)
        for stream_slice in slices:
            in_slice = 0
            boundary.start_slice(stream_slice)
            for item in stream.read_records(
                sync_mode=sync_mode,
                cursor_field=cursor_field,
                stream_slice=stream_slice,
                stream_state=stream_state,
            ):
                if not isinstance(item, Mapping):
                    self._forward(item)
                    continue
                if boundary.already_committed(item):
                    continue
                self.sink.write(item)
                self._uncovered += 1
                self.result.records += 1
                in_slice += 1
                if interval and in_slice % interval == 0:
                    self.checkpoint()
                elif self._queue and not in_slice & 255:
                    self._print_ready(wait=False)  # a background commit may have finished
            self.result.slices += 1
            if self.checkpoints:
                self.checkpoint()
        if self.checkpoints:
            self.checkpoint(final=True)
            self._enqueue(self.sink.finish(self._last_state, self._notes()), None)
        else:
            state = self._current_state() if self.incremental else None
            self._enqueue(self.sink.finish(state), state)
        self._print_ready(wait=True)
        return self.result

    def _interval(self) -> Optional[int]:
        if not self.checkpoints:
            return None
        interval = getattr(self.stream, "state_checkpoint_interval", None)
        if interval is not None and (not isinstance(interval, int) or interval <= 0):
            raise ValueError(f"stream '{self.stream.name}': state_checkpoint_interval must be a positive int or None")
        if interval and getattr(self.stream, "is_sorted", True) is False:
            logger.info(
                "stream %s is declared unsorted: it checkpoints only when a slice completes; "
                "its state_checkpoint_interval (%d) is not used", self.stream.name, interval,
            )
            return None
        return interval

    def _current_state(self) -> Dict[str, Any]:
        return copy.deepcopy(dict(self.stream.state or {}))

    def checkpoint(self, final: bool = False) -> None:
        """Commit what was read and queue its STATE, unless the state has not moved."""
        state = self._current_state()
        if state != self._last_state or (final and not self._printed_any):
            self._check_state(state)
            self._enqueue(self.sink.commit(state, self._notes()), state)
            self._last_state, self._printed_any = state, True
        # Records that did not move the state (cursor ties, no cursor value) wait for the next
        # checkpoint, or for finish(), which commits them under the state already printed.
        self._print_ready(wait=False)

    def _notes(self) -> Dict[str, Any]:
        """What a later run needs from this commit to resume exactly (see ``runtime.resume``)."""
        return {"boundary": self.boundary.snapshot(), "start_state": self._start_state}

    def _check_state(self, state: Mapping[str, Any]) -> None:
        """Refuse a state too large to be stored or carrying a config secret; warn when large."""
        encoded = orjson.dumps(state, default=str)
        if len(encoded) > MAX_STATE_BYTES:
            raise StateRefused(
                f"stream '{self.stream.name}': its state is {len(encoded) / 1e6:.1f} MB, over the "
                f"{MAX_STATE_BYTES // 2**20} MB limit (too many partitions or too large a cursor?)"
            )
        if len(encoded) > WARN_STATE_BYTES and not self._warned_size:
            self._warned_size = True
            logger.warning("stream %s: its state is %.1f MB; states over 10 MB are refused", self.stream.name, len(encoded) / 1e6)
        if self.output.secrets.contains_secret(encoded.decode("utf-8", "replace")):
            raise StateRefused(f"stream '{self.stream.name}': its state contains a secret value from the config; refusing to emit it")

    def _enqueue(self, future: Any, state: Optional[Dict[str, Any]]) -> None:
        self._queue.append((future, state, self._uncovered))
        self._uncovered = 0

    def _print_ready(self, wait: bool) -> None:
        while self._queue and (wait or self._queue[0][0].done()):
            future, state, count = self._queue.popleft()
            future.result()  # a failed commit raises here, and its STATE is never printed
            if state is None:
                continue
            self.output.state(self.stream.name, self.stream.namespace, state, count)
            fault_point("state.printed")
            self.result.states += 1
            self.result.final_state = state

    def _forward(self, message: Any) -> None:
        """Pass on LOG and TRACE messages a stream yields between its records."""
        log = getattr(message, "log", None)
        if log is not None:
            self.output.log(str(getattr(log.level, "value", log.level)), log.message)


def read_streams(
    streams: Mapping[str, Stream],
    catalog: ConfiguredAirbyteCatalog,
    states: Mapping[str, Any],
    destination: Destination,
    output: ProtocolOutput,
    rebuild: Iterable[str] = (),
    progress: Optional["Progress"] = None,
) -> ReadResult:
    """Sync every configured stream in catalog order; a failing stream does not stop the others.

    ``streams`` must hold every stream the catalog names, with input state already applied
    (see ``runtime.entrypoint``), so nothing here can fail on bad input. Streams named in
    ``rebuild`` (``"*"``: all) start over and replace their tables. ``progress`` is told when
    each stream starts and ends.
    """
    rebuild = set(rebuild)
    result = ReadResult()
    for configured in catalog.streams:
        stream = streams[configured.stream.name]
        namespace = stream.namespace
        output.stream_status(stream.name, namespace, "STARTED")
        target = StreamTarget(
            name=stream.name,
            namespace=namespace,
            json_schema=stream.get_json_schema(),
            incremental=configured.sync_mode == SyncMode.incremental,
            destination_sync_mode=configured.destination_sync_mode.value,
            primary_key=[list(k) for k in (configured.primary_key or _wrap_keys(stream.primary_key))],
            cursor_field=list(configured.cursor_field or _wrap_cursor(stream.cursor_field)),
            rebuild=stream.name in rebuild or "*" in rebuild,
        )
        sink = destination.open_stream(target)
        sync = StreamSync(stream, configured, target, sink, output, states.get(stream.name))
        output.stream_status(stream.name, namespace, "RUNNING")
        started = time.monotonic()
        if progress is not None:
            progress.stream_started(sync.result)
        try:
            stream_result = sync.run()
        except Exception as error:  # one stream's failure is reported, then the next stream runs
            sink.abort()
            stream_result = sync.result
            stream_result.error = error
            failure_type = getattr(getattr(error, "failure_type", None), "value", "system_error")
            message = getattr(error, "message", None) or f"stream '{stream.name}' failed: {error}"
            output.error(message, error, failure_type=failure_type, stream=stream.name, namespace=namespace)
            output.stream_status(stream.name, namespace, "INCOMPLETE")
            logger.error("stream %s failed after %d records: %s", stream.name, stream_result.records, error)
        else:
            output.stream_status(stream.name, namespace, "COMPLETE")
        stream_result.duration = time.monotonic() - started
        if progress is not None:
            progress.stream_finished(stream_result)
        result.streams.append(stream_result)
    return result


def _slice_total(stream: Stream, slices: Iterable[Any]) -> Optional[int]:
    """How many slices there are, when that is known without reading any: ``stream_slices``
    returned a list (date windows do), or the stream keeps the CDK's default single slice.
    A generator (substream parents, ...) is never drained ahead for this."""
    if isinstance(slices, Sized):
        return len(slices)
    if type(stream).stream_slices is Stream.stream_slices:
        return 1
    return None


def _wrap_keys(keys: Any) -> List[List[str]]:
    if not keys:
        return []
    if isinstance(keys, str):
        return [[keys]]
    return [[k] if isinstance(k, str) else list(k) for k in keys]


def _wrap_cursor(cursor: Any) -> List[str]:
    if not cursor:
        return []
    return [cursor] if isinstance(cursor, str) else list(cursor)


def _brief(state: Optional[Mapping[str, Any]], limit: int = 160) -> str:
    text = json.dumps(state, sort_keys=True, default=str)
    return text if len(text) <= limit else text[:limit] + "..."
