"""Airbyte protocol messages on stdout: one JSON object per line, and nothing else there.

Messages are plain dicts written with orjson (the CDK's dataclasses would cost more than reading a record). STATE lines
are flushed at once, because whoever reads stdout acts on them. What orjson refuses is written without its limits, as
airbyte-cdk falls back on the standard library: a record is printed, never dropped.
"""

from __future__ import annotations

import json
import logging
import sys
import threading
import time
import traceback
from collections.abc import Callable, Mapping
from typing import Any, BinaryIO

import orjson

from source_framework.runtime.secrets import SecretFilter

logger = logging.getLogger("source_framework.output")


def now_ms() -> int:
    return int(time.time() * 1000)


#: called with (stream, namespace, state) after a STATE line is out, i.e. after its checkpoint committed
StateListener = Callable[[str, str | None, Mapping[str, Any]], None]


class ProtocolOutput:
    """Writes protocol messages to a binary stream (stdout by default)."""

    def __init__(
        self,
        stream: BinaryIO | None = None,
        secrets: SecretFilter | None = None,
        on_state: StateListener | None = None,
    ) -> None:
        self._out = stream or sys.stdout.buffer
        self.secrets = secrets or SecretFilter(())
        self._state_listeners: list[StateListener] = [on_state] if on_state is not None else []
        self._state_lock = threading.Lock()

    def add_state_listener(self, listener: StateListener) -> None:
        self._state_listeners.append(listener)

    def _write(self, message: Mapping[str, Any], flush: bool = False) -> None:
        self._out.write(to_json(message) + b"\n")
        if flush:
            self._out.flush()

    def flush(self) -> None:
        self._out.flush()

    def record(self, stream: str, namespace: str | None, data: Mapping[str, Any], emitted_at: int) -> None:
        if _has_null(data):  # as airbyte-cdk prints records: its serializer leaves out top-level nulls
            data = {key: value for key, value in data.items() if value is not None}
        record: dict = {"stream": stream, "data": data, "emitted_at": emitted_at}
        if namespace:
            record["namespace"] = namespace
        self._write({"type": "RECORD", "record": record})

    def state(self, stream: str, namespace: str | None, state: Mapping[str, Any], record_count: int,
              flush: bool = True) -> None:
        """A STATE line, then the state listeners; ``flush=False`` when more follow at once and the caller flushes."""
        descriptor: dict = {"name": stream}
        if namespace:
            descriptor["namespace"] = namespace
        message = {
            "type": "STATE",
            "state": {
                "type": "STREAM",
                "stream": {"stream_descriptor": descriptor, "stream_state": state},
                "sourceStats": {"recordCount": float(record_count)},
            },
        }
        # Streams synced at once print from several threads; the state file saves one at a time.
        with self._state_lock:
            self._write(message, flush=flush)
            for listener in self._state_listeners:
                listener(stream, namespace, state)

    def log(self, level: str, message: str) -> None:
        self._write({"type": "LOG", "log": {"level": level, "message": self.secrets.mask(message)}}, flush=True)

    def message(self, message: Mapping[str, Any]) -> None:
        """Pass on a protocol message a stream emitted, with any config secret in it masked."""
        line = to_json(message)
        text = line.decode("utf-8", "replace")
        if self.secrets.contains_secret(text):
            line = self.secrets.mask(text).encode("utf-8")
        self._out.write(line + b"\n")
        self._out.flush()

    def stream_status(self, stream: str, namespace: str | None, status: str) -> None:
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
        stream: str | None = None,
        namespace: str | None = None,
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


def to_json(value: Any) -> bytes:
    """Compact UTF-8 JSON of ``value``: orjson's, or for what orjson refuses, the same text without its limits."""
    try:
        return orjson.dumps(value)
    except TypeError as error:  # orjson.JSONEncodeError is a TypeError
        _warn_slow_path_once(error)
        return _to_json_without_limits(value)


_warned_slow_path = False


def _warn_slow_path_once(error: Exception) -> None:
    global _warned_slow_path
    if not _warned_slow_path:
        _warned_slow_path = True
        logger.warning("a message orjson cannot write (%s) is written more slowly; this may slow the sync", error)


_VALUE, _TEXT, _LEAVE = 0, 1, 2


def _to_json_without_limits(value: Any) -> bytes:
    """JSON of ``value`` built with a stack instead of recursion, so any depth fits; scalars are written by orjson."""
    parts: list[bytes] = []
    open_containers: set[int] = set()  # on the path from the top: a second visit is a cycle
    stack: list[tuple[int, Any]] = [(_VALUE, value)]
    while stack:
        kind, item = stack.pop()
        if kind == _TEXT:
            parts.append(item)
        elif kind == _LEAVE:
            open_containers.discard(item)
        elif isinstance(item, (Mapping, list, tuple)):
            if id(item) in open_containers:
                raise ValueError("Circular reference detected")
            open_containers.add(id(item))
            stack.append((_LEAVE, id(item)))
            parts.append(_push_container(item, stack))
        else:
            parts.append(_scalar_json(item))
    return b"".join(parts)


def _push_container(container: Any, stack: list[tuple[int, Any]]) -> bytes:
    if isinstance(container, Mapping):
        stack.append((_TEXT, b"}"))
        entries = list(container.items())
        for index in range(len(entries) - 1, -1, -1):
            key, member = entries[index]
            stack.append((_VALUE, member))
            stack.append((_TEXT, (b"," if index else b"") + _key_json(key) + b":"))
        return b"{"
    stack.append((_TEXT, b"]"))
    for index in range(len(container) - 1, -1, -1):
        stack.append((_VALUE, container[index]))
        if index:
            stack.append((_TEXT, b","))
    return b"["


def _key_json(key: Any) -> bytes:
    """An object key as JSON text; non-string keys become strings as the standard library writes them."""
    if not isinstance(key, str):
        if key is not None and not isinstance(key, (int, float)):
            raise TypeError(f"keys must be str, int, float, bool or None, not {type(key).__name__}")
        key = json.dumps(key)
    return _scalar_json(key)


def _scalar_json(value: Any) -> bytes:
    try:
        return orjson.dumps(value)
    except TypeError:
        if isinstance(value, int) and not isinstance(value, bool):
            return int.__repr__(value).encode()  # beyond 64 bits
        if isinstance(value, str):
            return json.dumps(value).encode()  # a lone surrogate: escaped, as the standard library does
        raise TypeError(f"Type is not JSON serializable: {type(value).__name__}") from None


def _has_null(data: Mapping[str, Any]) -> bool:
    try:
        return None in data.values()  # compares by identity first: fast for JSON values
    except ValueError:  # a value whose == gives no truth value (a numpy array)
        return any(value is None for value in data.values())
