"""The plain Airbyte source behaviour: records go to stdout as RECORD messages."""

from __future__ import annotations

import time
from collections.abc import Mapping
from concurrent.futures import Future
from typing import Any, Protocol

from source_framework.destinations.base import (
    CommitReceipt,
    Destination,
    EarlierCommits,
    StreamSink,
    StreamTarget,
    done,
)
from source_framework.destinations.checkpoint_record import Notes


class RecordPrinter(Protocol):
    """Where RECORD lines go: the runtime's protocol output (``runtime.output.ProtocolOutput``)."""

    def record(self, stream: str, namespace: str | None, data: Mapping[str, Any], emitted_at: int) -> None: ...


class NoTable(EarlierCommits):
    """Stdout keeps no commits; records committed ahead of their state may be printed again, as airbyte-cdk does."""

    def may_commit_rows_ahead_of_state(self) -> bool:
        return True


class StdoutSink(StreamSink):
    location = "stdout"
    earlier_commits = NoTable()

    def __init__(self, target: StreamTarget, output: RecordPrinter) -> None:
        self._name, self._namespace, self._output = target.name, target.namespace, output
        self._written = 0

    def write(self, record: Mapping[str, Any]) -> None:
        self._output.record(self._name, self._namespace, record, int(time.time() * 1000))
        self._written += 1

    def commit(self, state: Mapping[str, Any] | None, notes: Notes | None = None) -> Future[CommitReceipt]:
        # RECORD lines already went out before this call, so the STATE after them is in order.
        return done(CommitReceipt(self._written))

    def finish(self, state: Mapping[str, Any] | None, notes: Notes | None = None) -> Future[CommitReceipt]:
        return done(CommitReceipt(self._written))


class StdoutDestination(Destination):
    """``--destination stdout``: what ``airbyte-cdk``'s own entrypoint prints, with our checkpoints."""

    def __init__(self, output: RecordPrinter) -> None:
        self._output = output

    def open_stream(self, target: StreamTarget) -> StreamSink:
        return StdoutSink(target, self._output)

    def describe(self) -> str:
        return "RECORD messages on stdout"
