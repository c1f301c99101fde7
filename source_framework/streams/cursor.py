"""Ordering cursor values, whatever their type, without crashing on mixed input."""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Mapping
from typing import Any

import orjson


class CursorValueError(ValueError):
    """A cursor value (usually from a state file) that cannot be used."""


def parse_datetime(value: str) -> dt.datetime:
    """Parse an ISO 8601 string (``Z`` allowed); naive values are taken as UTC."""
    parsed = dt.datetime.fromisoformat(value)
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=dt.UTC)


def format_datetime(value: dt.datetime) -> str:
    return value.astimezone(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def cursor_sort_key(value: Any, stream: str = "") -> tuple[int, Any]:
    """A key ordering cursor values: numbers, then date-times by instant (``+01:00`` and ``Z`` forms compare equal), then strings."""
    if type(value) is str:
        last = _last_string
        if last[0] == value:
            return last[1]
        return _remember(value)
    if isinstance(value, bool) or value is None:
        raise CursorValueError(f"stream '{stream}': cursor value {value!r} is not a number or a string")
    if isinstance(value, (int, float)):
        return (0, value)
    if isinstance(value, str):
        return _remember(value)
    if isinstance(value, (dt.datetime, dt.date)):
        # A Python connector's cursor orders as the text airbyte-cdk prints for it, which is what its state holds.
        return _remember(orjson.dumps(value).decode()[1:-1])
    raise CursorValueError(f"stream '{stream}': cursor value {value!r} is not a number or a string")


# Each record's cursor is ordered twice in a row and neighbours often share a value: remembering one is cheapest.
_last_string: tuple[str, tuple[int, Any]] = ("", (2, ""))
_from_iso = dt.datetime.fromisoformat


def _remember(value: str) -> tuple[int, Any]:
    global _last_string
    key: tuple[int, Any]
    try:
        # ISO 8601 text starts with a digit: skip the parser's exception otherwise.
        if value[:1].isdigit():
            parsed = _from_iso(value)
            key = (1, parsed if parsed.tzinfo else parsed.replace(tzinfo=dt.UTC))
        else:
            key = (2, value)
    except ValueError:
        key = (2, value)
    _last_string = (value, key)
    return key


def is_datetime_key(key: tuple[int, Any]) -> bool:
    return key[0] == 1


def short_repr(value: Any, limit: int = 120) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[:limit] + "..."


def partition_key(stream_slice: Any) -> str:
    """The one identity of a slice's partition, ``""`` when none: state, commit boundaries and resume all key partitions by it."""
    partition = getattr(stream_slice, "partition", None)
    if partition is None and isinstance(stream_slice, Mapping):
        partition = stream_slice.get("partition")
    if isinstance(partition, Mapping) and partition:
        return partition_identity(partition)
    return ""


def partition_identity(partition: Mapping[str, Any]) -> str:
    return json.dumps(partition, sort_keys=True, default=str)
