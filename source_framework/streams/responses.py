"""Reading a response body once, and the records a page holds at a path.

An ``HttpStream`` looks at each page twice: ``parse_response`` for the records and
``next_page_token`` for the next page. ``response.json()`` parses the body anew each time with
the standard library's decoder, which on a 1,000-record page costs more than everything else
the read loop does with those records. ``page_json`` parses it once, with orjson, and hands
both callers the same object::

    from source_framework import page_json

    def parse_response(self, response, **kwargs):
        yield from page_json(response)["data"]

    def next_page_token(self, response):
        return page_json(response).get("next_cursor")

The object is shared: read it, do not change it (a ``parse_response`` that pops ``"data"``
would hide it from ``next_page_token``).

Where the records are a list in the body, as the API sent them, ``records_path`` says where,
and the stream writes no ``parse_response`` at all (``RecordsAtPath``, which the framework's
bases include)::

    class Orders(DateWindowStream):
        records_path = "data"              # {"data": [...], "next_cursor": ...}

The destination then knows each record is an item of a page it can see whole (``RawPages``):
the Spark destination converts those records from the page's bytes in a process of its own,
leaving the reading thread free (``destinations/spark/page_conversion.py``).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

import orjson
import requests

from source_framework.helpers.raw_pages import RawPages
from source_framework.helpers.records_path import records_at, records_path_keys
from source_framework.streams.retry import RetryAfterBackoff

_PARSED = "_source_framework_json"
_BODY = "_source_framework_body"  # the bytes orjson parsed; absent where another parser was needed


def page_json(response: requests.Response) -> Any:
    """The response's JSON body, parsed on the first call and kept on the response.

    A body orjson refuses is handed to ``response.json()``, so the error is the one
    ``requests`` raises (and a body only the standard library accepts, such as ``NaN``, parses).
    """
    parsed = getattr(response, _PARSED, _PARSED)
    if parsed is _PARSED:
        content = response.content
        try:
            parsed = orjson.loads(content)
        except orjson.JSONDecodeError:
            parsed = response.json()
        else:
            setattr(response, _BODY, content)
        setattr(response, _PARSED, parsed)
    return parsed


class RecordsAtPath(RetryAfterBackoff):
    """``parse_response`` for streams whose records are a list in each page's JSON body, as the
    API sent them: set ``records_path`` (a key, a dotted path ``"result.items"``, or a list of
    keys; ``""`` for a body that is the list itself). Mixed into ``HttpStream`` subclasses (the
    framework's bases include it)::

        class Products(RecordsAtPath, HttpStream):
            records_path = "data"

    The framework's bases get their ``Retry-After`` handling from here too (``RetryAfterBackoff``):
    a 429 or 503 waits what the API asks.

    A stream that changes its records overrides ``parse_response`` instead (and then its records
    are converted in the reading process, as any stream's; so are those of a stream with a
    ``read_records`` or page loop of its own).
    """

    records_path: str | Sequence[str] | None = None

    def parse_response(self, response: requests.Response, **kwargs: Any) -> Iterable[Any]:
        path = records_path_keys(self.records_path)
        if path is None:
            raise NotImplementedError(f"{type(self).__name__}: set records_path, or override parse_response")
        body = page_json(response)
        items = records_at(body, path)
        pages = self.__dict__.get("_raw_pages")
        if pages is not None and pages.enabled:
            raw = getattr(response, _BODY, None)
            if raw is not None:  # parsed by orjson: the same bytes give the same records again
                pages.add(raw, items)
        yield from items

    @property
    def raw_pages(self) -> RawPages | None:
        """The pages this stream parsed, where its records are their items unchanged: its
        ``records_path`` is set, ``parse_response`` is this one, and no method between it and the
        reader is the connector's own (``read_records``, airbyte-cdk's page loops). None otherwise."""
        path = records_path_keys(self.records_path)
        if path is None or not _records_unchanged(type(self)):
            return None
        if "_raw_pages" not in self.__dict__:
            self.__dict__["_raw_pages"] = RawPages(path)
        pages: RawPages = self.__dict__["_raw_pages"]
        return pages


#: The methods a record passes through from ``parse_response`` to the reader of the stream.
RECORD_PATH_METHODS = ("read_records", "fetch_records", "_read_pages", "_read_single_page")
#: Where the versions of them that hand records on as they are come from.
FRAMEWORK_MODULES = ("airbyte_cdk.", "source_framework.streams.")


def _records_unchanged(cls: type) -> bool:
    """Whether ``cls`` yields its pages' items as ``RecordsAtPath.parse_response`` gives them: no
    method on their way is the connector's own (one that may change a record where it lies)."""
    if cls.parse_response is not RecordsAtPath.parse_response:  # type: ignore[attr-defined]
        return False
    for name in RECORD_PATH_METHODS:
        method = getattr(cls, name, None)
        if method is not None and not getattr(method, "__module__", "").startswith(FRAMEWORK_MODULES):
            return False
    return True
