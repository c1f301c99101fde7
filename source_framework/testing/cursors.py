"""Cursor values: compare them (numbers, else instants, else strings), find them in a STATE, and bound records."""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from source_framework.testing.catalogs import StreamInfo

_DATE_LIKE = re.compile(r"^\d{4}-\d{2}-\d{2}")


def parse_instant(text: str) -> dt.datetime | None:
    """ISO-8601 text (``Z`` or ``z`` for UTC) as an aware datetime, UTC when it names no zone; None when it is not one."""
    text = text.strip()
    if text[-1:] in ("Z", "z"):
        text = text[:-1] + "+00:00"
    try:
        parsed = dt.datetime.fromisoformat(text)
    except ValueError:
        return None
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=dt.UTC)


def _as_instant(value: Any) -> dt.datetime | None:
    if not isinstance(value, str) or not _DATE_LIKE.match(value):
        return None
    return parse_instant(value.strip().replace(" ", "T", 1))


def _as_number(value: Any) -> float | None:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def _as_number_or_numeric_text(value: Any) -> float | None:
    number = _as_number(value)
    if number is None and isinstance(value, str):
        try:
            number = float(value)
        except ValueError:
            return None
    return number


def compare_cursors(left: Any, right: Any) -> int:
    """-1, 0 or 1 as ``left`` is older than, equal to or newer than ``right``."""
    numbers = _as_number(left), _as_number(right)
    if (numbers[0] is None) != (numbers[1] is None):  # a number against text: "10000" is no older than 999
        numbers = _as_number_or_numeric_text(left), _as_number_or_numeric_text(right)
    if numbers[0] is not None and numbers[1] is not None:
        return (numbers[0] > numbers[1]) - (numbers[0] < numbers[1])
    instants = _as_instant(left), _as_instant(right)
    if instants[0] is not None and instants[1] is not None:
        return (instants[0] > instants[1]) - (instants[0] < instants[1])
    a_text, b_text = str(left), str(right)
    return (a_text > b_text) - (a_text < b_text)


def _normalized(name: str) -> str:
    return re.sub(r"[_\-]", "", name).lower()


class StateShapeError(AssertionError):
    """The STATE holds no cursor the checks can find."""


@dataclass
class StateBound:
    stream: StreamInfo
    cursor: Any = None
    partitions: list[tuple[dict[str, Any], Any]] = field(default_factory=list)
    partitioned: bool = False

    @classmethod
    def from_state(cls, stream: StreamInfo, stream_state: Mapping[str, Any], cursor_path: Sequence[str] | None = None) -> StateBound:
        """The bound ``stream_state`` sets; ``cursor_path`` (the YAML's ``cursor_paths``) says where the cursor is."""
        if not stream.cursor_path:
            raise StateShapeError(f"stream '{stream.name}' has no cursor field in the configured catalog")
        if cursor_path:
            value: Any = stream_state
            for part in cursor_path:
                if not isinstance(value, Mapping) or part not in value:
                    raise StateShapeError(
                        f"stream '{stream.name}': cannot find cursor path {list(cursor_path)} in its state {stream_state!r}"
                    )
                value = value[part]
            return cls(stream, cursor=value)
        key = stream.cursor_path[-1]
        if isinstance(stream_state, Mapping) and key in stream_state:
            return cls(stream, cursor=stream_state[key])
        if isinstance(stream_state, Mapping) and isinstance(stream_state.get("states"), list):
            partitions = []
            for entry in stream_state["states"]:
                cursor = (entry.get("cursor") or {}) if isinstance(entry, Mapping) else {}
                if key in cursor:
                    partitions.append((dict(entry.get("partition") or {}), cursor[key]))
            return cls(stream, partitions=partitions, partitioned=True)
        raise StateShapeError(
            f"stream '{stream.name}': cannot find cursor '{key}' in its state {stream_state!r} "
            "(expected {cursor: value} or {'states': [{'partition': ..., 'cursor': {cursor: value}}]})"
        )

    def lower_bound(self, record: Mapping[str, Any]) -> Any:
        if not self.partitioned:
            return self.cursor
        for partition, cursor in self.partitions:
            if partition and _belongs_to(record, partition):
                return cursor
        return None

    def partition_fields_in(self, records: Sequence[Mapping[str, Any]]) -> bool:
        for partition, _ in self.partitions:
            keys = {_normalized(str(k)) for k, v in partition.items() if not isinstance(v, (Mapping, list))}
            if keys and any(keys <= {_normalized(name) for name in record} for record in records):
                return True
        return False

    def out_of_bounds(
        self, records: Sequence[Mapping[str, Any]], *, newer: bool = False, threshold_days: int = 0
    ) -> list[tuple[Any, Any, Mapping[str, Any]]]:
        """``(cursor, bound, record)`` for each record older than its bound less ``threshold_days`` (a lookback window),
        or, ``newer``, for each record newer than the state: a state not covering the records before it."""
        found = []
        for record in records:
            bound, value = self.lower_bound(record), self.stream.cursor_value(record)
            if bound is None:
                continue
            if newer:
                outside = value is not None and compare_cursors(value, bound) > 0
            else:
                outside = value is None or compare_cursors(value, _days_before(bound, threshold_days)) < 0
            if outside:
                found.append((value, bound, record))
        return found

    def describe(self) -> str:
        if not self.partitioned:
            return f"{self.stream.cursor_path[-1]}={self.cursor}"  # type: ignore[index]
        return f"{len(self.partitions)} partition cursors"


def _days_before(bound: Any, days: int) -> Any:
    """``bound`` moved back ``days`` days: an instant, or a number as epoch milliseconds (as Airbyte's tests read it)."""
    if not days:
        return bound
    number = _as_number(bound)
    if number is not None:
        return number - days * 86_400_000
    instant = _as_instant(bound)
    if instant is None:
        raise StateShapeError(f"threshold_days needs date-time or numeric cursors, got {bound!r}")
    return (instant - dt.timedelta(days=days)).isoformat()


def _same_value(left: Any, right: Any) -> bool:
    """Equal, or the same id once as a number and once as text (``3`` and ``"3"``)."""
    if left == right:
        return True
    kinds = {type(left), type(right)}
    return bool not in kinds and kinds <= {int, str} and str(left) == str(right)


def _belongs_to(record: Mapping[str, Any], partition: Mapping[str, Any]) -> bool:
    fields = {_normalized(name): value for name, value in record.items()}
    scalar = {key: value for key, value in partition.items() if not isinstance(value, (Mapping, list))}
    if not scalar:
        return False
    for key, value in scalar.items():
        normalized = _normalized(str(key))
        if normalized not in fields or not _same_value(fields[normalized], value):
            return False
    return True
