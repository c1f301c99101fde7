"""Fakes the unit tests share: a sink that records what it committed, a stdout that logs STATE
lines as they are written, catalogs, and one function that runs ``read_streams`` over them.

The read loop is tested against these, without Spark or HTTP::

    result, out, destination = sync(MyStream(...), "incremental", interval=2)
    destination.sinks["numbers"].landed      # records committed, in order
    out.states                               # the STATE messages printed, in order
"""

from __future__ import annotations

import io
import threading
from collections.abc import Mapping
from concurrent.futures import Future
from typing import Any

import orjson
from airbyte_cdk.models import (
    ConfiguredAirbyteCatalog,
    ConfiguredAirbyteStream,
    DestinationSyncMode,
    SyncMode,
)
from airbyte_cdk.test.catalog_builder import CatalogBuilder, ConfiguredAirbyteStreamBuilder

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
    """Keeps what was committed. ``hold`` completes commits later from another thread (to test
    that STATEs wait for them); ``fail_at`` fails the N-th commit; ``drop`` loses every N-th
    record handed to it (a destination bug the runtime must catch)."""

    def __init__(self, events: EventLog, hold: bool = False, fail_at: int | None = None, drop: int = 0) -> None:
        self.events, self.hold, self.fail_at, self.drop = events, hold, fail_at, drop
        self.buffer: list[Mapping[str, Any]] = []
        self.landed: list[Mapping[str, Any]] = []
        self.pending: list[Future] = []
        self.commits = 0
        self.through = 0  # rows committed up to and including the last commit asked for
        self._seen = 0

    def write(self, record: Mapping[str, Any]) -> None:
        self._seen += 1
        if self.drop and self._seen % self.drop == 0:
            return
        self.buffer.append(record)

    def commit(self, state: Mapping[str, Any] | None, notes: Any = None) -> Future:
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
        for pending in self.pending:  # commits land in order: the last one after those
            pending.result()
        self.through += len(self.buffer)
        self._land(self.buffer, state)
        self.buffer = []
        return done(CommitReceipt(self.through, self.commits))


class RecordingDestination(Destination):
    def __init__(self, **sink_options: Any) -> None:
        self.events = EventLog()
        self.sinks: dict[str, RecordingSink] = {}
        self.targets: dict[str, StreamTarget] = {}
        self.sink_options = sink_options

    def open_stream(self, target: StreamTarget) -> StreamSink:
        self.targets[target.name] = target
        self.sinks[target.name] = RecordingSink(self.events, **self.sink_options)
        return self.sinks[target.name]


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


def configured(
    name: str,
    sync_mode: str = "incremental",
    destination_sync_mode: str = "append",
    cursor_field: list[str] | None = None,
    primary_key: list[list[str]] | None = None,
) -> ConfiguredAirbyteStream:
    """A configured stream, built with airbyte-cdk's ``CatalogBuilder`` pieces."""
    stream = (
        ConfiguredAirbyteStreamBuilder()
        .with_name(name)
        .with_sync_mode(SyncMode[sync_mode])
        .with_primary_key(primary_key or [["id"]])
        .build()
    )
    stream.destination_sync_mode = DestinationSyncMode[destination_sync_mode]
    stream.cursor_field = cursor_field
    return stream


def catalog_of(*streams: ConfiguredAirbyteStream) -> ConfiguredAirbyteCatalog:
    builder = CatalogBuilder()
    catalog = builder.build()
    catalog.streams = list(streams)
    return catalog


def sync(
    stream: Any,
    sync_mode: str = "incremental",
    input_state: Mapping[str, Any] | None = None,
    destination_sync_mode: str = "append",
    secrets: tuple[str, ...] = (),
    source: Any = None,
    **sink_options: Any,
) -> tuple[ReadResult, EventOutput, RecordingDestination]:
    """``read_streams`` over one stream into a ``RecordingDestination``."""
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
    result = read_streams({stream.name: adapter}, catalog, states, destination, output, side_messages=side)
    return result, out, destination
