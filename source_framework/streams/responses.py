"""Reading a response body once.

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
"""

from __future__ import annotations

from typing import Any

import orjson
import requests

_PARSED = "_source_framework_json"


def page_json(response: requests.Response) -> Any:
    """The response's JSON body, parsed on the first call and kept on the response.

    A body orjson refuses is handed to ``response.json()``, so the error is the one
    ``requests`` raises (and a body only the standard library accepts, such as ``NaN``, parses).
    """
    parsed = getattr(response, _PARSED, _PARSED)
    if parsed is _PARSED:
        try:
            parsed = orjson.loads(response.content)
        except orjson.JSONDecodeError:
            parsed = response.json()
        setattr(response, _PARSED, parsed)
    return parsed
