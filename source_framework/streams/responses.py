"""``page_json`` parses each page once for ``parse_response`` and ``next_page_token`` alike; ``records_path`` finds records."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

import orjson
import requests

from source_framework.helpers.raw_pages import RawPages
from source_framework.helpers.records_path import records_at, records_path_keys
from source_framework.streams.retry import RetryAfterBackoff

_PARSED = "_source_framework_json"
_BODY = "_source_framework_body"


def page_json(response: requests.Response) -> Any:
    """The response's JSON body, parsed once and kept on the response; a body orjson refuses goes to ``response.json()`` for its error."""
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
    """``parse_response`` for records listed in each page's JSON body: set ``records_path`` (a key, ``"a.b"``, a list, or ``""``)."""

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
            if raw is not None:
                pages.add(raw, items)
        yield from items

    @property
    def raw_pages(self) -> RawPages | None:
        """The parsed pages when records are their items unchanged (no connector method between parser and reader); else None."""
        path = records_path_keys(self.records_path)
        if path is None or not _records_unchanged(type(self)):
            return None
        if "_raw_pages" not in self.__dict__:
            self.__dict__["_raw_pages"] = RawPages(path)
        pages: RawPages = self.__dict__["_raw_pages"]
        return pages


RECORD_PATH_METHODS = ("read_records", "fetch_records", "_read_pages", "_read_single_page")
FRAMEWORK_MODULES = ("airbyte_cdk.", "source_framework.streams.")


def _records_unchanged(cls: type) -> bool:
    if cls.parse_response is not RecordsAtPath.parse_response:  # type: ignore[attr-defined]
        return False
    for name in RECORD_PATH_METHODS:
        method = getattr(cls, name, None)
        if method is not None and not getattr(method, "__module__", "").startswith(FRAMEWORK_MODULES):
            return False
    return True
