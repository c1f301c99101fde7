"""An ``HttpStream`` on the legacy ``get_updated_state``, an inclusive (``>=``) cursor and a
composite primary key.

The style of the Python connectors written before ``IncrementalMixin`` (airbyte's Python HTTP
tutorial of that time; source-stripe's and source-github's Python incremental streams defined
``get_updated_state``): no ``state`` property; airbyte-cdk keeps the state
itself and asks the stream for the next one after every record (``get_updated_state(current,
latest_record)``); the stream reads it back from the ``stream_state`` it is handed. The API is
asked for records *at or after* the state (``start=<state>``), so the record sitting on the
state is read again by every sync, as most APIs' ``updated_since`` filters do. The primary key
has two fields, ``["storeId", "id"]``, as a connector whose records are numbered per account or
per store declares it.

Endpoint: ``GET /orders?start=..&page=N&per_page=M`` (``start <= updatedAt``), answering
``{"data": [...], "page": N, "total_pages": T}``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, MutableMapping
from typing import Any

import requests
from airbyte_cdk.models import SyncMode
from airbyte_cdk.sources import AbstractSource
from airbyte_cdk.sources.streams import Stream
from airbyte_cdk.sources.streams.http import HttpStream
from airbyte_cdk.sources.streams.http.requests_native_auth import TokenAuthenticator


class Orders(HttpStream):
    primary_key = ["storeId", "id"]
    cursor_field = "updatedAt"
    state_checkpoint_interval = 40
    page_size = 25

    def __init__(self, config: Mapping[str, Any], **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._url_base = config["api_url"].rstrip("/") + "/"
        self.start_date = config["start_date"]

    @property
    def url_base(self) -> str:
        return self._url_base

    def path(self, **kwargs: Any) -> str:
        return "orders"

    def get_updated_state(
        self, current_stream_state: MutableMapping[str, Any], latest_record: Mapping[str, Any]
    ) -> MutableMapping[str, Any]:
        latest = latest_record[self.cursor_field]
        current = (current_stream_state or {}).get(self.cursor_field)
        # ISO-8601 UTC text of one format: its order is the instants' order.
        return {self.cursor_field: max(current, latest) if current else latest}

    def stream_slices(
        self, sync_mode: SyncMode, cursor_field: list[str] | None = None, stream_state: Mapping[str, Any] | None = None
    ) -> Iterable[Mapping[str, Any] | None]:
        yield {"start": (stream_state or {}).get(self.cursor_field) or self.start_date}

    def request_params(
        self,
        stream_state: Mapping[str, Any] | None,
        stream_slice: Mapping[str, Any] | None = None,
        next_page_token: Mapping[str, Any] | None = None,
    ) -> MutableMapping[str, Any]:
        return {"start": stream_slice["start"], "per_page": self.page_size, **(next_page_token or {})}

    def next_page_token(self, response: requests.Response) -> Mapping[str, Any] | None:
        body = response.json()
        return {"page": body["page"] + 1} if body["page"] < body["total_pages"] else None

    def parse_response(self, response: requests.Response, **kwargs: Any) -> Iterable[Mapping[str, Any]]:
        yield from response.json()["data"]


class SourceShopOrdersLegacy(AbstractSource):
    def check_connection(self, logger: Any, config: Mapping[str, Any]) -> tuple[bool, Any]:
        response = requests.get(
            config["api_url"].rstrip("/") + "/me", headers={"Authorization": f"Bearer {config['api_key']}"}, timeout=10
        )
        return (True, None) if response.ok else (False, f"the API answered {response.status_code}")

    def streams(self, config: Mapping[str, Any]) -> list[Stream]:
        return [Orders(config, authenticator=TokenAuthenticator(token=config["api_key"]))]


def build_source(config: Any = None, catalog: Any = None, state: Any = None) -> SourceShopOrdersLegacy:
    return SourceShopOrdersLegacy()
