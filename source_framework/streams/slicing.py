"""Slice helpers: date windows and per-parent substreams with partitioned state.

Date windows::

    class Orders(DateWindowStream):
        cursor_field = "updatedAt"
        window_step = datetime.timedelta(days=30)
        lookback = datetime.timedelta(hours=1)   # re-read the last hour on each sync

        def request_params(self, stream_slice=None, **kwargs):
            return {"start": stream_slice["start"], "end": stream_slice["end"]}

Each slice is ``{"start": iso, "end": iso}``, half-open, from the state's cursor (less the
lookback) or ``start_date`` up to now. The runtime checkpoints after every slice.

Substreams with one cursor per parent::

    class StoreOrders(PartitionedIncrementalStream):
        cursor_field = "updatedAt"

        def partitions(self):
            for store in self.parent.read_only_records():
                yield {"store_id": store["id"]}

The state looks like airbyte-cdk's per-partition state::

    {"states": [{"partition": {"store_id": 1}, "cursor": {"updatedAt": "2025-03-01T00:00:00Z"}}]}
"""

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
    """Yield half-open windows ``{"start", "end"}`` covering ``[start, end)`` in ``step`` pieces.

    >>> list(date_windows(parse_datetime("2025-01-01"), parse_datetime("2025-01-03"), dt.timedelta(days=1)))
    [{'start': '2025-01-01T00:00:00Z', 'end': '2025-01-02T00:00:00Z'}, {'start': '2025-01-02T00:00:00Z', 'end': '2025-01-03T00:00:00Z'}]
    """
    if step <= dt.timedelta(0):
        raise ValueError(f"window step must be positive, got {step}")
    cursor = start
    while cursor < end:
        window_end = min(cursor + step, end)
        yield {"start": format_datetime(cursor), "end": format_datetime(window_end)}
        cursor = window_end


class DateWindowStream(IncrementalHttpStream, ABC):
    """An incremental stream sliced into date windows from its cursor (or ``start_date``) to now.

    Override ``window_step`` and ``lookback``; pass ``start_date`` (ISO 8601) to the constructor.
    ``end_date`` defaults to the moment slicing starts.
    """

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
        """A list, not a generator: windows cost no I/O, and a list tells the runtime how many
        slices to expect (the progress display shows "slice 3/12"). The framework's (``@final``):
        the windows start from the committed cursor, which is what makes a resume exact; set
        ``window_step``, ``lookback`` and ``start_date`` instead of overriding it."""
        start = self.start_date
        if sync_mode == SyncMode.incremental and self.cursor_value is not None:
            start = max(start, parse_datetime(str(self.cursor_value)) - self.lookback)
        end = self.end_date or dt.datetime.now(dt.UTC).replace(microsecond=0)
        return list(date_windows(start, end, self.window_step))


class PartitionedIncrementalStream(IncrementalHttpStream, ABC):
    """An incremental stream read once per partition (usually per parent record), one cursor each.

    Implement ``partitions()``; each slice is ``{"partition": {...}, "cursor_start": value}`` and
    ``cursor_for(slice)`` gives the value the partition's requests start from.

    ``partitions_fail_alone`` (default True; ``partitions_fail_apart``, its old name, is still
    honoured): a partition whose reading fails (a parent the API
    answers 404 for) is reported with a TRACE error and the other partitions are read; the
    failed one's cursor stays at the last record it yielded, which is committed with it, and the
    stream ends INCOMPLETE. Only for a sorted stream (``is_sorted``): an unsorted partition's
    cursor may have passed records it had not read yet, so there a failure stops the stream.
    False: any failure stops the stream where it happened, as airbyte-cdk's ``HttpSubStream`` does.
    """

    partitions_fail_alone: bool = True
    #: the old name of ``partitions_fail_alone``, still honoured: where set, it wins
    partitions_fail_apart: bool | None = None

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._cursors: dict[str, dict[str, Any]] = {}  # partition key -> {"partition", "value", "key"}

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
        """One slice per partition, carrying the partition and where its cursor stands. The
        framework's (``@final``): the runtime keys each checkpoint's boundary by the slice's
        ``partition``; implement ``partitions()`` instead.

        A partition listed again (a parent's pages that overlap) is read once: its second slice
        would start from where the cursor stood when it was made, which, with slices made ahead
        of their reading (``--concurrency``), is before the first slice moved it, and every
        record of the partition would be written twice."""
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
        """Where the slice's partition starts: its cursor when the slice began (``None`` if none).

        Fixed for the whole slice, so offset or page-number pagination stays consistent while
        the partition's cursor moves on with the records read. The framework's (``@final``):
        call it from the request methods; do not override it.
        """
        return (stream_slice or {}).get("cursor_start")

    # mypy takes a final property for a read-only one and so objects to it over the base's
    # writable ``state``; it still refuses a subclass's override of the pair, which is the point.
    @property  # type: ignore[misc]
    @final
    def state(self) -> MutableMapping[str, Any]:
        """``{"states": [{"partition", "cursor"}]}``, airbyte-cdk's per-partition shape. The
        framework's (``@final``, the setter with it): the runtime's state commands and resume
        read and write this shape."""
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
