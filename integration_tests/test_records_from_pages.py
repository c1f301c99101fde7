"""Records converted from their pages' bytes in a process of their own (``records_path`` streams,
``destinations/spark/page_conversion.py``) land the rows conversion in this process lands; a
stream that changes its records is never read from its pages; a converter killed in a sync fails
its stream without a STATE for what it held, and the next sync ends with every record once.

Syncs run in this process (``source_framework.testing.read``) on the test run's Spark session.
"""

from __future__ import annotations

import json
import os
import signal
from typing import Any

import pytest
from airbyte_cdk.sources.streams import IncrementalMixin

from integration_tests.conftest import API_KEY, all_records, catalog, config_for, page_converters_of, read_table
from source_framework import HttpStream, RecordsAtPath, TokenAuthenticator, page_json
from source_framework.demo.api import DemoApi
from source_framework.demo.source import SCHEMAS, DemoSource, Orders, Products, StoreOrders, Stores
from source_framework.destinations.spark import page_conversion
from source_framework.destinations.spark.layout import table_path
from source_framework.testing import read

pytestmark = pytest.mark.slow  # many syncs, each compared with Spark: the quick tier (-m "not slow") leaves it out

STREAMS = ("orders", "store_orders", "products")


@pytest.fixture(scope="module")
def api():
    with DemoApi(records=1_500, api_key=API_KEY, seed=5).start() as api:
        yield api


class Converted:
    """The same records, through a ``parse_response`` of the stream's own: converted here."""

    def parse_response(self, response: Any, **kwargs: Any):
        yield from page_json(response)["data"]


class OrdersHere(Converted, Orders):
    name = "orders"  # type: ignore[assignment]


class StoreOrdersHere(Converted, StoreOrders):
    name = "store_orders"  # type: ignore[assignment]


class ProductsHere(Converted, Products):
    name = "products"  # type: ignore[assignment]


class DemoConvertedHere(DemoSource):
    def streams(self, config):
        return [OrdersHere(config), StoreOrdersHere(config, parent=Stores(config)), ProductsHere(config)]


class DoubledAmounts(Orders):
    """Changes its records where they lie, in the page's own objects: the page's bytes no longer say them."""

    name = "orders"  # type: ignore[assignment]

    def parse_response(self, response: Any, **kwargs: Any):
        for record in page_json(response)["data"]:
            record["amount"] = record["amount"] * 2
            yield record


class OrdersInCents(RecordsAtPath, HttpStream, IncrementalMixin):
    """A stream in a published connector's style (airbyte-cdk's ``IncrementalMixin``, state of its
    own) that changes its records after ``parse_response``, in ``read_records``."""

    url_base = ""  # the config's api_url
    primary_key = "id"
    cursor_field = "updatedAt"
    records_path = "data"

    def __init__(self, config: dict[str, Any]) -> None:
        super().__init__(authenticator=TokenAuthenticator(config["api_key"]))
        self.url_base = config["api_url"].rstrip("/") + "/"
        self._cursor = ""

    @property
    def name(self) -> str:
        return "store_orders"  # (a second table of orders)

    @property
    def state(self) -> dict[str, Any]:
        return {"updatedAt": self._cursor} if self._cursor else {}

    @state.setter
    def state(self, value: dict[str, Any]) -> None:
        self._cursor = value.get("updatedAt", "")

    def path(self, **kwargs: Any) -> str:
        return "orders"

    def request_params(self, next_page_token=None, **kwargs: Any) -> dict[str, Any]:
        return {"start": "2025-01-01T00:00:00Z", "end": "2100-01-01T00:00:00Z", "per_page": 100, **(next_page_token or {})}

    def next_page_token(self, response: Any) -> dict[str, Any] | None:
        body = page_json(response)
        return {"page": body["page"] + 1} if body["page"] < body["total_pages"] else None

    def read_records(self, *args: Any, **kwargs: Any):
        for record in super().read_records(*args, **kwargs):
            record["amount"] = round(record["amount"] * 100)
            self._cursor = max(self._cursor, record["updatedAt"])
            yield record

    def get_json_schema(self) -> dict[str, Any]:
        with open(os.path.join(SCHEMAS, "orders.json")) as handle:
            return json.load(handle)


class DemoDoubled(DemoSource):
    def streams(self, config):
        return [DoubledAmounts(config), OrdersInCents(config)]


def table_rows(spark, warehouse, stream, drop=("_sf_extracted_at", "_sf_sync_id", "_sf_checkpoint")):
    # (which commit a row came with depends on how checkpoints queued up: timing, not data)
    frame = read_table(spark, table_path(str(warehouse), "demo", stream)).drop(*drop)
    return sorted(tuple(row) for row in frame.collect())


def test_rows_from_the_pages_bytes_are_the_rows_converted_here(spark, api, tmp_path, monkeypatch):
    started = []
    original = page_conversion.PageConverter.begin

    def counted(self, schema, sync_id, records_path, *more):
        started.append(records_path)
        original(self, schema, sync_id, records_path, *more)

    monkeypatch.setattr(page_conversion.PageConverter, "begin", counted)
    for interval in (None, 37):
        pages = config_for(api, tmp_path / f"pages-{interval}", state_checkpoint_interval=interval)
        here = config_for(api, tmp_path / f"here-{interval}", state_checkpoint_interval=interval)
        assert read(DemoSource(), pages, catalog(*STREAMS)).returncode == 0
        converters = len(started)
        assert converters == len(STREAMS) and set(started) == {("data",)}  # one per stream, each read from its pages
        assert read(DemoConvertedHere(), here, catalog(*STREAMS)).returncode == 0
        assert len(started) == converters  # a parse_response of the stream's own: none
        for stream in STREAMS:
            assert table_rows(spark, tmp_path / f"pages-{interval}", stream) == table_rows(spark, tmp_path / f"here-{interval}", stream)
        started.clear()


class OrdersWithoutCurrency(Orders):
    """The demo's orders with a schema that does not declare ``currency``, which every record carries."""

    name = "orders"  # type: ignore[assignment]

    def get_json_schema(self) -> dict[str, Any]:
        schema = super().get_json_schema()
        del schema["properties"]["currency"]
        return schema


class DemoWithoutCurrency(DemoSource):
    def streams(self, config):
        return [OrdersWithoutCurrency(config)]


@pytest.mark.parametrize("interval", [None, 7])
def test_fields_no_column_holds_are_counted_in_the_summary_when_the_converter_writes_the_rows(
        spark, api, tmp_path, capsys, interval):
    """The converter counts them as it converts the rows it writes within its commits: the
    end-of-run summary names every record."""
    config = config_for(api, tmp_path / "warehouse", state_checkpoint_interval=interval)
    assert read(DemoWithoutCurrency(), config, catalog("orders")).returncode == 0
    records = len(all_records(api, "orders", {"start": "2025-01-01T00:00:00Z"}))
    line = f"orders: {records:,} records carried fields the schema does not declare (currency: {records:,}); see _sf_meta"
    assert line in capsys.readouterr().err


def test_a_stream_that_changes_its_records_lands_them_changed(spark, api, tmp_path):
    config = config_for(api, tmp_path / "warehouse")
    orders = catalog("orders")
    copy = orders["streams"][0]
    orders["streams"].append({**copy, "stream": {**copy["stream"], "name": "store_orders"}})
    assert read(DemoDoubled(), config, orders).returncode == 0
    warehouse = str(tmp_path / "warehouse")
    amounts = {row["id"]: row["amount"] for row in read_table(spark, table_path(warehouse, "demo", "orders")).collect()}
    api_amounts = {record["id"]: record["amount"] for record in all_records(api, "orders", {"start": "2025-01-01T00:00:00Z"})}
    assert amounts and amounts == {key: value * 2 for key, value in api_amounts.items() if key in amounts}
    assert len(amounts) == len(api_amounts)
    cents = {row["id"]: row["amount"] for row in read_table(spark, table_path(warehouse, "demo", "store_orders")).collect()}
    assert cents == {key: round(value * 100) for key, value in api_amounts.items()}


class NotesConverters(DemoSource):
    """The demo connector, noting which page converters this process runs when read's set-up asks
    for its streams (after the config, the spec, the catalog and the states were read)."""

    def __init__(self) -> None:
        super().__init__()
        self.running_at_set_up: list[int] | None = None

    def streams(self, config):
        if self.running_at_set_up is None:
            self.running_at_set_up = page_converters_of(os.getpid())
        return super().streams(config)


@pytest.mark.skipif(not os.path.isdir("/proc/self"), reason="lists processes through /proc (Linux)")
def test_the_first_page_converter_starts_before_the_streams_are_set_up(spark, api, tmp_path):
    """It takes 0.1-0.15 s to start: started with the destination, after the streams' set-up, it was
    ready only just before the first page (after it on a busy machine), and the first commit waited."""
    before = set(page_converters_of(os.getpid()))
    source = NotesConverters()
    config = config_for(api, tmp_path / "warehouse", state_checkpoint_interval=100)
    assert read(source, config, catalog("orders")).returncode == 0
    assert source.running_at_set_up is not None and set(source.running_at_set_up) - before
    assert set(page_converters_of(os.getpid())) <= before  # (and none is left once the read ended)


def test_a_converter_killed_in_a_sync_fails_the_stream_and_the_next_sync_lands_every_record_once(
        spark, api, tmp_path, monkeypatch):
    config = config_for(api, tmp_path / "warehouse", state_checkpoint_interval=100)
    sent = []
    original = page_conversion.PageConverter.page

    def page_then_die(self, page):
        sent.append(page)
        if len(sent) == 4:
            os.kill(self._process.pid, signal.SIGKILL)
        return original(self, page)

    monkeypatch.setattr(page_conversion.PageConverter, "page", page_then_die)
    first = read(DemoSource(), config, catalog("orders"))
    assert first.returncode == 1
    errors = [m["trace"]["error"]["message"] for m in first.messages
              if m["type"] == "TRACE" and m["trace"].get("type") == "ERROR"]
    assert len(errors) == 1 and "page converter process ended with exit code -9" in errors[0], errors
    orders = table_path(str(tmp_path / "warehouse"), "demo", "orders")
    committed = read_table(spark, orders).count() if first.states() else 0
    assert committed < 1_500  # the pages sent after the kill were committed under no STATE

    monkeypatch.setattr(page_conversion.PageConverter, "page", original)
    second = read(DemoSource(), config, catalog("orders"), state=first.final_state_list() or None)
    assert second.returncode == 0
    ids = [row["id"] for row in read_table(spark, table_path(str(tmp_path / "warehouse"), "demo", "orders")).select("id").collect()]
    assert sorted(ids) == sorted(record["id"] for record in all_records(api, "orders", {"start": "2025-01-01T00:00:00Z"}))
