"""A destination that drops every record: the framework's read loop with nothing behind it.

Commits complete at once, so STATEs are printed as soon as they are due; what is left to
measure is the runtime's own cost (streams, checkpoints, protocol output).

Usage::

    result = read_streams(streams, catalog, {}, NullDestination(), output)
"""

from __future__ import annotations

from collections.abc import Mapping
from concurrent.futures import Future
from typing import Any

from source_framework.destinations.base import CommitReceipt, Destination, StreamSink, StreamTarget, done


class NullSink(StreamSink):
    def __init__(self) -> None:
        self.records = 0
        self.commits = 0

    def write(self, record: Mapping[str, Any]) -> None:
        self.records += 1

    def commit(self, *args: Any, **kwargs: Any) -> Future[Any]:
        self.commits += 1
        return done(CommitReceipt(self.records, self.commits))

    def finish(self, *args: Any, **kwargs: Any) -> Future[Any]:
        return done(CommitReceipt(self.records, self.commits))


class NullDestination(Destination):
    def __init__(self) -> None:
        self.sinks: dict = {}

    def open_stream(self, target: StreamTarget) -> StreamSink:
        self.sinks[target.name] = NullSink()
        return self.sinks[target.name]

    def describe(self) -> str:
        return "nowhere (records dropped)"
