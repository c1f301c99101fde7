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
    """The API-style form ``2025-01-02T03:04:05Z`` (UTC, whole seconds)."""
    return value.astimezone(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def cursor_sort_key(value: Any, stream: str = "") -> tuple[int, Any]:
    """A key that orders cursor values: numbers, then date-times (by instant), then other strings.

    Date-time strings compare by the instant they name, so ``2025-01-01T01:00:00+01:00`` equals
    ``2025-01-01T00:00:00Z``; plain string comparison would get that wrong.
    """
    if type(value) is str:
        last = _last_string  # one read: another thread may replace it meanwhile
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
        # A Python connector's cursor: ordered as the text airbyte-cdk prints for it, which is what
        # its state then holds (a naive one is UTC, as that text is).
        return _remember(orjson.dumps(value).decode()[1:-1])
    raise CursorValueError(f"stream '{stream}': cursor value {value!r} is not a number or a string")


# Why remember one value: each record's cursor is ordered twice in a row (the stream's cursor,
# then the runtime's boundary), and records next to each other often share a value. A cache of
# many values cost more per new value (~0.3 us) than parsing it (~0.1 us).
_last_string: tuple[str, tuple[int, Any]] = ("", (2, ""))
_from_iso = dt.datetime.fromisoformat


def _remember(value: str) -> tuple[int, Any]:
    global _last_string
    key: tuple[int, Any]
    try:
        # No ISO 8601 text starts with anything but a digit: skip the parser's exception.
        if value[:1].isdigit():
            parsed = _from_iso(value)  # (``parse_datetime`` written out: a call per record)
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
    """``repr`` cut to ``limit`` characters, for error messages about user input."""
    text = repr(value)
    return text if len(text) <= limit else text[:limit] + "..."


def partition_key(stream_slice: Any) -> str:
    """The one identity of a slice's partition (a parent record, ...), ``""`` when it has none.

    A slice names its partition as airbyte-cdk's ``StreamSlice.partition`` or as a ``"partition"``
    entry (``PartitionedIncrementalStream``'s slices, airbyte-cdk's legacy cursor slices). The
    state of partitioned streams, the boundary keys kept with each commit and the resume logic
    all identify partitions by this key, so they always agree.
    """
    partition = getattr(stream_slice, "partition", None)
    if partition is None and isinstance(stream_slice, Mapping):
        partition = stream_slice.get("partition")
    if isinstance(partition, Mapping) and partition:
        return partition_identity(partition)
    return ""


def partition_identity(partition: Mapping[str, Any]) -> str:
    """A partition (``{"store_id": 7}``) as a string key: the same for equal partitions."""
    return json.dumps(partition, sort_keys=True, default=str)
