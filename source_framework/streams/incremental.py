"""The incremental stream base: a cursor the framework keeps for you.

Declare ``cursor_field`` and the stream's ``state`` is ``{cursor_field: <highest value seen>}``,
updated *before* each record is handed on, so whatever checkpoint the runtime takes after a
record already covers it::

    class Users(IncrementalHttpStream):
        url_base = "https://api.example.com/"
        cursor_field = "updatedAt"
        primary_key = "id"

        def path(self, **kwargs):
            return "users"

        def request_params(self, stream_state=None, stream_slice=None, next_page_token=None):
            # stream_state: the state when the stream started, fixed while pages are followed
            since = (stream_state or {}).get("updatedAt", "2025-01-01T00:00:00Z")
            return {"since": since, **(next_page_token or {})}

        def parse_response(self, response, **kwargs):
            yield from response.json()["data"]

The ``state`` getter and setter follow airbyte-cdk's ``CheckpointMixin``, so the same class runs
under the CDK's own ``read`` and under ours. Authors who need another state shape override
``state`` (both halves) as they would with the CDK.
"""

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
    """An ``HttpStream`` whose state is the highest ``cursor_field`` value seen.

    Class attributes users override:

    - ``cursor_field``: the record field that orders the stream (required).
    - ``state_checkpoint_interval``: checkpoint every N records within a slice (``None``: only
      after each slice).
    - ``is_sorted``: records of a slice arrive in ascending cursor order (default). A record whose
      cursor goes backwards then stops the stream with ``CursorWentBackwards``: a checkpoint
      already past it would lose it on resume. ``False``: the runtime checkpoints only when a
      slice (or the stream) completes and ignores ``state_checkpoint_interval``.
    - ``json_schema``: the stream's JSON schema (its table's columns). Without it, the schema is
      read from ``schemas/<stream name>.json`` beside the module that defines the class (a
      script's folder too), else from the package, as airbyte-cdk does.
    - ``records_path``: where the records are in each page's JSON body (``"data"``, ``"result.items"``),
      as the API sent them; the stream then needs no ``parse_response`` (``RecordsAtPath``), and
      the Spark destination converts its records from the pages' bytes in a process of its own.
    - ``concurrency_safe``: the runtime may fetch several slices at once, in worker threads
      (``--concurrency``); the records still reach the table, and the cursor moves, in slice
      order. Set ``False`` if the request or parse methods keep per-slice data on ``self``.

    A method users may override: ``page_tokens(response)``, every page token after a slice's first
    page when that page tells them all (``streams.pages``): the runtime then fetches those pages
    at once; the default (None) follows ``next_page_token`` one page at a time.

    A record without the ``cursor_field`` key stops the stream with ``CursorFieldMissing`` (a
    misspelled field would otherwise leave the state where it was forever); a record whose
    cursor value is null is written and does not move the state.

    ``read_records`` is the framework's (``@final``): it keeps the cursor. Set ``records_path`` or
    override ``parse_response``, and override the request methods, as with any ``HttpStream``. A class attribute
    that looks like a misspelling of one the runtime reads (``state_checkpoint_intervals``)
    stops the class definition with a ``TypeError`` naming the right one.
    """

    cursor_field: str = ""
    is_sorted: bool = True
    state_checkpoint_interval: int | None = None
    json_schema: Mapping[str, Any] | None = None
    concurrency_safe: bool = True

    #: What the runtime and these bases read from a stream class, and airbyte-cdk's ``HttpStream``
    #: declares for it (``page_size``, ``url_base``); a new attribute close to one of these is taken
    #: for a misspelling.
    FRAMEWORK_ATTRIBUTES = (
        "cursor_field", "is_sorted", "state_checkpoint_interval", "json_schema", "primary_key",
        "window_step", "lookback", "url_base", "page_size", "namespace", "transformer", "concurrency_safe",
        "partitions_fail_alone", "partitions_fail_apart", "records_path",
    )

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        for name in vars(cls):
            if name.startswith("_") or name in cls.FRAMEWORK_ATTRIBUTES or any(name in vars(b) for b in cls.__mro__[1:]):
                continue  # private, one the framework reads, or one a base already has
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

    # -- state, IncrementalMixin style -----------------------------------------------------------

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

    # -- reading ---------------------------------------------------------------------------------

    @final
    def read_records(
        self,
        sync_mode: SyncMode,
        cursor_field: list[str] | None = None,
        stream_slice: Mapping[str, Any] | None = None,
        stream_state: Mapping[str, Any] | None = None,
    ) -> Iterable[StreamData]:
        """The framework's: reads the slice's pages (``HttpStream``) and moves the cursor before
        each record is handed on. Do not override it; override ``parse_response``."""
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
        """The slice's records, cursor untouched. The runtime reads several slices at once this
        way, in worker threads, and moves the cursor with ``record_observer`` in slice order;
        ``pages`` lets a stream that overrides ``page_tokens`` fetch a slice's pages at once."""
        if pages is None or type(self).page_tokens is IncrementalHttpStream.page_tokens:
            return HttpStream.read_records(self, sync_mode, cursor_field, stream_slice, stream_state)
        return self._read_pages_at_once(stream_slice, stream_state or {}, pages)

    def page_tokens(self, response: requests.Response) -> Iterable[Mapping[str, Any]] | None:
        """Every page token after ``response``, a slice's first page, when that page tells them
        all (page numbers with a total, offsets with a total count); None when it does not: the
        pages are then followed with ``next_page_token``. Each token is handed to the request
        methods as ``next_page_token`` would be, and pages must not depend on one another."""
        return None

    def _read_pages_at_once(
        self, stream_slice: Mapping[str, Any] | None, stream_state: Mapping[str, Any], pages: PageFetches
    ) -> Iterator[StreamData]:
        """airbyte-cdk's page loop (``HttpStream._read_pages``), with the pages after the first
        fetched through ``pages`` when the first one names them."""

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
        """A callable that checks each record of ``stream_slice`` and moves the cursor past it.

        One per slice: it remembers the slice's previous record to check the sort order."""
        field, check_order, name = self.cursor_field, self.is_sorted, self.name
        advance = self._advancer(stream_slice)
        previous: Any = None  # sort key of the slice's previous record

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
        """What moves the cursor for a record of ``stream_slice`` (partitioned streams: the
        slice's partition's cursor)."""
        return self._advance

    def _advance(self, value: Any, key: Any) -> None:
        if self._cursor_key is None or key > self._cursor_key:
            self._cursor_value, self._cursor_key = value, key
