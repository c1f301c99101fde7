"""Slice helpers: date windows, and per-parent substreams with airbyte-cdk-shaped partitioned state."""

from __future__ import annotations

import datetime as dt
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Iterator, Mapping, MutableMapping
from typing import (
    Any,
    final,
)

from airbyte_cdk.models import SyncMode

from source_framework.streams.cursor import (
    CursorValueError,
    cursor_sort_key,
    format_datetime,
    is_datetime_key,
    parse_datetime,
    partition_identity,
    short_repr,
)
from source_framework.streams.incremental import IncrementalHttpStream


def date_windows(
    start: dt.datetime,
    end: dt.datetime,
    step: dt.timedelta,
) -> Iterator[dict[str, str]]:
    """Yield half-open windows ``{"start", "end"}`` covering ``[start, end)`` in ``step`` pieces."""
    if step <= dt.timedelta(0):
        raise ValueError(f"window step must be positive, got {step}")
    cursor = start
    while cursor < end:
        window_end = min(cursor + step, end)
        yield {"start": format_datetime(cursor), "end": format_datetime(window_end)}
        cursor = window_end


class DateWindowStream(IncrementalHttpStream, ABC):
    """An incremental stream in date windows from its cursor (or ``start_date``) to now: set ``window_step`` and ``lookback``."""

    window_step: dt.timedelta = dt.timedelta(days=30)
    lookback: dt.timedelta = dt.timedelta(0)

    def __init__(self, start_date: str, end_date: str | None = None, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.start_date = parse_datetime(start_date)
        self.end_date = parse_datetime(end_date) if end_date else None

    @final
    def stream_slices(
        self,
        *,
        sync_mode: SyncMode,
        cursor_field: list[str] | None = None,
        stream_state: Mapping[str, Any] | None = None,
    ) -> Iterable[Mapping[str, Any] | None]:
        """A list (tells the runtime the slice count); windows start from the committed cursor, which makes a resume exact."""
        start = self.start_date
        if sync_mode == SyncMode.incremental and self.cursor_value is not None:
            start = max(start, parse_datetime(str(self.cursor_value)) - self.lookback)
        end = self.end_date or dt.datetime.now(dt.UTC).replace(microsecond=0)
        return list(date_windows(start, end, self.window_step))


class PartitionedIncrementalStream(IncrementalHttpStream, ABC):
    """An incremental stream read once per partition (usually per parent record), one cursor each.

    Implement ``partitions()`` and call ``cursor_for(slice)`` from the request methods; ``partitions_fail_alone`` lets one fail alone.
    """

    partitions_fail_alone: bool = True
    #: old name of ``partitions_fail_alone``: where set, it wins
    partitions_fail_apart: bool | None = None

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._cursors: dict[str, dict[str, Any]] = {}

    @abstractmethod
    def partitions(self) -> Iterable[Mapping[str, Any]]:
        """Yield one mapping per partition, e.g. ``{"store_id": 7}``."""

    @final
    def stream_slices(
        self,
        *,
        sync_mode: SyncMode,
        cursor_field: list[str] | None = None,
        stream_state: Mapping[str, Any] | None = None,
    ) -> Iterable[Mapping[str, Any] | None]:
        """One slice per partition; one listed again is read once (made ahead of reading, it would duplicate records)."""
        listed: set[str] = set()
        for partition in self.partitions():
            identity = partition_identity(partition)
            if identity in listed:
                continue
            listed.add(identity)
            entry = self._cursors.get(identity)
            yield {"partition": dict(partition), "cursor_start": entry["value"] if entry else None}

    @final
    def cursor_for(self, stream_slice: Mapping[str, Any] | None) -> Any:
        """The slice's partition's cursor when the slice began, fixed so pagination stays consistent while it moves."""
        return (stream_slice or {}).get("cursor_start")

    # mypy sees a final property as read-only against the base's writable ``state``.
    @property  # type: ignore[misc]
    @final
    def state(self) -> MutableMapping[str, Any]:
        """``{"states": [{"partition", "cursor"}]}``, airbyte-cdk's per-partition shape, which resume reads."""
        if not self._cursors:
            return {}
        return {
            "states": [
                {"partition": entry["partition"], "cursor": {self.cursor_field: entry["value"]}}
                for entry in self._cursors.values()
            ]
        }

    @state.setter
    def state(self, value: Mapping[str, Any]) -> None:
        self._cursors = {}
        if not value:
            return
        states = value.get("states") if isinstance(value, Mapping) else None
        if not isinstance(states, list):
            raise CursorValueError(
                f"state for stream '{self.name}' must look like "
                '{"states": [{"partition": {...}, "cursor": {...}}]}, got ' + short_repr(value)
            )
        for item in states:
            if (
                not isinstance(item, Mapping)
                or not isinstance(item.get("partition"), Mapping)
                or not isinstance(item.get("cursor"), Mapping)
                or self.cursor_field not in item["cursor"]
            ):
                raise CursorValueError(
                    f"state for stream '{self.name}': each entry of 'states' needs a 'partition' "
                    f"object and a 'cursor' object with '{self.cursor_field}', got {short_repr(item)}"
                )
            raw = item["cursor"][self.cursor_field]
            key = cursor_sort_key(raw, stream=self.name)
            if self._cursor_is_datetime() and not is_datetime_key(key):
                raise CursorValueError(
                    f"state for stream '{self.name}': cursor {short_repr(raw)} of partition "
                    f"{short_repr(item['partition'])} cannot be parsed as an ISO 8601 date-time"
                )
            partition = dict(item["partition"])
            self._cursors[partition_identity(partition)] = {"partition": partition, "value": raw, "key": key}

    def _advancer(self, stream_slice: Mapping[str, Any] | None) -> Callable[[Any, Any], None]:
        partition = dict((stream_slice or {}).get("partition", {}))
        identity = partition_identity(partition)

        def advance(value: Any, key: Any) -> None:
            entry = self._cursors.get(identity)
            if entry is None:
                self._cursors[identity] = {"partition": partition, "value": value, "key": key}
            elif entry["key"] is None or key > entry["key"]:
                entry["value"], entry["key"] = value, key

        return advance
