"""Where a page's records are (``records_path``), which streams' records are their pages' items
unchanged (``RecordsAtPath.raw_pages``), and how a sink finds the page of a record (``RawPages``)."""

from __future__ import annotations

from typing import Any

import orjson
import pytest
import requests

from source_framework import HttpStream, IncrementalHttpStream, RecordsAtPath, page_json
from source_framework.helpers.raw_pages import RawPages
from source_framework.helpers.records_path import records_at, records_path_keys


def response(body: Any) -> requests.Response:
    answer = requests.Response()
    answer._content = body if isinstance(body, bytes) else orjson.dumps(body)
    answer.status_code = 200
    return answer


def test_records_path_reads_as_airbyte_cdks_record_extractor_does():
    body = {"data": [{"id": 1}], "result": {"items": [{"id": 2}], "one": {"id": 3}, "none": None}}
    assert records_path_keys("data") == ("data",)
    assert records_path_keys("result.items") == ("result", "items")
    assert records_path_keys(["result", "a.b"]) == ("result", "a.b")  # a list of keys: a dot is part of a key
    assert records_path_keys("") == ()
    assert records_path_keys(None) is None
    assert records_at(body, ("data",)) is body["data"]  # the very list: its items are the records
    assert records_at(body, ("result", "items")) == [{"id": 2}]
    assert records_at(body, ("result", "one")) == [{"id": 3}]  # one object: one record
    assert records_at(body, ("result", "none")) == [] and records_at(body, ("missing", "x")) == []
    assert records_at([{"id": 4}], ()) == [{"id": 4}]
    with pytest.raises(TypeError, match="records_path 'data.id': data is a JSON array, not an object"):
        records_at(body, ("data", "id"))
    with pytest.raises(TypeError, match="records_path 'total': the value there is a JSON number"):
        records_at({"total": 3}, ("total",))


class Numbers(IncrementalHttpStream):
    url_base = "http://127.0.0.1:1/"
    cursor_field = "n"
    primary_key = "id"
    records_path = "result.items"
    json_schema = {"properties": {"id": {"type": "integer"}, "n": {"type": "integer"}}}

    def path(self, **kwargs: Any) -> str:
        return "numbers"

    def next_page_token(self, response: requests.Response) -> None:
        return None


class Doubled(Numbers):
    """Changes its records: they are no longer the page's items as the API sent them."""

    def parse_response(self, response: requests.Response, **kwargs: Any):
        for record in page_json(response)["result"]["items"]:
            record["n"] *= 2
            yield record


class Products(RecordsAtPath, HttpStream):
    url_base = "http://127.0.0.1:1/"
    primary_key = "id"
    records_path = "data"

    def path(self, **kwargs: Any) -> str:
        return "products"

    def next_page_token(self, response: requests.Response) -> None:
        return None


def test_only_a_stream_whose_records_are_its_pages_items_unchanged_offers_its_pages():
    assert isinstance(Numbers().raw_pages, RawPages) and Numbers().raw_pages.path == ("result", "items")
    assert isinstance(Products().raw_pages, RawPages)  # a full-refresh HttpStream with the mixin
    assert Doubled().raw_pages is None  # its own parse_response may change them

    class PricesInCents(Products):  # changes the records after parse_response, in read_records
        def read_records(self, *args: Any, **kwargs: Any):
            for record in super().read_records(*args, **kwargs):
                record["price"] *= 100
                yield record

    class OwnPageLoop(Products):  # airbyte-cdk's page loop, its own way
        def _read_pages(self, *args: Any, **kwargs: Any):
            for record in super()._read_pages(*args, **kwargs):
                yield {**record, "seen": True}

    assert PricesInCents().raw_pages is None and OwnPageLoop().raw_pages is None

    class NoPath(Numbers):
        records_path = None

    assert NoPath().raw_pages is None
    with pytest.raises(NotImplementedError, match="set records_path, or override parse_response"):
        list(NoPath().parse_response(response({"data": []})))


def test_the_stream_yields_the_pages_items_and_keeps_its_pages_only_when_asked():
    stream = Numbers()
    pages = stream.raw_pages
    assert pages is not None
    page = response({"result": {"items": [{"id": 1, "n": 1}, {"id": 2, "n": 2}]}})
    assert list(stream.parse_response(page)) == [{"id": 1, "n": 1}, {"id": 2, "n": 2}]
    assert pages.claim(page_json(page)["result"]["items"][0]) is None  # nobody asked: nothing kept

    pages.enabled = True
    page = response({"result": {"items": [{"id": 1, "n": 1}, {"id": 2, "n": 2}]}})
    records = list(stream.parse_response(page))
    found = pages.claim(records[1])
    assert found is not None
    raw, index = found
    assert index == 1 and raw.items is page_json(page)["result"]["items"] and raw.body == page.content
    assert pages.claim(records[0]) is None  # claimed pages are given away
    assert pages.claim({"id": 1, "n": 1}) is None  # an equal record is not the page's own

    # a body only the standard library parses (NaN) is not kept: orjson would not read it again
    odd = response(b'{"result": {"items": [{"id": 3, "n": NaN}]}}')
    records = list(stream.parse_response(odd))
    assert records[0]["id"] == 3 and pages.claim(records[0]) is None


def test_pages_are_claimed_by_their_records_and_fall_out_when_nobody_claims_them():
    pages = RawPages(("data",), keep=3)
    items = [[{"id": p * 10 + i} for i in range(3)] for p in range(5)]
    for page_items in items[:2]:
        pages.add(orjson.dumps({"data": page_items}), page_items)
    assert pages.claim(items[0][0]) is None  # not enabled when they were added
    pages.enabled = True
    for page_items in items:
        pages.add(orjson.dumps({"data": page_items}), page_items)
    assert pages.added == 5
    assert pages.claim(items[0][0]) is None and pages.claim(items[1][2]) is None  # fell out: 3 kept
    page, index = pages.claim(items[3][2])  # a page whose first records were not written
    assert page.items is items[3] and index == 2
    page, index = pages.claim(items[2][0])
    assert page.items is items[2] and index == 0
    pages.add(b"[]", [])  # an empty page holds no record to claim it by
    assert pages.added == 5

    by_size = RawPages(("data",), keep_bytes=40)
    by_size.enabled = True
    bodies = [orjson.dumps({"data": page_items}) for page_items in items]  # 37-38 bytes each: one fits
    for body, page_items in zip(bodies, items, strict=True):
        by_size.add(body, page_items)
    assert [by_size.claim(page_items[0]) is not None for page_items in items] == [False] * 4 + [True]
    by_size.add(b"x" * 1000, items[0])  # larger than the limit alone: kept, the newest always is
    assert by_size.claim(items[0][1]) is not None
