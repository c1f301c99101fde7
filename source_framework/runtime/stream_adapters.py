"""airbyte-cdk's two kinds of streams, in the one shape the read loop drives.

airbyte-cdk 7 has two stream families, and published connectors use both:

- ``Stream`` (``HttpStream``, ``HttpSubStream``, every Python connector): slices from
  ``stream_slices()``, items from ``read_records(slice)``, and state kept by the stream itself:
  a ``state`` property (``CheckpointMixin``, ``IncrementalMixin``), a ``Cursor`` from
  ``get_cursor()`` (resumable full refresh, substreams), or the legacy ``get_updated_state``.
- ``AbstractStream`` (the concurrent framework: declarative YAML manifests, ``DefaultStream``):
  partitions from ``generate_partitions()``, records from ``partition.read()``, state from the
  stream's concurrent ``cursor`` (it observes each record; closing a partition moves it). The
  ``StreamFacade``s that ``ConcurrentSourceAdapter`` sources return are ``Stream``s only in name:
  the ``DefaultStream`` behind each is what airbyte-cdk reads, and what is read here.

``adapt(stream, configured, ...)`` wraps either in a ``StreamAdapter``::

    adapter.start(state)                  # the state this sync starts from
    for stream_slice in adapter.slices():
        for item in stream_slice.items():  # what the stream yields: records and messages
            ...
        stream_slice.close()
        adapter.state()                    # covers every record of every closed slice
    adapter.finish()

``CdkStreamAdapter`` reads a ``Stream`` the way airbyte-cdk's ``Stream.read`` does (its own
checkpoint reader picks the slices; the state comes from the same place), so that any stream
that runs under airbyte-cdk runs here; only *when* a checkpoint is taken is the read loop's.
Where the stream's own code dies on its cursor field (a ``KeyError``), the error says so.
"""

from __future__ import annotations

import copy
import json
import logging
import threading
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Iterator, Mapping, MutableMapping, Sequence, Sized
from contextlib import contextmanager
from queue import Empty
from typing import Any

from airbyte_cdk.models import AirbyteMessage, ConfiguredAirbyteStream, SyncMode, Type
from airbyte_cdk.sources.declarative.concurrency_level import ConcurrencyLevel
from airbyte_cdk.sources.message.concurrent_repository import ConcurrentMessageRepository
from airbyte_cdk.sources.streams import Stream
from airbyte_cdk.sources.streams.checkpoint import (
    FullRefreshCheckpointReader,
    IncrementalCheckpointReader,
    ResumableFullRefreshCursor,
)
from airbyte_cdk.sources.streams.concurrent.abstract_stream import AbstractStream
from airbyte_cdk.sources.streams.concurrent.abstract_stream_facade import AbstractStreamFacade
from airbyte_cdk.sources.streams.core import NO_CURSOR_STATE_KEY
from airbyte_cdk.sources.utils.transform import TransformConfig

from source_framework.helpers.raw_pages import RawPages
from source_framework.streams.cursor import partition_key
from source_framework.streams.pages import PageFetches

logger = logging.getLogger("source_framework.read")

#: The final state of a full-refresh stream: what airbyte-cdk prints for streams without a
#: cursor, and what it (and we) read back as "no state".
FULL_REFRESH_STATE: Mapping[str, Any] = {NO_CURSOR_STATE_KEY: True}
#: What airbyte-cdk ends a resumable full refresh with (an ``HttpStream``'s cursor): "no state" too.
FULL_REFRESH_COMPLETE: Mapping[str, Any] = {"__ab_full_refresh_sync_complete": True}


def means_no_state(state: Any) -> bool:
    """A full refresh's final state: a later sync starts from nothing, as after no state at all."""
    return not state or state == FULL_REFRESH_STATE or state == FULL_REFRESH_COMPLETE


class StateNotApplicable(Exception):
    """The state a sync must start from cannot be given to a stream built before it was known."""


class CursorFieldMissing(Exception):
    """A stream's own code raised ``KeyError`` for its cursor field: its records (or the state it
    was given) lack it. The original error is the cause."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class SliceRead(ABC):
    """One slice (``Stream``) or partition (``AbstractStream``) being read."""

    #: identifies the slice's partition (a parent record, ...); "" when the stream has none
    partition: str = ""
    #: called by the read loop, in its own thread, with each record of the slice (before the
    #: record is written): what moves the stream's state. None: the items move it themselves.
    observe: Callable[[Any], None] | None = None

    @abstractmethod
    def items(self, pages: PageFetches | None = None) -> Iterable[Any]:
        """What the stream yields for this slice, in order. ``pages``: what a worker may lend the
        slice to fetch its pages at once (``streams.pages``), where the stream allows it."""

    def close(self) -> None:
        """Every item was read: let the stream's state move past this slice."""


class StreamAdapter(ABC):
    """One configured stream, whatever its kind."""

    def __init__(self, configured: ConfiguredAirbyteStream) -> None:
        self.configured = configured
        self.incremental = configured.sync_mode == SyncMode.incremental
        #: records in a slice between checkpoints (None: a checkpoint per slice only)
        self.checkpoint_interval: int | None = None
        #: records of a slice arrive in ascending cursor order (see ``IncrementalHttpStream``)
        self.is_sorted = True
        #: how many slices, when known without reading any (set once ``slices()`` started)
        self.slices_total: int | None = None
        #: a callable applied to each record's data (airbyte-cdk's TypeTransformer), or None
        self.transform: Callable[[dict[str, Any]], None] | None = None
        #: the slices' items can be read in worker threads, several at once (``runtime.concurrency``):
        #: reading them moves no state (that is ``SliceRead.observe``'s and ``close``'s job)
        self.concurrency_safe = False
        #: the stream may be synced while other such streams are (in other threads): it shares
        #: no object with them. Only airbyte-cdk's concurrent framework promises that; a Python
        #: connector's substream often reads its parent through the parent stream's own object.
        self.syncs_alongside_others = False
        #: a slice whose reading fails ends alone: the stream reads its other slices, and its state
        #: leaves the failed one where it was (``close`` is not called for it). Only a cursor that
        #: tracks each slice apart can promise that, as airbyte-cdk's concurrent cursors do.
        self.slices_fail_apart = False
        #: what a failed slice yielded before its error is covered by the state (its cursor moved
        #: with each record, in order), so it may be committed whatever the sink; else only where
        #: the sink finds such records again (``StreamSink.may_commit_uncovered_rows``)
        self.failed_slices_covered = False
        #: the pages the stream's records are the items of, unchanged (``RecordsAtPath``): a
        #: destination may make their rows from the pages' bytes. None for any other stream.
        self.raw_pages: RawPages | None = None

    @property
    @abstractmethod
    def name(self) -> str: ...

    @property
    @abstractmethod
    def namespace(self) -> str | None: ...

    @abstractmethod
    def json_schema(self) -> Mapping[str, Any]: ...

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
        """The stream reads on its own cursor, whatever the catalog's ``cursor_field`` names
        (airbyte-cdk's ``source_defined_cursor``)."""
        return bool(self.default_cursor_field())

    @property
    def cursor_field(self) -> list[str]:
        # A source-defined cursor is the one the stream's state holds: the boundary of a resume and
        # the latest row of a dedup must follow it, not a field the catalog names instead.
        default = self.default_cursor_field()
        if default and self.source_defined_cursor():
            return default
        return list(self.configured.cursor_field or default)

    def ignored_catalog_cursor(self) -> list[str] | None:
        """The catalog's ``cursor_field`` where the stream reads on another one, else None."""
        configured = list(self.configured.cursor_field or [])
        return configured if configured and configured != self.cursor_field else None


def adapt(
    stream: Any,
    configured: ConfiguredAirbyteStream,
    rebuild: Callable[[Mapping[str, Any]], AbstractStream] | None = None,
    built_with: Mapping[str, Any] | None = None,
) -> StreamAdapter:
    """The adapter for ``stream``. For concurrent streams, ``rebuild(state)`` builds the stream
    anew with another start state where the source allows it (``runtime.cdk_stream_state``);
    where it does not, ``built_with`` is the state the source was constructed with."""
    adapter: StreamAdapter
    if is_concurrent(stream):
        adapter = ConcurrentStreamAdapter(concurrent_stream(stream), configured, rebuild, dict(built_with or {}))
    elif isinstance(stream, Stream):
        adapter = CdkStreamAdapter(stream, configured)
    else:
        raise _not_a_stream(stream)
    ignored = adapter.ignored_catalog_cursor()
    if ignored:
        # airbyte-cdk reads such a stream on its own cursor without a word; a user who named
        # another one in the catalog would otherwise believe the sync follows it.
        logger.warning(
            "stream %s: the catalog's cursor_field '%s' is not used: the stream's cursor is source-defined, '%s', "
            "and the stream is read on it (as airbyte-cdk reads it). Set the catalog's cursor_field to %s, or leave it out",
            adapter.name, ".".join(ignored), ".".join(adapter.cursor_field), json.dumps(adapter.cursor_field),
        )
    return adapter


def _not_a_stream(stream: Any) -> TypeError:
    return TypeError(
        f"stream '{getattr(stream, 'name', stream)}' is a {type(stream).__qualname__}, neither an airbyte-cdk "
        f"Stream nor an AbstractStream; the source's streams() must return one of those"
    )


def is_concurrent(stream: Any) -> bool:
    """A stream of airbyte-cdk's concurrent framework (``DefaultStream``, declarative streams), or
    a ``Stream`` facade over one (``StreamFacade``, what ``ConcurrentSourceAdapter`` sources return)."""
    return isinstance(stream, (AbstractStream, AbstractStreamFacade))


def concurrent_stream(stream: Any) -> AbstractStream:
    """The ``AbstractStream`` that is read: the stream itself, or the one behind a facade.

    A facade is only the old ``Stream`` interface over a ``DefaultStream`` (its ``state`` raises);
    airbyte-cdk's ``ConcurrentSourceAdapter.read`` reads the stream behind it, and so do we."""
    return stream.get_underlying_stream() if isinstance(stream, AbstractStreamFacade) else stream


def supports_incremental(stream: Any) -> bool:
    """What airbyte-cdk's ``discover`` says: the stream offers the incremental sync mode."""
    if is_concurrent(stream):
        return SyncMode.incremental in (concurrent_stream(stream).as_airbyte_stream().supported_sync_modes or [])
    return bool(getattr(stream, "supports_incremental", False))


def record_data(item: Any) -> Mapping[str, Any] | None:
    """The record an item carries (a ``Mapping``, airbyte-cdk's ``Record``, a RECORD message), or None."""
    if isinstance(item, Mapping):
        return item
    if isinstance(item, AirbyteMessage) and item.type == Type.RECORD and item.record is not None:
        return item.record.data
    return None


def value_at(data: Mapping[str, Any], path: Sequence[str]) -> Any:
    """The value at a field path of a record, or None where the record has none."""
    value: Any = data
    for key in path:
        if not isinstance(value, Mapping):
            return None
        value = value.get(key)
    return value


def wrap_keys(keys: Any) -> list[list[str]]:
    """A primary key in any of airbyte-cdk's forms, as a list of field paths."""
    if not keys:
        return []
    if isinstance(keys, str):
        return [[keys]]
    return [[k] if isinstance(k, str) else list(k) for k in keys]


# -- Stream ---------------------------------------------------------------------------------


class CdkStreamAdapter(StreamAdapter):
    """A ``Stream``, read as airbyte-cdk's ``Stream.read`` reads it.

    The slices come from the stream's own checkpoint reader (``Stream._get_checkpoint_reader``),
    which also serves cursor-based streams (resumable full refresh, substream cursors) their
    slices one after another. The state is what ``Stream.read`` would checkpoint: the tracked
    ``get_updated_state`` result for legacy streams, the cursor's state for cursor-based ones,
    else the stream's ``state`` property; it is read only when the loop checkpoints, not after
    every record as airbyte-cdk does, since reading some streams' state costs time.
    """

    def __init__(self, stream: Stream, configured: ConfiguredAirbyteStream) -> None:
        super().__init__(configured)
        self.stream = stream
        self._cdk_cursor_field = list(configured.cursor_field or []) or None
        self._legacy = bool(stream.cursor_field) and type(stream).get_updated_state is not Stream.get_updated_state
        # source_framework's bases fetch a slice's records apart from moving their cursor.
        self._observed = callable(getattr(stream, "record_observer", None)) and callable(getattr(stream, "fetch_records", None))
        self.checkpoint_interval = stream.state_checkpoint_interval
        self.is_sorted = getattr(stream, "is_sorted", True) is not False
        transformer = stream.transformer
        if TransformConfig.NoTransform not in getattr(transformer, "_config", TransformConfig.NoTransform):
            schema = None

            def transform(data: dict[str, Any]) -> None:
                nonlocal schema
                if schema is None:
                    schema = self.json_schema()
                transformer.transform(data, schema)

            self.transform = transform
        elif isinstance(getattr(stream, "raw_pages", None), RawPages):  # (a transformed record is a copy)
            self.raw_pages = stream.raw_pages  # type: ignore[attr-defined]
        self._start_state: MutableMapping[str, Any] = {}
        self._tracker: MutableMapping[str, Any] = {}
        self._last_state: Mapping[str, Any] = {}
        self._reader: Any = None
        self._warned_no_cursor = False

    @property
    def name(self) -> str:
        return self.stream.name

    @property
    def namespace(self) -> str | None:
        # AbstractStream does not declare it; DefaultStream and the adapters have it.
        return getattr(self.stream, "namespace", None)

    def json_schema(self) -> Mapping[str, Any]:
        return self.stream.get_json_schema()

    def default_primary_key(self) -> list[list[str]]:
        return wrap_keys(self.stream.primary_key)

    def default_cursor_field(self) -> list[str]:
        cursor = self.stream.cursor_field
        return [cursor] if isinstance(cursor, str) and cursor else list(cursor or [])

    def source_defined_cursor(self) -> bool:
        # A stream that says False takes the cursor the catalog names (airbyte-cdk passes it to read_records).
        return super().source_defined_cursor() and getattr(self.stream, "source_defined_cursor", True) is not False

    def validate_state(self, state: Mapping[str, Any]) -> None:
        """Try the state on the stream, then leave the stream as it was: airbyte-cdk gives a stream
        its state only just before reading it, and a substream listed earlier may read its parents
        through this very object (source-github shares its parents so), which must not have it yet."""
        if "state" in dir(self.stream):  # as airbyte-cdk's AbstractSource decides
            with _attributes_restored(self.stream):
                self.stream.state = state  # type: ignore[attr-defined]

    def start(self, state: Mapping[str, Any]) -> None:
        stream = self.stream
        # What airbyte-cdk's AbstractSource._read_stream and Stream.read do before reading.
        stream.configured_json_schema = self.configured.stream.json_schema
        state = dict(state or {}) if self.incremental else {}
        if "state" in dir(stream):
            try:
                stream.state = state  # type: ignore[attr-defined]
            except KeyError as error:
                if not self._is_cursor_key(error) or value_at(state, self.cursor_field) is not None:
                    raise
                raise CursorFieldMissing(
                    f"stream '{self.name}': its state setter raised {error!r} on the state {short_state(state)}, which "
                    f"lacks the declared cursor field '{self._cursor_name()}' (a first sync starts from {{}}, as under "
                    f"airbyte-cdk); the setter must accept a state without it"
                ) from error
        try:
            start = stream.state  # type: ignore[attr-defined]  # some streams rework the state in their setter
        except AttributeError:
            start = state
        # airbyte-cdk hands read_records the very object the getter returned: a stream that moves
        # its state in place has later slices see what the earlier ones read.
        self._start_state = start if isinstance(start, MutableMapping) else dict(start or {})
        self._tracker = copy.deepcopy(self._start_state)
        self._last_state = copy.deepcopy(self._start_state)
        self._reader = self._checkpoint_reader()
        # A reader that picks the next slice from what the last one read (resumable full
        # refresh, substream cursors) must read one slice after another.
        independent_slices = type(self._reader) in (IncrementalCheckpointReader, FullRefreshCheckpointReader)
        self.concurrency_safe = independent_slices and getattr(self.stream, "concurrency_safe", False) is True
        if self.concurrency_safe and self.incremental and not (self._observed or self._legacy):
            self.concurrency_safe = False  # (``_state_moves_in_its_own_code`` says why)
            logger.warning(_state_moves_in_its_own_code(self.name))
        # source_framework's partitioned bases move one cursor per partition record by record, in
        # order: a partition that fails keeps its cursor at the last record it yielded.
        self.slices_fail_apart = self.failed_slices_covered = (
            independent_slices and self._observed and getattr(stream, "partitions_fail_apart", False) is True
            and getattr(stream, "is_sorted", False) is True
        )

    def _checkpoint_reader(self) -> Any:
        """airbyte-cdk's own checkpoint reader, noting on the way whether ``stream_slices``
        returned a list (its length is the number of slices, for the progress display)."""
        stream = self.stream
        slices_of = stream.stream_slices

        def counted(**kwargs: Any) -> Any:
            slices = slices_of(**kwargs)
            if isinstance(slices, Sized):
                self.slices_total = len(slices)
            return slices

        # An attribute on the instance hides the method for this one call only: the reader
        # must receive the slices the stream itself produced.
        stream.stream_slices = counted  # type: ignore[method-assign]
        try:
            return stream._get_checkpoint_reader(
                logger=stream.logger,
                cursor_field=self._cdk_cursor_field,
                sync_mode=self.configured.sync_mode,
                stream_state=self._start_state,
            )
        finally:
            del stream.stream_slices

    def slices(self) -> Iterator[SliceRead]:
        # One slice unless the stream makes its own; but a resumable full refresh's reader takes a
        # slice per page (the page token is the slice), how many is known only at the last page.
        paged = isinstance(self.stream.get_cursor(), ResumableFullRefreshCursor)
        if self.slices_total is None and type(self.stream).stream_slices is Stream.stream_slices and not paged:
            self.slices_total = 1
        while True:
            stream_slice = self._reader.next()
            if stream_slice is None:
                return
            yield _CdkSlice(self, stream_slice)

    def full_refresh_state(self) -> Mapping[str, Any]:
        """What the stream's own checkpoint reader holds once its slices ran out, as ``Stream.read``
        prints it last: a resumable full refresh's "complete" (per parent for a substream), else
        "no cursor"."""
        checkpoint = self._reader.get_checkpoint() if self._reader is not None else None
        return dict(checkpoint) if isinstance(checkpoint, Mapping) and checkpoint else FULL_REFRESH_STATE

    def _track(self, record: Mapping[str, Any]) -> None:
        try:
            self._tracker = self.stream.get_updated_state(self._tracker, record)
        except KeyError as error:
            if not self._is_cursor_key(error):
                raise
            raise self._records_lack_cursor(error, "get_updated_state()") from error

    def state(self) -> Mapping[str, Any] | None:
        if self._legacy:
            return self._tracker
        cursor = self.stream.get_cursor()
        if cursor is not None:
            value = cursor.get_stream_state()
        else:
            try:
                value = self.stream.state  # type: ignore[attr-defined]
            except AttributeError:
                return self._last_state
        # airbyte-cdk observes only non-empty states: an empty one keeps the previous.
        if value:
            self._last_state = value
        return self._last_state

    def read_slice(self, stream_slice: Mapping[str, Any] | None, pages: PageFetches | None = None) -> Iterable[Any]:
        arguments = {"sync_mode": self.configured.sync_mode, "cursor_field": self._cdk_cursor_field,
                     "stream_slice": stream_slice, "stream_state": self._start_state}
        if self._observed:  # source_framework's bases: they check their cursor field themselves
            return self.stream.fetch_records(**arguments, pages=pages)  # type: ignore[attr-defined]
        return self._cursor_checked(self.stream.read_records(**arguments), stream_slice)

    def _cursor_checked(self, items: Iterable[Any], stream_slice: Mapping[str, Any] | None) -> Iterator[Any]:
        """The slice's items as the stream yields them. A ``KeyError`` of the cursor field that the
        stream's code raises says the records lack it; an incremental slice whose records carry no
        cursor value at all gets a warning (once per stream): airbyte-cdk completes such a sync,
        so we do too, but its state cannot say how far the records were read."""
        path = self.cursor_field
        try:
            iterator = iter(items)
            if self.incremental and path and not self._warned_no_cursor:
                records = 0
                for item in iterator:
                    yield item
                    data = record_data(item)
                    if data is None:
                        continue
                    records += 1
                    if value_at(data, path) is not None:
                        break  # one value is enough: the rest of the slice goes straight through
                else:
                    if records and not self._warned_no_cursor:
                        self._warned_no_cursor = True
                        logger.warning(
                            "stream %s is read incrementally on the cursor field '%s', but none of the %d records of "
                            "its slice %s has a value for it: the state cannot say how far they were read (airbyte-cdk "
                            "does not stop on this either). Check the stream's cursor_field against its records",
                            self.name, self._cursor_name(), records, short_state(stream_slice or {}, 80),
                        )
                    return
            yield from iterator
        except KeyError as error:
            if not self._is_cursor_key(error):
                raise
            raise self._records_lack_cursor(error, "read_records()") from error

    def _cursor_name(self) -> str:
        return ".".join(self.cursor_field)

    def _is_cursor_key(self, error: KeyError) -> bool:
        return bool(error.args) and error.args[0] in self.cursor_field

    def _records_lack_cursor(self, error: KeyError, where: str) -> CursorFieldMissing:
        return CursorFieldMissing(
            f"stream '{self.name}': its {where} raised {error!r}: the records lack the declared cursor field "
            f"'{self._cursor_name()}'. Every record of an incremental stream needs it (or declare as cursor_field a "
            f"field the records have)"
        )

    def close_slice(self) -> None:
        # Resumable full-refresh readers pick their next page from what they observed here.
        self.stream._observe_state(self._reader, self._tracker if self._legacy else None)


def _state_moves_in_its_own_code(name: str) -> str:
    """Why a ``Stream`` that declares ``concurrency_safe`` is read one slice after another anyway."""
    return (
        f"stream {name} declares concurrency_safe = True, but its state is moved by its own code (read_records "
        f"or a state property, as with IncrementalMixin or CheckpointMixin): read in worker threads, that code runs "
        f"ahead of the records the loop has committed, and a checkpoint would print a STATE past records not yet "
        f"written. Its slices are read one after another. To read ahead, move the state apart from reading "
        f"(source_framework's IncrementalHttpStream) or with airbyte-cdk's get_updated_state"
    )


class _CdkSlice(SliceRead):
    def __init__(self, adapter: CdkStreamAdapter, stream_slice: Mapping[str, Any] | None) -> None:
        self._adapter = adapter
        self._slice = stream_slice
        self.partition = partition_key(stream_slice)
        if adapter._observed:
            self.observe = adapter.stream.record_observer(stream_slice)  # type: ignore[attr-defined]
        elif adapter._legacy and adapter.incremental:
            self.observe = adapter._track

    def items(self, pages: PageFetches | None = None) -> Iterable[Any]:
        return self._adapter.read_slice(self._slice, pages)

    def close(self) -> None:
        self._adapter.close_slice()


# -- AbstractStream -------------------------------------------------------------------------


class ConcurrentStreamAdapter(StreamAdapter):
    """An ``AbstractStream`` (``DefaultStream``), read partition by partition as airbyte-cdk's
    concurrent framework reads it: the cursor observes every record and closes every partition.

    Its state moves only when a partition closes (a concurrent cursor knows nothing finer), so
    it has no checkpoints inside a partition; airbyte-cdk's own schedule has none either.
    """

    def __init__(
        self,
        stream: AbstractStream,
        configured: ConfiguredAirbyteStream,
        rebuild: Callable[[Mapping[str, Any]], AbstractStream] | None,
        built_with: Mapping[str, Any],
    ) -> None:
        super().__init__(configured)
        self.stream = stream
        self._rebuild = rebuild
        self._built_with = dict(built_with) if self.incremental else {}
        # Partitions are airbyte-cdk's unit of concurrent reading; their cursor observes apart.
        self.concurrency_safe = True
        self.syncs_alongside_others = True
        # airbyte-cdk's concurrent framework reports a failed partition and reads the others.
        self.slices_fail_apart = True

    @property
    def name(self) -> str:
        return self.stream.name

    @property
    def namespace(self) -> str | None:
        # AbstractStream does not declare it; DefaultStream and the adapters have it.
        return getattr(self.stream, "namespace", None)

    def json_schema(self) -> Mapping[str, Any]:
        return self.stream.get_json_schema()

    def default_primary_key(self) -> list[list[str]]:
        return [list(k) for k in (self.stream.as_airbyte_stream().source_defined_primary_key or [])]

    def default_cursor_field(self) -> list[str]:
        return [self.stream.cursor_field] if self.stream.cursor_field else []

    def validate_state(self, state: Mapping[str, Any]) -> None:
        self._build_with(state)  # its cursor parses the state as it is built

    def start(self, state: Mapping[str, Any]) -> None:
        """A concurrent stream takes its state when it is built: build it anew with ``state``."""
        self._build_with(dict(state or {}) if self.incremental else {})

    def _build_with(self, state: Mapping[str, Any]) -> None:
        try:
            if self._rebuild is None:
                raise StateNotApplicable(
                    f"stream '{self.name}' belongs to a source that takes its state when it is constructed, and this "
                    f"sync must start from {short_state(state)}; construct the source with that state (as its own main "
                    f"does with --state) or use a declarative source, whose states the runtime sets itself"
                )
            self.stream = concurrent_stream(self._rebuild(state))
        except StateNotApplicable:
            if dict(state) != self._built_with:
                raise  # the stream as built is good only for the state it was built with

    def slices(self) -> Iterator[SliceRead]:
        for partition in self.stream.generate_partitions():
            yield _PartitionSlice(self.stream, partition)

    def state(self) -> Mapping[str, Any] | None:
        return dict(self.stream.cursor.state)

    def finish(self) -> None:
        self.stream.cursor.ensure_at_least_one_state_emitted()


class _PartitionSlice(SliceRead):
    def __init__(self, stream: AbstractStream, partition: Any) -> None:
        self._stream = stream
        self._partition = partition
        self.partition = partition_key(partition.to_slice())
        self.observe = stream.cursor.observe

    def items(self, pages: PageFetches | None = None) -> Iterable[Any]:
        return self._partition.read()  # a partition reads its own pages (airbyte-cdk's retriever)

    def close(self) -> None:
        self._stream.cursor.close_partition(self._partition)


@contextmanager
def _attributes_restored(stream: Any) -> Iterator[None]:
    """The stream's attributes as they were before the block: containers copied whole (a setter may
    change a dict in place), any other object kept as the very same one (a parent stream shared
    with the catalog must stay shared)."""
    saved: dict[str, Any] = {}
    for name, value in vars(stream).items():
        try:
            saved[name] = copy.deepcopy(value) if isinstance(value, (dict, list, set)) else value
        except Exception:  # a container holding what cannot be copied
            saved[name] = value
    try:
        yield
    finally:
        vars(stream).clear()
        vars(stream).update(saved)


# -- the source around its streams ----------------------------------------------------------


class MessageDrain:
    """Messages a source's components emit outside the records a stream yields.

    airbyte-cdk components put LOG, TRACE and STATE messages into the source's message
    repository: concurrent cursors their states, declarative retrievers whatever a page carries
    that is not a record. airbyte-cdk's entrypoint prints them between records; the read loop
    takes them from here, in the order they were emitted. A declarative source's repository puts
    them straight on its concurrent framework's queue, which nothing else reads here.
    """

    def __init__(self, source: Any) -> None:
        repository = getattr(source, "_message_repository", None) or getattr(source, "message_repository", None)
        self._repository = repository
        self._queue = repository._queue if isinstance(repository, ConcurrentMessageRepository) else None
        # Streams synced at once drain from their own threads, and airbyte-cdk's in-memory
        # repository cannot be consumed by two at a time (``while deque: deque.popleft()``).
        self._lock = threading.Lock()

    def __call__(self) -> Iterator[Any]:
        with self._lock:  # taken whole, then handed on: the lock is not held while a stream acts on them
            messages = list(self._take())
        yield from messages

    def _take(self) -> Iterator[Any]:
        if self._queue is not None:
            while True:
                try:
                    item = self._queue.get_nowait()
                except Empty:
                    break
                yield item
        if self._repository is not None:
            yield from self._repository.consume_queue()


def manifest_concurrency(source: Any, config: Mapping[str, Any]) -> int | None:
    """The most partitions airbyte-cdk reads at once for a declarative ``source``: its manifest's
    ``concurrency_level`` (``default_concurrency``, interpolated against the config and capped
    by ``max_concurrency``), which ``ConcurrentDeclarativeSource`` sizes its worker pool with.
    The manifest's author set it for the API (rate limits, fair use); a sync here reads no more
    slices at once than that. None for a source that declares none."""
    manifest = getattr(source, "resolved_manifest", None)
    declared = manifest.get("concurrency_level") if isinstance(manifest, Mapping) else None
    if not isinstance(declared, Mapping):
        return None
    level = ConcurrencyLevel(
        default_concurrency=declared["default_concurrency"],
        max_concurrency=declared.get("max_concurrency"),
        config=dict(config),
        parameters=declared.get("$parameters") or {},
    ).get_concurrency_level()
    return max(1, int(level))


def short_state(state: Mapping[str, Any], limit: int = 160) -> str:
    text = repr(dict(state))
    return text if len(text) <= limit else text[:limit] + "..."
