"""The one shape the read loop drives a stream in, whatever its kind: ``StreamAdapter`` and ``SliceRead``."""

from __future__ import annotations

import logging
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import Any

from airbyte_cdk.models import AirbyteMessage, ConfiguredAirbyteStream, SyncMode, Type
from airbyte_cdk.sources.streams.concurrent.abstract_stream import AbstractStream
from airbyte_cdk.sources.streams.concurrent.abstract_stream_facade import AbstractStreamFacade
from airbyte_cdk.sources.streams.core import NO_CURSOR_STATE_KEY

from source_framework.helpers.raw_pages import RawPages
from source_framework.streams.pages import PageFetches

logger = logging.getLogger("source_framework.read")

#: The final state of a full-refresh stream without a cursor, read back as "no state" (as airbyte-cdk does).
FULL_REFRESH_STATE: Mapping[str, Any] = {NO_CURSOR_STATE_KEY: True}
#: What airbyte-cdk ends a resumable full refresh with (an ``HttpStream``'s cursor): "no state" too.
FULL_REFRESH_COMPLETE: Mapping[str, Any] = {"__ab_full_refresh_sync_complete": True}


def means_no_state(state: Any) -> bool:
    """A full refresh's final state: a later sync starts from nothing, as after no state at all."""
    return not state or state == FULL_REFRESH_STATE or state == FULL_REFRESH_COMPLETE


class StateNotApplicable(Exception):
    """The state a sync must start from cannot be given to a stream built before it was known."""


class CursorFieldMissing(Exception):
    """A stream's own code raised ``KeyError`` for its cursor field: its records (or its state) lack it."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class SliceRead(ABC):
    """One slice (``Stream``) or partition (``AbstractStream``) being read."""

    #: identifies the slice's partition; "" when the stream has none
    partition: str = ""
    #: called by the read loop, in its thread, with each record before it is written: what moves the state
    observe: Callable[[Any], None] | None = None

    @abstractmethod
    def items(self, pages: PageFetches | None = None) -> Iterable[Any]:
        """What the stream yields for this slice, in order; ``pages`` lets a worker fetch its pages at once."""

    def close(self) -> None:
        """Every item was read: let the stream's state move past this slice."""


class StreamAdapter(ABC):
    """One configured stream, whatever its kind."""

    def __init__(self, stream: Any, configured: ConfiguredAirbyteStream) -> None:
        self.stream = stream
        self.configured = configured
        self.incremental = configured.sync_mode == SyncMode.incremental
        #: records in a slice between checkpoints (None: a checkpoint per slice only)
        self.checkpoint_interval: int | None = None
        self.is_sorted = True
        self.slices_total: int | None = None
        self.transform: Callable[[dict[str, Any]], None] | None = None
        #: the slices' items can be read in worker threads: reading them moves no state
        self.concurrency_safe = False
        #: shares no object with other streams, so it may sync alongside them (a Python substream often shares its parent)
        self.syncs_alongside_others = False
        #: a failed slice ends alone and the state leaves it where it was (airbyte-cdk's concurrent cursors)
        self.slices_fail_alone = False
        #: the state covers what a failed slice yielded before its error, so it may be committed whatever the sink
        self.failed_slices_covered = False
        #: the unchanged pages the records are the items of (``RecordsAtPath``): rows may be made from their bytes
        self.raw_pages: RawPages | None = None

    @property
    def name(self) -> str:
        return str(self.stream.name)

    @property
    def namespace(self) -> str | None:
        return getattr(self.stream, "namespace", None)

    def json_schema(self) -> Mapping[str, Any]:
        schema: Mapping[str, Any] = self.stream.get_json_schema()
        return schema

    @abstractmethod
    def default_primary_key(self) -> list[list[str]]: ...

    @abstractmethod
    def default_cursor_field(self) -> list[str]: ...

    @abstractmethod
    def validate_state(self, state: Mapping[str, Any]) -> None:
        """Give the stream ``state`` as the input state; raises if the stream refuses its shape."""

    @abstractmethod
    def start(self, state: Mapping[str, Any]) -> None:
        """The state this sync starts from ({} for a full refresh or a first sync)."""

    @abstractmethod
    def slices(self) -> Iterator[SliceRead]: ...

    @abstractmethod
    def state(self) -> Mapping[str, Any] | None:
        """The state that covers every record read so far (None: the stream keeps none)."""

    def finish(self) -> None:
        """The last slice is closed."""

    def full_refresh_state(self) -> Mapping[str, Any]:
        """The STATE a full refresh ends with, after ``finish``: airbyte-cdk's for the stream."""
        return FULL_REFRESH_STATE

    @property
    def primary_key(self) -> list[list[str]]:
        configured = self.configured.primary_key
        return [list(k) for k in configured] if configured else self.default_primary_key()

    def source_defined_cursor(self) -> bool:
        """The stream reads on its own cursor, whatever the catalog names (airbyte-cdk's ``source_defined_cursor``)."""
        return bool(self.default_cursor_field())

    @property
    def cursor_field(self) -> list[str]:
        # A source-defined cursor is the one the state holds: resume and dedup must follow it, not the catalog's.
        default = self.default_cursor_field()
        if default and self.source_defined_cursor():
            return default
        return list(self.configured.cursor_field or default)

    def ignored_catalog_cursor(self) -> list[str] | None:
        configured = list(self.configured.cursor_field or [])
        return configured if configured and configured != self.cursor_field else None


def is_concurrent(stream: Any) -> bool:
    """A stream of airbyte-cdk's concurrent framework, or a ``Stream`` facade over one."""
    return isinstance(stream, (AbstractStream, AbstractStreamFacade))


def concurrent_stream(stream: Any) -> AbstractStream:
    """The ``AbstractStream`` that is read: the stream itself, or the one behind a facade (whose ``state`` raises)."""
    return stream.get_underlying_stream() if isinstance(stream, AbstractStreamFacade) else stream


def supports_incremental(stream: Any) -> bool:
    if is_concurrent(stream):
        return SyncMode.incremental in (concurrent_stream(stream).as_airbyte_stream().supported_sync_modes or [])
    return bool(getattr(stream, "supports_incremental", False))


def record_data(item: Any) -> Mapping[str, Any] | None:
    if isinstance(item, Mapping):
        return item
    if isinstance(item, AirbyteMessage) and item.type == Type.RECORD and item.record is not None:
        return item.record.data
    return None


def value_at(data: Mapping[str, Any], path: Sequence[str]) -> Any:
    value: Any = data
    for key in path:
        if not isinstance(value, Mapping):
            return None
        value = value.get(key)
    return value


def wrap_keys(keys: Any) -> list[list[str]]:
    if not keys:
        return []
    if isinstance(keys, str):
        return [[keys]]
    return [[k] if isinstance(k, str) else list(k) for k in keys]


def short_state(state: Mapping[str, Any], limit: int = 160) -> str:
    text = repr(dict(state))
    return text if len(text) <= limit else text[:limit] + "..."
