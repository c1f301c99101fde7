"""Fakes the unit tests share: a sink that records what it committed, a stdout that logs STATE
lines as they are written, an in-memory incremental stream, catalogs built with airbyte-cdk's
builders, and one function that runs ``read_streams`` over them.

The read loop is tested against these, without Spark or HTTP::

    result, out, destination = sync(CursorStream([[1, 2, 3], [4]], interval=2))
    destination.sinks["numbers"].landed      # records committed, in order
    out.states                               # the STATE messages printed, in order

A test keeps a fake of its own only where it models something these do not (say so beside it).
"""

from __future__ import annotations

import io
import sys
import threading
from collections.abc import Iterable, Iterator, Mapping
from concurrent.futures import Future
from contextlib import contextmanager
from typing import Any

import orjson
from airbyte_cdk.models import (
    ConfiguredAirbyteCatalog,
    ConfiguredAirbyteStream,
    DestinationSyncMode,
    SyncMode,
)
from airbyte_cdk.sources.streams import CheckpointMixin, Stream
from airbyte_cdk.test.catalog_builder import ConfiguredAirbyteStreamBuilder

from source_framework.destinations.base import (
    CommitReceipt,
    Destination,
    StreamSink,
    StreamTarget,
    done,
)
from source_framework.runtime.output import ProtocolOutput
from source_framework.runtime.read import read_streams
from source_framework.runtime.results import ReadResult
from source_framework.runtime.secrets import SecretFilter
from source_framework.runtime.stream_adapters import adapt


class EventLog:
    """What happened, in order, across sinks and stdout: ("commit", state) and ("STATE", state)."""

    def __init__(self) -> None:
        self.log: list[tuple[str, Any]] = []


class RecordingSink(StreamSink):
    """Keeps what was committed, and each ``commit``/``finish`` call with its state and notes in
    ``calls``. ``hold`` completes commits later from another thread (to test that STATEs wait for
    them); ``fail_at`` fails the N-th commit; ``drop`` loses every N-th record handed to it (a
    destination bug the runtime must catch); ``location`` is what the summary shows as its table."""

    def __init__(
        self, events: EventLog, hold: bool = False, fail_at: int | None = None, drop: int = 0, location: str = ""
    ) -> None:
        self.events, self.hold, self.fail_at, self.drop, self.location = events, hold, fail_at, drop, location
        self.buffer: list[Mapping[str, Any]] = []
        self.landed: list[Mapping[str, Any]] = []
        self.pending: list[Future] = []
        self.calls: list[tuple[str, Mapping[str, Any] | None, Any]] = []
        self.commits = 0
        self.through = 0  # rows committed up to and including the last commit asked for
        self._seen = 0

    def write(self, record: Mapping[str, Any]) -> None:
        self._seen += 1
        if self.drop and self._seen % self.drop == 0:
            return
        self.buffer.append(record)

    def commit(self, state: Mapping[str, Any] | None, notes: Any = None) -> Future:
        self.calls.append(("commit", state, notes))
        self.commits += 1
        if self.fail_at == self.commits:
            future: Future = Future()
            future.set_exception(RuntimeError("disk full"))
            return future
        batch, self.buffer = self.buffer, []
        self.through += len(batch)
        receipt = CommitReceipt(self.through, self.commits)
        if not self.hold:
            self._land(batch, state)
            return done(receipt)
        future = Future()

        def finish_later() -> None:
            self._land(batch, state)
            future.set_result(receipt)

        threading.Timer(0.01, finish_later).start()
        self.pending.append(future)
        return future

    def _land(self, batch: list[Mapping[str, Any]], state: Mapping[str, Any] | None) -> None:
        self.landed.extend(batch)
        self.events.log.append(("commit", dict(state or {})))

    def finish(self, state: Mapping[str, Any] | None, notes: Any = None) -> Future:
        self.calls.append(("finish", state, notes))
        for pending in self.pending:  # commits land in order: the last one after those
            pending.result()
        self.through += len(self.buffer)
        self._land(self.buffer, state)
        self.buffer = []
        return done(CommitReceipt(self.through, self.commits))


class RecordingDestination(Destination):
    """One ``RecordingSink`` per stream (``sink_options`` go to each), sharing one event log."""

    def __init__(self, **sink_options: Any) -> None:
        self.events = EventLog()
        self.sinks: dict[str, RecordingSink] = {}
        self.targets: dict[str, StreamTarget] = {}
        self.sink_options = sink_options
        self.closed = False

    def open_stream(self, target: StreamTarget) -> StreamSink:
        self.targets[target.name] = target
        self.sinks[target.name] = RecordingSink(self.events, **self.sink_options)
        return self.sinks[target.name]

    def close(self) -> None:
        self.closed = True


class EventOutput(io.RawIOBase):
    """A stdout stand-in: keeps each protocol message and logs STATE lines into the event log."""

    def __init__(self, events: EventLog) -> None:
        self.events = events
        self.lines: list[dict] = []

    def writable(self) -> bool:
        return True

    def write(self, data: bytes) -> int:
        for line in bytes(data).splitlines():
            message = orjson.loads(line)
            self.lines.append(message)
            if message["type"] == "STATE":
                self.events.log.append(("STATE", message["state"]["stream"]["stream_state"]))
        return len(data)

    def of_type(self, kind: str, trace_type: str | None = None) -> list[dict]:
        return [
            m for m in self.lines
            if m["type"] == kind and (trace_type is None or m["trace"]["type"] == trace_type)
        ]

    @property
    def states(self) -> list[dict]:
        return [m["state"] for m in self.lines if m["type"] == "STATE"]


class StreamBuilder(ConfiguredAirbyteStreamBuilder):
    """airbyte-cdk's configured-stream builder, with the fields it has no setter for."""

    def with_destination_sync_mode(self, mode: DestinationSyncMode) -> StreamBuilder:
        self._stream["destination_sync_mode"] = mode.value
        return self

    def with_cursor_field(self, cursor_field: list[str] | None) -> StreamBuilder:
        if cursor_field is not None:
            self._stream["cursor_field"] = list(cursor_field)
        return self

    def with_namespace(self, namespace: str | None) -> StreamBuilder:
        if namespace is not None:
            self._stream["stream"]["namespace"] = namespace
        return self


def stream_builder(
    name: str,
    sync_mode: str = "incremental",
    destination_sync_mode: str = "append",
    cursor_field: list[str] | None = None,
    primary_key: list[list[str]] | None = None,
    namespace: str | None = None,
) -> StreamBuilder:
    return (
        StreamBuilder()
        .with_name(name)
        .with_sync_mode(SyncMode[sync_mode])
        .with_primary_key(primary_key or [["id"]])
        .with_destination_sync_mode(DestinationSyncMode[destination_sync_mode])
        .with_cursor_field(cursor_field)
        .with_namespace(namespace)
    )


def configured(*args: Any, **kwargs: Any) -> ConfiguredAirbyteStream:
    """One configured stream (``stream_builder``'s arguments), built with airbyte-cdk's builder."""
    return stream_builder(*args, **kwargs).build()


def catalog_of(*streams: ConfiguredAirbyteStream) -> ConfiguredAirbyteCatalog:
    """A catalog holding these very streams, so the entry a test hands to ``adapt`` is the
    catalog's (``CatalogBuilder`` builds new ones: use it where no entry is shared)."""
    return ConfiguredAirbyteCatalog(streams=list(streams))


class CursorStream(Stream, CheckpointMixin):
    """An in-memory incremental stream: ``slices`` of cursor values, one record ``{"id", "n"}`` per
    value (``id`` counts the records), state ``{"n": cursor}``. The cursor is the highest number
    read, or the last value when values are not numbers (a string cursor lets a test choose the
    state's content and size to the byte). ``slices_as_list`` hands the slices over as a list
    (their total known up front) instead of a generator."""

    primary_key = "id"
    cursor_field = "n"

    def __init__(
        self, slices: list[list[Any]], name: str = "numbers", interval: Any = None, slices_as_list: bool = False
    ) -> None:
        self._slices, self._name, self._interval, self._as_list = slices, name, interval, slices_as_list
        self._cursor: Any = None

    @property
    def name(self) -> str:
        return self._name

    @property
    def state_checkpoint_interval(self) -> Any:
        return self._interval

    @property
    def state(self) -> Mapping[str, Any]:
        return {"n": self._cursor} if self._cursor is not None else {}

    @state.setter
    def state(self, value: Mapping[str, Any]) -> None:
        self._cursor = value.get("n")

    def get_json_schema(self) -> Mapping[str, Any]:
        return {"type": "object", "properties": {"id": {"type": "integer"}, "n": {}}}

    def stream_slices(self, **kwargs: Any) -> Iterable[Mapping[str, Any] | None]:
        slices = [{"index": index} for index in range(len(self._slices))]
        return slices if self._as_list else iter(slices)

    def read_records(self, sync_mode, cursor_field=None, stream_slice=None, stream_state=None):
        first_id = sum(len(values) for values in self._slices[: stream_slice["index"]])
        for offset, value in enumerate(self._slices[stream_slice["index"]]):
            numbers = isinstance(value, int) and isinstance(self._cursor, int | None)
            self._cursor = max(self._cursor or 0, value) if numbers else value
            yield {"id": first_id + offset, "n": value}


class ConditionWaits:
    """Notes when a thread begins to wait on a ``threading.Condition``: a test asserts that another
    thread is held back this way instead of sleeping and hoping it got there. It is a profile
    function: ``sys.setprofile(waits)`` in that thread, or ``threading.setprofile(waits)`` for the
    threads started after it."""

    _WAIT = threading.Condition.wait.__code__

    def __init__(self) -> None:
        self.entered = threading.Event()

    def __call__(self, frame: Any, event: str, arg: Any) -> None:
        if event == "call" and frame.f_code is self._WAIT:
            self.entered.set()


def sync(
    stream: Any,
    sync_mode: str = "incremental",
    input_state: Mapping[str, Any] | None = None,
    destination_sync_mode: str = "append",
    secrets: tuple[str, ...] = (),
    source: Any = None,
    max_checkpoints_ahead: int | None = None,
    **sink_options: Any,
) -> tuple[ReadResult, EventOutput, RecordingDestination]:
    """``read_streams`` over one stream into a ``RecordingDestination`` (``max_checkpoints_ahead``:
    the read's bound, None for its default)."""
    from source_framework.runtime.stream_adapters import MessageDrain

    destination = RecordingDestination(**sink_options)
    out = EventOutput(destination.events)
    entry = configured(stream.name, sync_mode, destination_sync_mode)
    catalog = catalog_of(entry)
    adapter = adapt(stream, entry)
    states = {stream.name: dict(input_state)} if input_state else {}
    if input_state:
        adapter.validate_state(input_state)
    output = ProtocolOutput(out, SecretFilter(secrets))
    side = MessageDrain(source) if source is not None else (lambda: ())
    bound = {} if max_checkpoints_ahead is None else {"max_checkpoints_ahead": max_checkpoints_ahead}
    result = read_streams({stream.name: adapter}, catalog, states, destination, output, side_messages=side, **bound)
    return result, out, destination


@contextmanager
def threads_switching_often() -> Iterator[None]:
    """The interpreter hands the lock between threads every microsecond instead of every 5 ms, so
    that a race between threads shows within a second rather than once in thousands of runs."""
    previous = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    try:
        yield
    finally:
        sys.setswitchinterval(previous)
