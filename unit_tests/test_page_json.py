"""``page_json``: a page's body parsed once, the same answer as ``response.json()``."""

from __future__ import annotations

import math

import pytest
import requests

from source_framework import page_json


def response_with(body: bytes) -> requests.Response:
    response = requests.Response()
    response._content = body
    response.status_code = 200
    response.encoding = "utf-8"
    return response


def test_the_body_is_parsed_once_and_equals_what_requests_parses():
    response = response_with(b'{"data": [{"id": 1, "name": "\\u00e9"}], "next_cursor": "abc", "n": 1.5}')
    first = page_json(response)
    assert first == response.json()
    assert page_json(response) is first  # parse_response and next_page_token share one parse


def test_a_body_orjson_refuses_gets_the_error_or_the_value_requests_gives():
    assert math.isnan(page_json(response_with(b'{"value": NaN}'))["value"])  # only the standard library reads NaN
    with pytest.raises(requests.exceptions.JSONDecodeError):
        page_json(response_with(b"<html>not json</html>"))
