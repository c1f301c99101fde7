"""Airbyte protocol messages on stdout: one JSON object per line, and nothing else there.

Messages are built as plain dicts in the protocol's shape and written with orjson; building the
CDK's dataclasses for every record would cost more than reading it. STATE lines are flushed at
once, because whoever reads our stdout acts on them (saves them, or checks the table).
"""

from __future__ import annotations

import sys
import time
import traceback
from typing import Any, BinaryIO, Callable, List, Mapping, Optional

import orjson

from source_framework.runtime.secrets import SecretFilter


def now_ms() -> int:
    return int(time.time() * 1000)


#: called with (stream, namespace, state) after a STATE line is out, i.e. after its checkpoint committed
StateListener = Callable[[str, Optional[str], Mapping[str, Any]], None]


class ProtocolOutput:
    """Writes protocol messages to a binary stream (stdout by default)."""

    def __init__(
        self,
        stream: Optional[BinaryIO] = None,
        secrets: Optional[SecretFilter] = None,
        on_state: Optional[StateListener] = None,
    ) -> None:
        self._out = stream or sys.stdout.buffer
        self.secrets = secrets or SecretFilter(())
        # e.g. rewriting the --state-file, the progress display; each after the line is out
        self._state_listeners: List[StateListener] = [on_state] if on_state is not None else []

    def add_state_listener(self, listener: StateListener) -> None:
        """Call ``listener(stream, namespace, state)`` after each STATE line, in the order added."""
        self._state_listeners.append(listener)

    def _write(self, message: Mapping[str, Any], flush: bool = False) -> None:
        self._out.write(orjson.dumps(message) + b"\n")
        if flush:
            self._out.flush()

    def flush(self) -> None:
        self._out.flush()

    def record(self, stream: str, namespace: Optional[str], data: Mapping[str, Any], emitted_at: int) -> None:
        record: dict = {"stream": stream, "data": data, "emitted_at": emitted_at}
        if namespace:
            record["namespace"] = namespace
        self._write({"type": "RECORD", "record": record})

    def state(self, stream: str, namespace: Optional[str], state: Mapping[str, Any], record_count: int) -> None:
        descriptor: dict = {"name": stream}
        if namespace:
            descriptor["namespace"] = namespace
        self._write(
            {
                "type": "STATE",
                "state": {
                    "type": "STREAM",
                    "stream": {"stream_descriptor": descriptor, "stream_state": state},
                    "sourceStats": {"recordCount": float(record_count)},
                },
            },
            flush=True,
        )
        for listener in self._state_listeners:
            listener(stream, namespace, state)

    def log(self, level: str, message: str) -> None:
        self._write({"type": "LOG", "log": {"level": level, "message": self.secrets.mask(message)}}, flush=True)

    def message(self, message: Mapping[str, Any]) -> None:
        """Pass on a protocol message a stream emitted (a TRACE estimate, a CONTROL message), with
        any config secret in it masked."""
        line = orjson.dumps(message)
        text = line.decode("utf-8", "replace")
        if self.secrets.contains_secret(text):
            line = self.secrets.mask(text).encode("utf-8")
        self._out.write(line + b"\n")
        self._out.flush()

    def stream_status(self, stream: str, namespace: Optional[str], status: str) -> None:
        descriptor: dict = {"name": stream}
        if namespace:
            descriptor["namespace"] = namespace
        self._write(
            {
                "type": "TRACE",
                "trace": {
                    "type": "STREAM_STATUS",
                    "emitted_at": float(now_ms()),
                    "stream_status": {"stream_descriptor": descriptor, "status": status},
                },
            },
            flush=True,
        )

    def error(
        self,
        message: str,
        error: BaseException,
        failure_type: str = "system_error",
        stream: Optional[str] = None,
        namespace: Optional[str] = None,
    ) -> None:
        stack = "".join(traceback.format_exception(type(error), error, error.__traceback__))
        payload: dict = {
            "message": self.secrets.mask(message),
            "internal_message": self.secrets.mask(f"{type(error).__name__}: {error}"),
            "stack_trace": self.secrets.mask(stack),
            "failure_type": failure_type,
        }
        if stream:
            descriptor: dict = {"name": stream}
            if namespace:
                descriptor["namespace"] = namespace
            payload["stream_descriptor"] = descriptor
        self._write({"type": "TRACE", "trace": {"type": "ERROR", "emitted_at": float(now_ms()), "error": payload}}, flush=True)
