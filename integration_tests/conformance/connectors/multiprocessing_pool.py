"""A stream whose ``read_records`` fans the work out to a ``multiprocessing.Pool``.

The style of source-faker's ``Users``/``Purchases`` streams: ``with Pool(processes=...)``
inside ``read_records``, ``pool.map`` over one batch at a time, the workers building whole
``AirbyteMessage`` records (so the JSON work happens in the worker), a TRACE estimate first,
and ``self.state`` assigned after every batch and at the end, with ``loop_offset`` in it. Here
each worker fetches one numbered page of orders over HTTP.

Endpoint: ``GET /orders?start=..&page=N&per_page=M``.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping
from multiprocessing import Pool
from typing import Any

import requests
from airbyte_cdk.models import (
    AirbyteEstimateTraceMessage,
    AirbyteMessage,
    AirbyteRecordMessage,
    AirbyteTraceMessage,
    EstimateType,
    TraceType,
    Type,
)
from airbyte_cdk.sources import AbstractSource
from airbyte_cdk.sources.streams import IncrementalMixin, Stream

PageRequest = tuple[str, str, str, str, int, int]


def now_millis() -> int:
    return int(time.time() * 1000)


def fetch_page(request: PageRequest) -> list[AirbyteMessage]:
    """Runs in a pool worker: one page of orders, as ready-made record messages."""
    api_url, api_key, stream_name, start, page, per_page = request
    response = requests.get(
        f"{api_url}/orders",
        params={"start": start, "page": page, "per_page": per_page},
        headers={"Authorization": f"Bearer {api_key}"},
        timeout=30,
    )
    response.raise_for_status()
    return [
        AirbyteMessage(type=Type.RECORD, record=AirbyteRecordMessage(stream=stream_name, data=order, emitted_at=now_millis()))
        for order in response.json()["data"]
    ]


class Orders(Stream, IncrementalMixin):
    primary_key = "id"
    cursor_field = "updatedAt"

    def __init__(self, config: Mapping[str, Any], parallelism: int, records_per_slice: int, page_size: int, **kwargs: Any):
        super().__init__(**kwargs)
        self.api_url = config["api_url"].rstrip("/")
        self.api_key = config["api_key"]
        self.start_date = config["start_date"]
        self.parallelism = parallelism
        self.records_per_slice = records_per_slice
        self.page_size = page_size

    @property
    def state_checkpoint_interval(self) -> int | None:
        return self.records_per_slice

    @property
    def state(self) -> Mapping[str, Any]:
        if hasattr(self, "_state"):
            return self._state
        return {}

    @state.setter
    def state(self, value: Mapping[str, Any]) -> None:
        self._state = value

    def _first_page(self, start: str) -> Mapping[str, Any]:
        response = requests.get(
            f"{self.api_url}/orders",
            params={"start": start, "page": 1, "per_page": self.page_size},
            headers={"Authorization": f"Bearer {self.api_key}"},
            timeout=30,
        )
        response.raise_for_status()
        return response.json()

    def read_records(self, **kwargs: Any) -> Iterable[Any]:
        start = self.state.get(self.cursor_field) or self.start_date
        first = self._first_page(start)
        yield self._estimate(first["total"])

        updated_at = start
        loop_offset = 0
        pages_per_batch = max(1, self.records_per_slice // self.page_size)
        pages = list(range(1, first["total_pages"] + 1))
        with Pool(processes=self.parallelism) as pool:
            for index in range(0, len(pages), pages_per_batch):
                batch = [
                    (self.api_url, self.api_key, self.name, start, page, self.page_size)
                    for page in pages[index : index + pages_per_batch]
                ]
                for page_messages in pool.map(fetch_page, batch):
                    for message in page_messages:
                        updated_at = max(updated_at, message.record.data[self.cursor_field])
                        loop_offset += 1
                        yield message
                self.state = {self.cursor_field: updated_at, "loop_offset": loop_offset}
        self.state = {self.cursor_field: updated_at, "loop_offset": loop_offset}

    def _estimate(self, total: int) -> AirbyteTraceMessage:
        estimate = AirbyteEstimateTraceMessage(type=EstimateType.STREAM, name=self.name, row_estimate=total, byte_estimate=total * 400)
        return AirbyteTraceMessage(type=TraceType.ESTIMATE, emitted_at=now_millis(), estimate=estimate)


class SourceShopOrdersPool(AbstractSource):
    def check_connection(self, logger: Any, config: Mapping[str, Any]) -> tuple[bool, Any]:
        try:
            fetch_page((config["api_url"].rstrip("/"), config["api_key"], "orders", config["start_date"], 1, 1))
            return True, None
        except requests.RequestException as error:
            return False, f"cannot list orders: {error}"

    def streams(self, config: Mapping[str, Any]) -> list[Stream]:
        return [
            Orders(
                config,
                parallelism=int(config.get("parallelism", 2)),
                records_per_slice=int(config.get("records_per_slice", 60)),
                page_size=int(config.get("page_size", 30)),
            )
        ]


def build_source(config: Any = None, catalog: Any = None, state: Any = None) -> SourceShopOrdersPool:
    return SourceShopOrdersPool()
