"""A manifest's ``api_budget`` bounds the whole sync's requests, as under airbyte-cdk, also when its
streams are synced at once (``--concurrency``).

airbyte-cdk builds the budget once and every stream's requests share it. Our runtime builds each
stream again with the state it starts from, and airbyte-cdk's source made a new budget with every
build: two streams synced at once each had their own, and together sent twice the rate the
manifest allows (found in review: 6 requests in a 2 s window allowing 3).
"""

from __future__ import annotations

import json
import os
import threading
import time

import conformance_harness as harness
import yaml
from airbyte_cdk.models import ConfiguredAirbyteCatalogSerializer
from airbyte_cdk.sources.declarative.concurrent_declarative_source import ConcurrentDeclarativeSource

from source_framework.demo.api import DemoApi
from source_framework.testing import read

LIMIT, WINDOW_S = 3, 1.0


class TimedApi(DemoApi):
    """The demo API, noting when each request came."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.times: list[float] = []
        self._times_lock = threading.Lock()

    def respond(self, method, target, headers, body):
        with self._times_lock:
            self.times.append(time.monotonic())
        return super().respond(method, target, headers, body)


def most_in_one_window(times: list[float]) -> int:
    times = sorted(times)
    return max(sum(1 for later in times if start <= later < start + WINDOW_S - 0.05) for start in times)


def test_streams_synced_at_once_share_the_manifests_api_budget(monkeypatch):
    monkeypatch.chdir(harness.HERE)  # the manifest names its schemas relative to it
    with open(os.path.join(harness.HERE, "connectors", "manifests", "substream_router.yaml")) as handle:
        manifest = yaml.safe_load(handle)
    with open(os.path.join(harness.HERE, "connectors", "schemas", "store_orders.json")) as handle:
        manifest["definitions"]["base_stream"]["schema_loader"] = {"type": "InlineSchemaLoader", "schema": json.load(handle)}
    manifest["streams"] = [{"$ref": "#/definitions/products_stream"}, {"$ref": "#/definitions/store_orders_stream"}]
    manifest["api_budget"] = {"type": "HTTPAPIBudget", "policies": [{
        "type": "MovingWindowCallRatePolicy", "rates": [{"limit": LIMIT, "interval": "PT1S"}], "matchers": []}]}
    catalog = {"streams": [{"stream": {"name": name, "json_schema": {}, "supported_sync_modes": ["full_refresh"]},
                            "sync_mode": "full_refresh", "destination_sync_mode": "overwrite"}
                           for name in ("products", "store_orders")]}
    with TimedApi(records=120, api_key=harness.API_KEY, seed=17, stores=2).start() as api:
        config = {"api_url": api.url, "api_key": harness.API_KEY, "start_date": "2025-01-01T00:00:00Z"}
        source = ConcurrentDeclarativeSource(catalog=ConfiguredAirbyteCatalogSerializer.load(catalog), config=config,
                                             state=None, source_config=manifest)
        synced = read(source, config, catalog, args=["--destination", "stdout", "--concurrency", "2", "--quiet"])
    assert synced.returncode == 0
    assert len(api.times) > 2 * LIMIT  # enough requests for the budget to matter
    assert most_in_one_window(api.times) <= LIMIT
