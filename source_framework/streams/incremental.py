"""The incremental stream base: a cursor the framework keeps, updated before each record is handed on."""

from __future__ import annotations

import difflib
import json
import os
from abc import ABC
from collections.abc import Callable, Iterable, Iterator, Mapping, MutableMapping
from typing import Any, final

import requests
from airbyte_cdk.models import SyncMode
from airbyte_cdk.sources.streams.core import StreamData
from airbyte_cdk.sources.streams.http import HttpStream

from source_framework.helpers.defining_file import defining_folder
from source_framework.streams.cursor import (
    CursorValueError,
    cursor_sort_key,
    is_datetime_key,
    short_repr,
)
from source_framework.streams.pages import PageFetches
from source_framework.streams.responses import RecordsAtPath


class CursorWentBackwards(Exception):
    """A stream declared sorted produced a record older than one before it in the same slice."""


class CursorFieldMissing(KeyError):
    """A record has no ``cursor_field`` at all: the cursor could never move past it."""

    def __str__(self) -> str:
        return str(self.args[0])


class IncrementalHttpStream(RecordsAtPath, HttpStream, ABC):
    """An ``HttpStream`` whose state is the highest ``cursor_field`` value seen, updated before each record is handed on.

    Set ``cursor_field`` (optionally ``state_checkpoint_interval``, ``is_sorted``, ``json_schema``, ``concurrency_safe``);
    override ``parse_response`` (or set ``records_path``) and the request methods as with any ``HttpStream``.
    A missing ``cursor_field`` or a sorted cursor going backwards stops the stream rather than lose records.
    """

    cursor_field: str = ""
    is_sorted: bool = True
    state_checkpoint_interval: int | None = None
    json_schema: Mapping[str, Any] | None = None
    concurrency_safe: bool = True

    #: Attributes the runtime and bases read; a new attribute close to one of these is taken for a misspelling.
    FRAMEWORK_ATTRIBUTES = (
        "cursor_field", "is_sorted", "state_checkpoint_interval", "json_schema", "primary_key",
        "window_step", "lookback", "url_base", "page_size", "namespace", "transformer", "concurrency_safe",
        "partitions_fail_alone", "partitions_fail_apart", "records_path",
    )

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        for name in vars(cls):
            if name.startswith("_") or name in cls.FRAMEWORK_ATTRIBUTES or any(name in vars(b) for b in cls.__mro__[1:]):
                continue
            close = difflib.get_close_matches(name, cls.FRAMEWORK_ATTRIBUTES, n=1, cutoff=0.85)
            if close:
                raise TypeError(
                    f"{cls.__name__}.{name}: the framework reads no attribute of that name; did you mean "
                    f"'{close[0]}'? (rename it, or prefix it with _ if it is your own)"
                )

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._cursor_value: Any = None
        self._cursor_key: Any = None
        self._schema_from_file: Mapping[str, Any] | None = None

    @property
    def cursor_value(self) -> Any:
        """The highest cursor value seen so far (or restored from state), ``None`` before any."""
        return self._cursor_value

    @property
    def state(self) -> MutableMapping[str, Any]:
        if self._cursor_value is None:
            return {}
        return {self.cursor_field: self._cursor_value}

    @state.setter
    def state(self, value: Mapping[str, Any]) -> None:
        if not value:
            self._cursor_value, self._cursor_key = None, None
            return
        if not isinstance(value, Mapping) or self.cursor_field not in value:
            raise CursorValueError(
                f"state for stream '{self.name}' must be an object with the key "
                f"'{self.cursor_field}', got {short_repr(value)}"
            )
        raw = value[self.cursor_field]
        key = cursor_sort_key(raw, stream=self.name)
        if self._cursor_is_datetime() and not is_datetime_key(key):
            raise CursorValueError(
                f"state for stream '{self.name}': '{self.cursor_field}' is a date-time field but "
                f"the value {short_repr(raw)} cannot be parsed as an ISO 8601 date-time"
            )
        self._cursor_value, self._cursor_key = raw, key

    def _cursor_is_datetime(self) -> bool:
        properties = self.get_json_schema().get("properties", {})
        return properties.get(self.cursor_field, {}).get("format") == "date-time"

    # The CDK's is wrapped in lru_cache, which mypy sees as a different signature.
    def get_json_schema(self) -> Mapping[str, Any]:  # type: ignore[override]
        if self.json_schema is not None:
            return self.json_schema
        schema: Mapping[str, Any] | None = getattr(self, "_schema_from_file", None)
        if schema is None:
            folder = defining_folder(type(self))
            beside = os.path.join(folder, "schemas", f"{self.name}.json") if folder else ""
            if beside and os.path.isfile(beside):
                with open(beside, encoding="utf-8") as handle:
                    schema = json.load(handle)
            else:
                schema = super().get_json_schema()
            self._schema_from_file = schema
        return schema

    @final
    def read_records(
        self,
        sync_mode: SyncMode,
        cursor_field: list[str] | None = None,
        stream_slice: Mapping[str, Any] | None = None,
        stream_state: Mapping[str, Any] | None = None,
    ) -> Iterable[StreamData]:
        """The framework's: moves the cursor before each record is handed on. Override ``parse_response`` instead."""
        observe = self.record_observer(stream_slice)
        for record in self.fetch_records(sync_mode, cursor_field, stream_slice, stream_state):
            observe(record)
            yield record

    @final
    def fetch_records(
        self,
        sync_mode: SyncMode,
        cursor_field: list[str] | None = None,
        stream_slice: Mapping[str, Any] | None = None,
        stream_state: Mapping[str, Any] | None = None,
        pages: PageFetches | None = None,
    ) -> Iterable[StreamData]:
        """The slice's records, cursor untouched: worker threads fetch this way and the runtime moves the cursor in slice order."""
        if pages is None or type(self).page_tokens is IncrementalHttpStream.page_tokens:
            return HttpStream.read_records(self, sync_mode, cursor_field, stream_slice, stream_state)
        return self._read_pages_at_once(stream_slice, stream_state or {}, pages)

    def page_tokens(self, response: requests.Response) -> Iterable[Mapping[str, Any]] | None:
        """Every page token after a slice's first page when it tells them all (fetched at once); None: follow ``next_page_token``."""
        return None

    def _read_pages_at_once(
        self, stream_slice: Mapping[str, Any] | None, stream_state: Mapping[str, Any], pages: PageFetches
    ) -> Iterator[StreamData]:
        def page(token: Mapping[str, Any] | None) -> list[StreamData]:
            _, response = self._fetch_next_page(stream_slice, stream_state, token)
            return list(self.parse_response(response, stream_slice=stream_slice, stream_state=stream_state))

        _, first = self._fetch_next_page(stream_slice, stream_state, None)
        yield from self.parse_response(first, stream_slice=stream_slice, stream_state=stream_state)
        tokens = self.page_tokens(first)
        if tokens is not None:
            for records in pages.map_in_order(page, tokens):
                yield from records
            return
        token = self.next_page_token(first)
        while token:
            _, response = self._fetch_next_page(stream_slice, stream_state, token)
            yield from self.parse_response(response, stream_slice=stream_slice, stream_state=stream_state)
            token = self.next_page_token(response)

    @final
    def record_observer(self, stream_slice: Mapping[str, Any] | None) -> Callable[[Any], None]:
        """A callable that checks each record of ``stream_slice`` and moves the cursor; one per slice to check sort order."""
        field, check_order, name = self.cursor_field, self.is_sorted, self.name
        advance = self._advancer(stream_slice)
        previous: Any = None

        def observe(record: Any) -> None:
            nonlocal previous
            if type(record) is not dict and not isinstance(record, Mapping):
                return
            value = record.get(field)
            if value is None:
                if field not in record:
                    raise CursorFieldMissing(
                        f"stream '{name}': a record has no '{field}' field, the stream's cursor_field, so the "
                        f"state could never move past it (the record's fields: {', '.join(sorted(map(str, record))[:20])}). "
                        f"Set cursor_field to a field the records carry."
                    )
                return
            key = cursor_sort_key(value, stream=name)
            if check_order:
                if previous is not None and key < previous:
                    raise CursorWentBackwards(
                        f"stream '{name}' is declared sorted by '{field}', but a record with "
                        f"{field}={value!r} came after one with a later value in the same slice. "
                        f"A state past the later value would skip this record on resume. If the API "
                        f"does not sort, set is_sorted = False on the stream (it then checkpoints "
                        f"only when a slice completes)."
                    )
                previous = key
            advance(value, key)

        return observe

    def _advancer(self, stream_slice: Mapping[str, Any] | None) -> Callable[[Any, Any], None]:
        return self._advance

    def _advance(self, value: Any, key: Any) -> None:
        if self._cursor_key is None or key > self._cursor_key:
            self._cursor_value, self._cursor_key = value, key
