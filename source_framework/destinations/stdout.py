"""The plain Airbyte source behaviour: records go to stdout as RECORD messages."""

from __future__ import annotations

from concurrent.futures import Future
from typing import Any, Mapping, Optional

from source_framework.destinations.base import (
    CommitReceipt,
    Destination,
    StreamSink,
    StreamTarget,
    done,
)
from source_framework.runtime.output import ProtocolOutput, now_ms


class StdoutSink(StreamSink):
    location = "stdout"

    def __init__(self, target: StreamTarget, output: ProtocolOutput) -> None:
        self._name, self._namespace, self._output = target.name, target.namespace, output
        self._written = 0

    def write(self, record: Mapping[str, Any]) -> None:
        self._output.record(self._name, self._namespace, record, now_ms())
        self._written += 1

    def commit(self, state: Optional[Mapping[str, Any]], notes: Optional[Mapping[str, Any]] = None) -> "Future[CommitReceipt]":
        # RECORD lines already went out before this call, so the STATE after them is in order.
        return done(CommitReceipt(self._written))

    def finish(self, state: Optional[Mapping[str, Any]], notes: Optional[Mapping[str, Any]] = None) -> "Future[CommitReceipt]":
        return done(CommitReceipt(self._written))


class StdoutDestination(Destination):
    """``--destination stdout``: what ``airbyte-cdk``'s own entrypoint prints, with our checkpoints."""

    def __init__(self, output: ProtocolOutput) -> None:
        self._output = output

    def open_stream(self, target: StreamTarget) -> StreamSink:
        return StdoutSink(target, self._output)

    def describe(self) -> str:
        return "RECORD messages on stdout"
