"""Records a sync reads again end up once, in their last version (issue 49, items 9 and 13).

A small HTTP API on 127.0.0.1 serves items with second-granularity cursors; each test changes its
items between syncs in this process (``source_framework.testing.read``) into real Delta tables,
read back through their log (``landed_rows``).
"""

from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlparse

import pytest

from integration_tests.conftest import landed_rows
from source_framework import IncrementalHttpStream, Source
from source_framework.destinations.spark import buffer as buffer_module
from source_framework.destinations.spark.layout import table_path
from source_framework.streams.cursor import parse_datetime
from source_framework.testing import read


class ItemsApi:
    """``GET /items?since=T``: the items whose ``updatedAt`` is at or after the instant T, and every
    item without one, in the order of ``items`` (which a test may change between syncs)."""

    def __init__(self, items):
        self.items = items
        api = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def do_GET(self):
                since = parse_datetime(parse_qs(urlparse(self.path).query)["since"][0])
                data = [i for i in api.items if i["updatedAt"] is None or parse_datetime(i["updatedAt"]) >= since]
                body = json.dumps({"data": data}).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_port}/"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self):
        self.server.shutdown()
        self.server.server_close()


class Items(IncrementalHttpStream):
    cursor_field = "updatedAt"
    primary_key = "id"
    json_schema = {"type": "object", "properties": {"id": {"type": "integer"}, "name": {"type": "string"},
                                                    "updatedAt": {"type": ["null", "string"], "format": "date-time"}}}

    def __init__(self, url):
        super().__init__()
        self._url = url

    @property
    def url_base(self):
        return self._url

    def path(self, **kwargs):
        return "items"

    def request_params(self, stream_state=None, next_page_token=None, **kwargs):
        return {"since": (stream_state or {}).get("updatedAt") or "2025-01-01T00:00:00Z"}

    def next_page_token(self, response):
        return None

    def parse_response(self, response, **kwargs):
        yield from response.json()["data"]


class KeylessItems(Items):
    primary_key = None

    @property
    def name(self):
        return "items"


class ItemsSource(Source):
    spec_json = {"connectionSpecification": {"type": "object", "properties": {"url": {"type": "string"}}}}
    stream_class = Items

    def check_connection(self, logger, config):
        return True, None

    def streams(self, config):
        return [self.stream_class(config["url"])]


class KeylessItemsSource(ItemsSource):
    stream_class = KeylessItems


def items_catalog(mode, keyed=True):
    key = [["id"]] if keyed else []
    stream = {"name": "items", "json_schema": {}, "supported_sync_modes": ["incremental"], "source_defined_cursor": True,
              "default_cursor_field": ["updatedAt"], "source_defined_primary_key": key}
    return {"streams": [{"stream": stream, "sync_mode": "incremental", "destination_sync_mode": mode,
                         "cursor_field": ["updatedAt"], "primary_key": key}]}


@pytest.fixture
def api():
    api = ItemsApi([])
    yield api
    api.close()


def config_of(api, tmp_path):
    return {"url": api.url, "destination": {"type": "spark", "warehouse": str(tmp_path / "warehouse"), "spark_master": "local[1]"}}


def table_rows(spark, tmp_path, source=ItemsSource):
    return sorted((r["id"], r["name"]) for r in landed_rows(spark, table_path(str(tmp_path / "warehouse"), source().name, "items")))


# -- 13. records without a cursor value, read again by every sync --------------------------------------------


@pytest.mark.parametrize("source", [ItemsSource, KeylessItemsSource], ids=["keyed", "keyless"])
def test_item_13_records_with_a_null_cursor_are_not_appended_again_by_every_sync(spark, api, tmp_path, source):
    """Records read again below the cursor were looked up in the table; those without a cursor value
    were not: three unchanged syncs left three copies of each."""
    api.items = [{"id": 1, "name": "no date", "updatedAt": None},
                 {"id": 2, "name": "dated", "updatedAt": "2025-03-01T10:00:00Z"},
                 {"id": 3, "name": "no date either", "updatedAt": None},
                 {"id": 4, "name": "dated later", "updatedAt": "2025-03-01T10:00:05Z"}]
    config, catalog = config_of(api, tmp_path), items_catalog("append", keyed=source is ItemsSource)
    state = None
    for _ in range(3):
        output = read(source(), config, catalog, state=state)
        assert output.returncode == 0
        state = output.final_state_list()
    assert table_rows(spark, tmp_path, source) == sorted((i["id"], i["name"]) for i in api.items)

    # One changed since: written, once (an append table keeps both versions).
    api.items[0] = {"id": 1, "name": "no date, renamed", "updatedAt": None}
    output = read(source(), config, catalog, state=state)
    assert output.returncode == 0
    assert table_rows(spark, tmp_path, source) == sorted([(i["id"], i["name"]) for i in api.items] + [(1, "no date")])


# -- 9. append_dedup keeps the version read last, by read order and commit, never by the clock ------------------


class ClockBehind:
    """``time`` as the Spark buffer sees it (it stamps ``_sf_extracted_at``), ``seconds`` behind."""

    def __init__(self, seconds):
        self.seconds = seconds

    def time(self):
        return time.time() - self.seconds


def test_item_9_an_update_within_its_cursors_second_wins_though_the_next_syncs_clock_is_behind(spark, api, tmp_path, monkeypatch):
    """A record updated A -> B within its cursor's second, and the next sync's clock 60 s behind (a
    step back, another host): that sync read B and said so, the table kept A; its boundary holds
    B's hash, so later syncs skipped B, and the update was lost for good."""
    last = "2025-03-01T10:00:05Z"
    api.items = [{"id": i, "name": f"A of {i}", "updatedAt": last} for i in range(1, 4)]
    config, catalog = config_of(api, tmp_path), items_catalog("append_dedup")
    first = read(ItemsSource(), config, catalog)
    assert first.returncode == 0
    api.items[1] = {"id": 2, "name": "B of 2", "updatedAt": last}
    monkeypatch.setattr(buffer_module, "time", ClockBehind(60))
    second = read(ItemsSource(), config, catalog, state=first.final_state_list())
    assert second.returncode == 0
    assert sum(int(s["sourceStats"]["recordCount"]) for s in second.states()) == 1
    assert table_rows(spark, tmp_path) == [(1, "A of 1"), (2, "B of 2"), (3, "A of 3")]
    monkeypatch.undo()
    third = read(ItemsSource(), config, catalog, state=second.final_state_list())
    assert third.returncode == 0
    assert table_rows(spark, tmp_path) == [(1, "A of 1"), (2, "B of 2"), (3, "A of 3")]


class StoppedClock:
    """``time`` as the Spark buffer sees it, stopped: every record read in the same millisecond."""

    def __init__(self):
        self.now = time.time()

    def time(self):
        return self.now


@pytest.mark.parametrize("stopped", [False, True], ids=["real-clock", "stopped-clock"])
def test_item_9_of_two_versions_of_a_key_on_one_page_at_one_cursor_the_later_wins(spark, api, tmp_path, monkeypatch, stopped):
    """One page listing [old, new] for one key and cursor kept ``old`` (read in one checkpoint, most
    often in the same millisecond: nothing but the order they were read in tells them apart)."""
    if stopped:
        monkeypatch.setattr(buffer_module, "time", StoppedClock())
    cursor = "2025-03-01T10:00:05Z"
    api.items = [{"id": 1, "name": "other", "updatedAt": "2025-03-01T10:00:00Z"},
                 {"id": 7, "name": "old", "updatedAt": cursor}, {"id": 7, "name": "new", "updatedAt": cursor},
                 {"id": 8, "name": "first", "updatedAt": cursor}]
    output = read(ItemsSource(), config_of(api, tmp_path), items_catalog("append_dedup"))
    assert output.returncode == 0
    assert table_rows(spark, tmp_path) == [(1, "other"), (7, "new"), (8, "first")]
