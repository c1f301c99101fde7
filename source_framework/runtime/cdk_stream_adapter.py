"""``CdkStreamAdapter``: an airbyte-cdk ``Stream`` read the way ``Stream.read`` reads it."""

from __future__ import annotations

import copy
import logging
from collections.abc import Iterable, Iterator, Mapping, MutableMapping, Sized
from contextlib import contextmanager
from typing import Any

from airbyte_cdk.models import ConfiguredAirbyteStream
from airbyte_cdk.sources.streams import Stream
from airbyte_cdk.sources.streams.checkpoint import (
    FullRefreshCheckpointReader,
    IncrementalCheckpointReader,
    ResumableFullRefreshCursor,
)
from airbyte_cdk.sources.utils.transform import TransformConfig

from source_framework.helpers.raw_pages import RawPages
from source_framework.runtime.stream_adapter_base import (
    FULL_REFRESH_STATE,
    CursorFieldMissing,
    SliceRead,
    StreamAdapter,
    record_data,
    short_state,
    value_at,
    wrap_keys,
)
from source_framework.streams.cursor import partition_key
from source_framework.streams.pages import PageFetches

logger = logging.getLogger("source_framework.read")


class CdkStreamAdapter(StreamAdapter):
    """A ``Stream`` read as ``Stream.read`` reads it, but its state is read only at checkpoints: some are costly to read."""

    stream: Stream

    def __init__(self, stream: Stream, configured: ConfiguredAirbyteStream) -> None:
        super().__init__(stream, configured)
        self._cdk_cursor_field = list(configured.cursor_field or []) or None
        self._legacy = bool(stream.cursor_field) and type(stream).get_updated_state is not Stream.get_updated_state
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

    def default_primary_key(self) -> list[list[str]]:
        return wrap_keys(self.stream.primary_key)

    def default_cursor_field(self) -> list[str]:
        cursor = self.stream.cursor_field
        return [cursor] if isinstance(cursor, str) and cursor else list(cursor or [])

    def source_defined_cursor(self) -> bool:
        # A stream that says False takes the cursor the catalog names (airbyte-cdk passes it to read_records).
        return super().source_defined_cursor() and getattr(self.stream, "source_defined_cursor", True) is not False

    def validate_state(self, state: Mapping[str, Any]) -> None:
        """Try the state on the stream, then restore it: a substream listed earlier may read its parents through this
        very object (source-github shares them), which must not have the state yet."""
        if "state" in dir(self.stream):  # as airbyte-cdk's AbstractSource decides
            with _attributes_restored(self.stream):
                self.stream.state = state  # type: ignore[attr-defined]

    def start(self, state: Mapping[str, Any]) -> None:
        stream = self.stream
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
        # airbyte-cdk hands read_records the very object the getter returned (some streams move it in place).
        self._start_state = start if isinstance(start, MutableMapping) else dict(start or {})
        self._tracker = copy.deepcopy(self._start_state)
        self._last_state = copy.deepcopy(self._start_state)
        self._reader = self._checkpoint_reader()
        # A reader that picks the next slice from what the last one read must read one slice after another.
        independent_slices = type(self._reader) in (IncrementalCheckpointReader, FullRefreshCheckpointReader)
        self.concurrency_safe = independent_slices and getattr(self.stream, "concurrency_safe", False) is True
        if self.concurrency_safe and self.incremental and not (self._observed or self._legacy):
            self.concurrency_safe = False
            logger.warning(_state_moves_in_its_own_code(self.name))
        # A partition that fails keeps its cursor at the last record it yielded (source_framework's partitioned bases).
        fail_alone = getattr(stream, "partitions_fail_apart", None)  # (the old name, still honoured)
        if fail_alone is None:
            fail_alone = getattr(stream, "partitions_fail_alone", False)
        self.slices_fail_alone = self.failed_slices_covered = (
            independent_slices and self._observed and fail_alone is True
            and getattr(stream, "is_sorted", False) is True
        )

    def _checkpoint_reader(self) -> Any:
        stream = self.stream
        slices_of = stream.stream_slices

        def counted(**kwargs: Any) -> Any:
            slices = slices_of(**kwargs)
            if isinstance(slices, Sized):
                self.slices_total = len(slices)
            return slices

        # An instance attribute hides the method for this one call, so the reader gets the stream's own slices.
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
        # A resumable full refresh's reader takes a slice per page, so its count is known only at the last page.
        paged = isinstance(self.stream.get_cursor(), ResumableFullRefreshCursor)
        if self.slices_total is None and type(self.stream).stream_slices is Stream.stream_slices and not paged:
            self.slices_total = 1
        while True:
            stream_slice = self._reader.next()
            if stream_slice is None:
                return
            yield _CdkSlice(self, stream_slice)

    def full_refresh_state(self) -> Mapping[str, Any]:
        """The final state ``Stream.read`` prints: the checkpoint reader's, else "no cursor"."""
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


@contextmanager
def _attributes_restored(stream: Any) -> Iterator[None]:
    """Restore the stream's attributes after the block, keeping shared objects (a parent stream) the same objects."""
    saved: dict[str, Any] = {}
    for name, value in vars(stream).items():
        try:
            saved[name] = copy.deepcopy(value) if isinstance(value, (dict, list, set)) else value
        except Exception:
            saved[name] = value
    try:
        yield
    finally:
        vars(stream).clear()
        vars(stream).update(saved)

