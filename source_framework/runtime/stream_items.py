"""What a stream may yield, sorted into the few kinds the read loop acts on.

Anything but a record or an Airbyte message stops the stream with ``UnknownStreamItem``: dropping it could drop data.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from airbyte_cdk.models import (
    AirbyteLogMessage,
    AirbyteMessage,
    AirbyteMessageSerializer,
    AirbyteStateMessage,
    AirbyteStateMessageSerializer,
    AirbyteTraceMessage,
    TraceType,
    Type,
)

from source_framework.streams.cursor import short_repr

RECORD, LOG, TRACE, ERROR, STATE, CONTROL = "record", "log", "trace", "error", "state", "control"


class UnknownStreamItem(TypeError):
    """A stream yielded something that is neither a record nor an Airbyte message."""


class MisplacedRecord(ValueError):
    """A RECORD message names another stream, or another namespace, than the stream that yielded it."""


class StreamReportedError(Exception):
    """A stream yielded a TRACE error: the stream fails with the error's message and type."""

    def __init__(self, message: str, failure_type: str, internal_message: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.failure_type = _FailureType(failure_type)
        self.internal_message = internal_message


@dataclass(frozen=True)
class _FailureType:
    value: str


@dataclass(frozen=True)
class StreamItem:
    """One non-record item, classified: a RECORD's data, a STATE, or a message to write to stdout as is."""

    kind: str
    record: Mapping[str, Any] | None = None
    stream: str | None = None
    namespace: str | None = None
    state: dict[str, Any] | None = None
    message: dict[str, Any] | None = None
    level: str = ""
    text: str = ""


def classify(item: Any, stream_name: str, errors_stop: bool = True) -> StreamItem:
    """Sort a non-``Mapping`` item; a TRACE ERROR raises ``StreamReportedError`` unless ``errors_stop`` is False (then it
    is passed on, as airbyte-cdk does with one a component emits on the side)."""
    if isinstance(item, AirbyteMessage):
        return _from_message(item, stream_name, errors_stop)
    if isinstance(item, AirbyteLogMessage):
        return _from_message(AirbyteMessage(type=Type.LOG, log=item), stream_name, errors_stop)
    if isinstance(item, AirbyteTraceMessage):
        return _from_message(AirbyteMessage(type=Type.TRACE, trace=item), stream_name, errors_stop)
    raise UnknownStreamItem(
        f"stream '{stream_name}' yielded {type(item).__module__}.{type(item).__qualname__} "
        f"({short_repr(item, 80)}); a stream may yield records (dicts, Mappings, airbyte-cdk Records) "
        f"and AirbyteMessage objects (RECORD, LOG, TRACE, STATE). Nothing of it was written; the stream stops here."
    )


def placed_record(item: StreamItem, stream: str, namespace: str | None) -> Mapping[str, Any]:
    """The data of a RECORD message, refused if it names another stream or namespace: a stream's records go only to its
    own table, under its checkpoints. A message without a namespace is the stream's."""
    if item.stream != stream or (item.namespace is not None and item.namespace != namespace):
        yielding = f"stream '{stream}'" + (f" (namespace '{namespace}')" if namespace else " (no namespace)")
        named = f"stream '{item.stream}'" + (f" in namespace '{item.namespace}'" if item.namespace else "")
        raise MisplacedRecord(
            f"{yielding} yielded a RECORD message for {named}; a stream's records must name the stream itself "
            f"(and its namespace, if any): the runtime cannot place a record in another table. The stream stops here."
        )
    return item.record or {}


def _from_message(message: AirbyteMessage, stream_name: str, errors_stop: bool) -> StreamItem:
    kind = message.type
    if kind == Type.RECORD and message.record is not None:
        return StreamItem(RECORD, record=message.record.data, stream=message.record.stream, namespace=message.record.namespace)
    if kind == Type.LOG and message.log is not None:
        level = getattr(message.log.level, "value", message.log.level)
        return StreamItem(LOG, level=str(level), text=str(message.log.message))
    if kind == Type.TRACE and message.trace is not None:
        if errors_stop and message.trace.type == TraceType.ERROR and message.trace.error is not None:
            error = message.trace.error
            raise StreamReportedError(
                error.message or "the stream reported an error",
                getattr(error.failure_type, "value", None) or "system_error",
                error.internal_message,
            )
        return StreamItem(TRACE, message=AirbyteMessageSerializer.dump(message))
    if kind == Type.STATE and message.state is not None:
        return _from_state(message.state, stream_name)
    if kind == Type.CONTROL and message.control is not None:
        return StreamItem(CONTROL, message=AirbyteMessageSerializer.dump(message))
    raise UnknownStreamItem(
        f"stream '{stream_name}' yielded an AirbyteMessage of type {getattr(kind, 'value', kind)} "
        f"({short_repr(message, 80)}), which a stream cannot emit during read; the stream stops here."
    )


def _from_state(state: AirbyteStateMessage, stream_name: str) -> StreamItem:
    dumped = AirbyteStateMessageSerializer.dump(state)
    per_stream = dumped.get("stream")
    if isinstance(per_stream, Mapping):
        name = (per_stream.get("stream_descriptor") or {}).get("name")
        return StreamItem(STATE, stream=name, state=dict(per_stream.get("stream_state") or {}))
    data = dumped.get("data")
    if isinstance(data, Mapping) and isinstance(data.get(stream_name), Mapping):
        return StreamItem(STATE, stream=stream_name, state=dict(data[stream_name]))
    raise UnknownStreamItem(
        f"stream '{stream_name}' yielded a STATE message of type {dumped.get('type')} that holds no state for "
        f"it ({short_repr(dumped, 120)}); only per-stream states (or a legacy data dict naming the stream) can "
        f"be checkpointed. The stream stops here."
    )
