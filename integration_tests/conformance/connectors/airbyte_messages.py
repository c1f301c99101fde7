"""An ``HttpStream`` that yields ``AirbyteMessage`` records, a TRACE estimate and LOGs, not dicts.

The style of source-faker (records built as ``AirbyteMessage(type=RECORD,
record=AirbyteRecordMessage(...))`` by the stream itself; a bare ``AirbyteTraceMessage`` of
type ESTIMATE yielded before the records, as ``generate_estimate`` does; a LOG message as a
progress line) on top of an HTTP stream: the estimate comes from the first page's ``total``, a
LOG message comes with every page; ``read_records`` moves an ``IncrementalMixin`` cursor from
each record message.

Endpoint: ``GET /orders?start=..&page=N&per_page=M``, answering
``{"data": [...], "page": N, "total_pages": T, "total": COUNT}``.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping, MutableMapping
from typing import Any

import requests
from airbyte_cdk.models import (
    AirbyteEstimateTraceMessage,
    AirbyteLogMessage,
    AirbyteMessage,
    AirbyteRecordMessage,
    AirbyteTraceMessage,
    EstimateType,
    Level,
    TraceType,
    Type,
)
from airbyte_cdk.sources import AbstractSource
from airbyte_cdk.sources.streams import IncrementalMixin, Stream
from airbyte_cdk.sources.streams.http import HttpStream
from airbyte_cdk.sources.streams.http.requests_native_auth import TokenAuthenticator

MEDIAN_RECORD_BYTES = 420
#: what the LOG message yielded for each page starts with (the tests look for them)
LOG_PREFIX = "conformance: orders page"


def now_millis() -> int:
    return int(time.time() * 1000)


def generate_estimate(stream_name: str, total: int, bytes_per_row: int) -> AirbyteTraceMessage:
    estimate = AirbyteEstimateTraceMessage(
        type=EstimateType.STREAM, name=stream_name, row_estimate=total, byte_estimate=total * bytes_per_row
    )
    return AirbyteTraceMessage(type=TraceType.ESTIMATE, emitted_at=now_millis(), estimate=estimate)


class Orders(HttpStream, IncrementalMixin):
    primary_key = "id"
    cursor_field = "updatedAt"
    state_checkpoint_interval = 60
    page_size = 50

    def __init__(self, config: Mapping[str, Any], **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._url_base = config["api_url"].rstrip("/") + "/"
        self.start_date = config["start_date"]
        self._cursor_value: str | None = None

    @property
    def url_base(self) -> str:
        return self._url_base

    @property
    def state(self) -> Mapping[str, Any]:
        return {self.cursor_field: self._cursor_value} if self._cursor_value else {}

    @state.setter
    def state(self, value: Mapping[str, Any]) -> None:
        self._cursor_value = value.get(self.cursor_field)

    def path(self, **kwargs: Any) -> str:
        return "orders"

    def request_params(
        self,
        stream_state: Mapping[str, Any] | None,
        stream_slice: Mapping[str, Any] | None = None,
        next_page_token: Mapping[str, Any] | None = None,
    ) -> MutableMapping[str, Any]:
        start = (stream_state or {}).get(self.cursor_field) or self.start_date
        return {"start": start, "per_page": self.page_size, **(next_page_token or {})}

    def next_page_token(self, response: requests.Response) -> Mapping[str, Any] | None:
        body = response.json()
        return {"page": body["page"] + 1} if body["page"] < body["total_pages"] else None

    def parse_response(self, response: requests.Response, **kwargs: Any) -> Iterable[AirbyteMessage | AirbyteTraceMessage]:
        body = response.json()
        if body["page"] == 1:
            yield generate_estimate(self.name, body["total"], MEDIAN_RECORD_BYTES)
        log = AirbyteLogMessage(level=Level.INFO, message=f"{LOG_PREFIX} {body['page']} of {body['total_pages']}")
        yield AirbyteMessage(type=Type.LOG, log=log)
        for order in body["data"]:
            record = AirbyteRecordMessage(stream=self.name, data=order, emitted_at=now_millis())
            yield AirbyteMessage(type=Type.RECORD, record=record)

    def read_records(self, *args: Any, **kwargs: Any) -> Iterable[AirbyteMessage | AirbyteTraceMessage]:
        for message in super().read_records(*args, **kwargs):
            if isinstance(message, AirbyteMessage) and message.type == Type.RECORD:
                updated_at = message.record.data[self.cursor_field]
                self._cursor_value = max(self._cursor_value, updated_at) if self._cursor_value else updated_at
            yield message


class SourceShopOrderMessages(AbstractSource):
    def check_connection(self, logger: Any, config: Mapping[str, Any]) -> tuple[bool, Any]:
        response = requests.get(
            config["api_url"].rstrip("/") + "/orders",
            params={"per_page": 1},
            headers={"Authorization": f"Bearer {config['api_key']}"},
            timeout=10,
        )
        return (True, None) if response.ok else (False, f"orders answered {response.status_code}")

    def streams(self, config: Mapping[str, Any]) -> list[Stream]:
        return [Orders(config, authenticator=TokenAuthenticator(token=config["api_key"]))]


def build_source(config: Any = None, catalog: Any = None, state: Any = None) -> SourceShopOrderMessages:
    return SourceShopOrderMessages()
