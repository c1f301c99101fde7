"""Stream bases: the managed cursor state, date windows and partitioned state."""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable, Mapping
from typing import Any

import pytest
from airbyte_cdk.models import SyncMode
from airbyte_cdk.sources.streams.http import HttpStream

from source_framework import (
    CursorValueError,
    CursorWentBackwards,
    DateWindowStream,
    IncrementalHttpStream,
    PartitionedIncrementalStream,
    date_windows,
)
from source_framework.streams.cursor import parse_datetime

SCHEMA = {"type": "object", "properties": {"id": {"type": "integer"}, "updatedAt": {"type": "string", "format": "date-time"}}}


class Pages:
    """Stands in for the HTTP layer: ``HttpStream.read_records`` yields these records."""

    records: list[Mapping[str, Any]] = []


@pytest.fixture(autouse=True)
def no_http(monkeypatch):
    def fake_read_records(self, sync_mode, cursor_field=None, stream_slice=None, stream_state=None):
        yield from Pages.records

    monkeypatch.setattr(HttpStream, "read_records", fake_read_records)


class Users(IncrementalHttpStream):
    url_base = "http://127.0.0.1:1/"
    cursor_field = "updatedAt"
    primary_key = "id"

    def path(self, **kwargs: Any) -> str:
        return "users"

    def parse_response(self, response, **kwargs):
        yield from ()

    def next_page_token(self, response):
        return None

    def get_json_schema(self):
        return SCHEMA


def read_all(stream, stream_slice=None) -> list[Mapping[str, Any]]:
    return list(stream.read_records(SyncMode.incremental, stream_slice=stream_slice))


def test_state_is_empty_before_any_record_and_tracks_the_highest_cursor():
    users = Users()
    users.is_sorted = False
    assert users.state == {}
    Pages.records = [
        {"id": 1, "updatedAt": "2025-01-02T00:00:00Z"},
        {"id": 2, "updatedAt": "2025-01-03T00:00:00Z"},
        {"id": 3, "updatedAt": "2025-01-01T00:00:00Z"},  # older: does not move the cursor back
        {"id": 4, "updatedAt": None},
    ]
    read_all(users)
    assert users.state == {"updatedAt": "2025-01-03T00:00:00Z"}


def test_state_is_updated_before_the_record_is_handed_on():
    users = Users()
    Pages.records = [{"id": 1, "updatedAt": "2025-01-02T00:00:00Z"}, {"id": 2, "updatedAt": "2025-01-05T00:00:00Z"}]
    seen = []
    for record in users.read_records(SyncMode.incremental):
        seen.append((record["id"], dict(users.state)))
    assert seen == [(1, {"updatedAt": "2025-01-02T00:00:00Z"}), (2, {"updatedAt": "2025-01-05T00:00:00Z"})]


def test_date_times_compare_by_instant_not_by_text():
    users = Users()
    users.state = {"updatedAt": "2025-01-01T10:00:00+02:00"}  # 08:00 UTC
    Pages.records = [{"id": 1, "updatedAt": "2025-01-01T09:00:00Z"}]
    read_all(users)
    assert users.state == {"updatedAt": "2025-01-01T09:00:00Z"}


def test_state_setter_round_trips_and_rejects_bad_shapes():
    users = Users()
    users.state = {"updatedAt": "2025-02-01T00:00:00Z"}
    assert users.state == {"updatedAt": "2025-02-01T00:00:00Z"}
    assert users.cursor_value == "2025-02-01T00:00:00Z"
    users.state = {}
    assert users.state == {}
    with pytest.raises(CursorValueError, match="updatedAt"):
        users.state = {"createdAt": "2025-01-01T00:00:00Z"}
    with pytest.raises(CursorValueError, match="cannot be parsed"):
        users.state = {"updatedAt": "last tuesday"}
    with pytest.raises(CursorValueError):
        users.state = {"updatedAt": True}


def test_date_windows_cover_the_range_half_open():
    windows = list(date_windows(parse_datetime("2025-01-01T00:00:00Z"), parse_datetime("2025-01-08T12:00:00Z"), dt.timedelta(days=3)))
    assert windows == [
        {"start": "2025-01-01T00:00:00Z", "end": "2025-01-04T00:00:00Z"},
        {"start": "2025-01-04T00:00:00Z", "end": "2025-01-07T00:00:00Z"},
        {"start": "2025-01-07T00:00:00Z", "end": "2025-01-08T12:00:00Z"},
    ]
    assert list(date_windows(parse_datetime("2025-01-02"), parse_datetime("2025-01-01"), dt.timedelta(days=1))) == []
    with pytest.raises(ValueError):
        list(date_windows(parse_datetime("2025-01-01"), parse_datetime("2025-01-02"), dt.timedelta(0)))


class Orders(DateWindowStream):
    url_base = "http://127.0.0.1:1/"
    cursor_field = "updatedAt"
    primary_key = "id"
    window_step = dt.timedelta(days=10)
    lookback = dt.timedelta(days=1)

    def path(self, **kwargs: Any) -> str:
        return "orders"

    def parse_response(self, response, **kwargs):
        yield from ()

    def next_page_token(self, response):
        return None

    def get_json_schema(self):
        return SCHEMA


def test_date_window_stream_starts_at_start_date_without_state():
    orders = Orders(start_date="2025-01-01T00:00:00Z", end_date="2025-01-25T00:00:00Z")
    slices = list(orders.stream_slices(sync_mode=SyncMode.incremental))
    assert [s["start"] for s in slices] == ["2025-01-01T00:00:00Z", "2025-01-11T00:00:00Z", "2025-01-21T00:00:00Z"]
    assert slices[-1]["end"] == "2025-01-25T00:00:00Z"


def test_date_window_stream_resumes_from_the_cursor_less_the_lookback():
    orders = Orders(start_date="2025-01-01T00:00:00Z", end_date="2025-01-25T00:00:00Z")
    orders.state = {"updatedAt": "2025-01-15T06:00:00Z"}
    slices = list(orders.stream_slices(sync_mode=SyncMode.incremental))
    assert slices[0] == {"start": "2025-01-14T06:00:00Z", "end": "2025-01-24T06:00:00Z"}
    # a full refresh ignores the cursor
    assert list(orders.stream_slices(sync_mode=SyncMode.full_refresh))[0]["start"] == "2025-01-01T00:00:00Z"


def test_date_window_stream_ends_now_by_default():
    orders = Orders(start_date=(dt.datetime.now(dt.UTC) - dt.timedelta(days=25)).isoformat())
    slices = list(orders.stream_slices(sync_mode=SyncMode.incremental))
    assert len(slices) == 3
    assert parse_datetime(slices[-1]["end"]) <= dt.datetime.now(dt.UTC)


class StoreOrders(PartitionedIncrementalStream):
    url_base = "http://127.0.0.1:1/"
    cursor_field = "updatedAt"
    primary_key = "id"

    def partitions(self) -> Iterable[Mapping[str, Any]]:
        return [{"store_id": 1}, {"store_id": 2}, {"store_id": 3}]

    def path(self, **kwargs: Any) -> str:
        return "orders"

    def parse_response(self, response, **kwargs):
        yield from ()

    def next_page_token(self, response):
        return None

    def get_json_schema(self):
        return SCHEMA


def test_partitioned_state_keeps_one_cursor_per_partition():
    stream = StoreOrders()
    slices = list(stream.stream_slices(sync_mode=SyncMode.incremental))
    assert [s["partition"] for s in slices] == [{"store_id": 1}, {"store_id": 2}, {"store_id": 3}]
    assert all(s["cursor_start"] is None for s in slices)
    Pages.records = [{"id": 1, "updatedAt": "2025-01-05T00:00:00Z"}, {"id": 2, "updatedAt": "2025-01-07T00:00:00Z"}]
    read_all(stream, slices[0])
    Pages.records = [{"id": 3, "updatedAt": "2025-01-02T00:00:00Z"}]
    read_all(stream, slices[1])
    Pages.records = []
    read_all(stream, slices[2])
    assert stream.state == {
        "states": [
            {"partition": {"store_id": 1}, "cursor": {"updatedAt": "2025-01-07T00:00:00Z"}},
            {"partition": {"store_id": 2}, "cursor": {"updatedAt": "2025-01-02T00:00:00Z"}},
        ]
    }
    # A slice keeps the cursor it started from; the next sync's slices start where this one ended.
    assert stream.cursor_for(slices[0]) is None
    next_slices = list(stream.stream_slices(sync_mode=SyncMode.incremental))
    assert stream.cursor_for(next_slices[0]) == "2025-01-07T00:00:00Z"
    assert stream.cursor_for(next_slices[2]) is None


def test_a_partition_listed_twice_gets_one_slice():
    class ListedTwice(StoreOrders):
        def partitions(self):
            return [{"store_id": 1}, {"store_id": 2}, {"store_id": 1}, {"store_id": 3}, {"store_id": 2}]

    slices = list(ListedTwice().stream_slices(sync_mode=SyncMode.incremental))
    assert [s["partition"] for s in slices] == [{"store_id": 1}, {"store_id": 2}, {"store_id": 3}]


def test_partitioned_state_round_trips_and_moves_only_its_partition():
    stream = StoreOrders()
    stream.state = {"states": [{"partition": {"store_id": 2}, "cursor": {"updatedAt": "2025-03-01T00:00:00Z"}}]}
    store_2 = list(stream.stream_slices(sync_mode=SyncMode.incremental))[1]
    assert stream.cursor_for(store_2) == "2025-03-01T00:00:00Z"
    Pages.records = [{"id": 9, "updatedAt": "2025-02-01T00:00:00Z"}]  # older than the partition's cursor
    read_all(stream, store_2)
    assert stream.state["states"][0]["cursor"] == {"updatedAt": "2025-03-01T00:00:00Z"}
    Pages.records = [{"id": 10, "updatedAt": "2025-04-01T00:00:00Z"}]
    read_all(stream, {"partition": {"store_id": 1}})
    assert len(stream.state["states"]) == 2


@pytest.mark.parametrize(
    "bad",
    [
        {"updatedAt": "2025-01-01T00:00:00Z"},
        {"states": {"store_id": 1}},
        {"states": [{"partition": {"store_id": 1}}]},
        {"states": [{"partition": {"store_id": 1}, "cursor": {"updatedAt": "not a date"}}]},
    ],
)
def test_partitioned_state_rejects_the_wrong_shape(bad):
    with pytest.raises(CursorValueError):
        StoreOrders().state = bad


def test_a_sorted_stream_stops_when_the_cursor_goes_backwards_in_a_slice():
    users = Users()
    Pages.records = [
        {"id": 1, "updatedAt": "2025-01-02T00:00:00Z"},
        {"id": 2, "updatedAt": "2025-01-02T00:00:00Z"},  # ties are fine
        {"id": 3, "updatedAt": "2025-01-01T00:00:00Z"},
    ]
    seen = []
    with pytest.raises(CursorWentBackwards, match="declared sorted"):
        for record in users.read_records(SyncMode.incremental):
            seen.append(record["id"])
    assert seen == [1, 2]
    assert users.state == {"updatedAt": "2025-01-02T00:00:00Z"}


def test_order_is_checked_within_a_slice_not_across_slices():
    stream = StoreOrders()
    Pages.records = [{"id": 1, "updatedAt": "2025-01-05T00:00:00Z"}]
    read_all(stream, {"partition": {"store_id": 1}})
    Pages.records = [{"id": 2, "updatedAt": "2025-01-01T00:00:00Z"}]  # older, but another partition
    read_all(stream, {"partition": {"store_id": 2}})
    assert len(stream.state["states"]) == 2


def test_a_record_without_the_cursor_field_stops_the_stream_with_a_clear_error():
    from source_framework.streams.incremental import CursorFieldMissing

    Pages.records = [{"id": 1, "updatedAt": "2025-01-01T00:00:00Z"}, {"id": 2, "updated_at": "2025-01-02T00:00:00Z"}]
    with pytest.raises(CursorFieldMissing) as error:
        read_all(Users())
    assert "has no 'updatedAt' field" in str(error.value) and "updated_at" in str(error.value)


def test_a_null_cursor_is_written_and_does_not_move_the_state():
    Pages.records = [{"id": 1, "updatedAt": "2025-01-01T00:00:00Z"}, {"id": 2, "updatedAt": None}]
    stream = Users()
    assert [r["id"] for r in read_all(stream)] == [1, 2]
    assert stream.state == {"updatedAt": "2025-01-01T00:00:00Z"}


class NoSchemaUsers(Users):
    get_json_schema = IncrementalHttpStream.get_json_schema
    name = "sample_users"


def test_the_schema_is_read_from_a_class_attribute_or_a_file_beside_the_module(tmp_path, monkeypatch):
    import sys
    import types

    class Inline(NoSchemaUsers):
        json_schema = {"type": "object", "properties": {"x": {"type": "string"}}}

    assert Inline().get_json_schema()["properties"] == {"x": {"type": "string"}}

    (tmp_path / "schemas").mkdir()
    (tmp_path / "schemas" / "sample_users.json").write_text('{"type": "object", "properties": {"y": {"type": "integer"}}}')
    module = types.ModuleType("connector_in_a_folder")
    module.__file__ = str(tmp_path / "connector.py")
    monkeypatch.setitem(sys.modules, module.__name__, module)
    Beside = type("Beside", (NoSchemaUsers,), {"__module__": module.__name__})
    assert Beside().get_json_schema()["properties"] == {"y": {"type": "integer"}}


@pytest.mark.parametrize("typo, meant", [("state_checkpoint_intervals", "state_checkpoint_interval"),
                                         ("is_sortd", "is_sorted"), ("cursor_fields", "cursor_field")])
def test_a_misspelled_framework_attribute_is_caught_when_the_class_is_defined(typo, meant):
    with pytest.raises(TypeError, match=f"did you mean '{meant}'"):
        type("Typo", (Users,), {typo: 100})
    type("Fine", (Users,), {"my_own_setting": 1, "state_checkpoint_interval": 100})  # no false alarm


def test_the_misspelling_check_knows_only_attributes_a_base_declares():
    """Every name the check guards is declared on a base (``page_size`` on airbyte-cdk's
    ``HttpStream``): a name no base declares is a connector's own, and a near miss of it would be
    refused for nothing."""
    bases = (IncrementalHttpStream, DateWindowStream, PartitionedIncrementalStream)
    undeclared = [name for name in IncrementalHttpStream.FRAMEWORK_ATTRIBUTES if not any(hasattr(b, name) for b in bases)]
    assert undeclared == []


def test_the_framework_keeps_the_cursor_of_partitioned_streams_through_its_own_read_records():
    assert "read_records" not in vars(PartitionedIncrementalStream)
    assert getattr(IncrementalHttpStream.read_records, "__final__", False)


# -- a slice's pages at once (streams.pages) ----------------------------------------------------


class NumberedPages(IncrementalHttpStream):
    """Three pages of two records; the first page names the others, as a page count does."""

    url_base = "http://127.0.0.1:1/"
    cursor_field = "updatedAt"
    primary_key = "id"
    json_schema = SCHEMA

    def __init__(self, names_pages: bool = True) -> None:
        super().__init__()
        self.names_pages = names_pages
        self.threads: set[int] = set()

    def path(self, **kwargs: Any) -> str:
        return "pages"

    def _fetch_next_page(self, stream_slice=None, stream_state=None, next_page_token=None):
        import threading

        self.threads.add(threading.get_ident())
        return None, (next_page_token or {}).get("page", 1)  # the "response" is its page number

    def parse_response(self, response: Any, **kwargs: Any) -> Iterable[Mapping[str, Any]]:
        return [{"id": 2 * response - 1, "updatedAt": f"2025-01-0{response}T00:00:00Z"},
                {"id": 2 * response, "updatedAt": f"2025-01-0{response}T12:00:00Z"}]

    def next_page_token(self, response: Any) -> Mapping[str, Any] | None:
        return {"page": response + 1} if response < 3 else None

    def page_tokens(self, response: Any) -> list[Mapping[str, Any]] | None:
        return [{"page": page} for page in range(response + 1, 4)] if self.names_pages else None


def test_pages_a_stream_names_are_fetched_through_what_the_runtime_gives_in_page_order():
    import threading

    from source_framework.runtime.concurrency import SparePermitPages

    permits = threading.Semaphore(4)
    permits.acquire()  # the reading worker's own
    for stream in (NumberedPages(), NumberedPages(names_pages=False)):
        pages = SparePermitPages(permits, most=4)
        records = list(stream.fetch_records(SyncMode.incremental, stream_slice={}, stream_state={}, pages=pages))
        assert [r["id"] for r in records] == [1, 2, 3, 4, 5, 6]
        # named pages are fetched in threads of their own; pages followed one by one, in the reader's
        assert (len(stream.threads) > 1) is stream.names_pages
    assert permits.acquire(blocking=False) and permits.acquire(blocking=False) and permits.acquire(blocking=False)
