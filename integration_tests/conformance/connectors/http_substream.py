"""``HttpSubStream``: one slice per parent record, incremental with a state per parent.

The style of source-hubspot's ``WebAnalyticsStream(HttpSubStream, BaseStream)``: slices come
from ``super().stream_slices(...)`` (the parent's records), the state is a composite
``{"<parent id>": {"<cursor field>": value}}``, the request starts each parent from its own
entry, and ``read_records`` updates the state right after yielding each record;
``state_checkpoint_interval`` asks for mid-slice checkpoints. The parent is a plain
full-refresh ``HttpStream``, as github's and zendesk's parents are.

Endpoints: ``GET /stores`` (one page), ``GET /stores/{id}/orders?since=..&offset=N&limit=M``
answering ``{"data": [...], "next_offset": N | null}``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, MutableMapping
from typing import Any

import requests
from airbyte_cdk.models import SyncMode
from airbyte_cdk.sources import AbstractSource
from airbyte_cdk.sources.streams import IncrementalMixin, Stream
from airbyte_cdk.sources.streams.http import HttpStream, HttpSubStream
from airbyte_cdk.sources.streams.http.requests_native_auth import TokenAuthenticator


class ShopStream(HttpStream):
    primary_key = "id"

    def __init__(self, config: Mapping[str, Any], **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.config = config
        self._url_base = config["api_url"].rstrip("/") + "/"

    @property
    def url_base(self) -> str:
        return self._url_base

    def next_page_token(self, response: requests.Response) -> Mapping[str, Any] | None:
        return None

    def parse_response(self, response: requests.Response, **kwargs: Any) -> Iterable[Mapping[str, Any]]:
        yield from response.json()["data"]


class Stores(ShopStream):
    def path(self, **kwargs: Any) -> str:
        return "stores"


class StoreOrders(HttpSubStream, ShopStream, IncrementalMixin):
    cursor_field = "updatedAt"
    state_checkpoint_interval = 25
    page_size = 20

    def __init__(self, parent: HttpStream, config: Mapping[str, Any], **kwargs: Any) -> None:
        super().__init__(parent=parent, config=config, **kwargs)
        self._state: MutableMapping[str, Any] = {}

    @property
    def state(self) -> MutableMapping[str, Any]:
        return self._state

    @state.setter
    def state(self, value: MutableMapping[str, Any]) -> None:
        self._state = value

    def get_latest_state(
        self, current_stream_state: MutableMapping[str, Any], latest_record: Mapping[str, Any]
    ) -> MutableMapping[str, Any]:
        """``{"<store id>": {"updatedAt": latest}}``, one entry per store seen."""
        store_id = str(latest_record["storeId"])
        latest = latest_record[self.cursor_field]
        if store_id in current_stream_state:
            latest = max(current_stream_state[store_id][self.cursor_field], latest)
        return {**current_stream_state, store_id: {self.cursor_field: latest}}

    def stream_slices(
        self, sync_mode: SyncMode, cursor_field: list[str] | None = None, stream_state: Mapping[str, Any] | None = None
    ) -> Iterable[Mapping[str, Any] | None]:
        for parent_slice in super().stream_slices(sync_mode, cursor_field, stream_state):
            store_id = str(parent_slice["parent"]["id"])
            since = self.state.get(store_id, {}).get(self.cursor_field, self.config["start_date"])
            yield {"store_id": store_id, "since": since}

    def path(self, stream_slice: Mapping[str, Any] | None = None, **kwargs: Any) -> str:
        return f"stores/{stream_slice['store_id']}/orders"

    def request_params(
        self,
        stream_state: Mapping[str, Any] | None,
        stream_slice: Mapping[str, Any] | None = None,
        next_page_token: Mapping[str, Any] | None = None,
    ) -> MutableMapping[str, Any]:
        return {"since": stream_slice["since"], "limit": self.page_size, **(next_page_token or {})}

    def next_page_token(self, response: requests.Response) -> Mapping[str, Any] | None:
        next_offset = response.json().get("next_offset")
        return {"offset": next_offset} if next_offset is not None else None

    def read_records(
        self,
        sync_mode: SyncMode,
        cursor_field: list[str] | None = None,
        stream_slice: Mapping[str, Any] | None = None,
        stream_state: Mapping[str, Any] | None = None,
    ) -> Iterable[Mapping[str, Any]]:
        for record in super().read_records(sync_mode, cursor_field, stream_slice, stream_state):
            yield record
            if sync_mode == SyncMode.incremental:
                self.state = self.get_latest_state(self.state, record)


class SourceShopStores(AbstractSource):
    def check_connection(self, logger: Any, config: Mapping[str, Any]) -> tuple[bool, Any]:
        try:
            stores = Stores(config, authenticator=TokenAuthenticator(token=config["api_key"]))
            next(iter(stores.read_records(sync_mode=SyncMode.full_refresh)), None)
            return True, None
        except Exception as error:
            return False, f"cannot list stores: {error}"

    def streams(self, config: Mapping[str, Any]) -> list[Stream]:
        auth = TokenAuthenticator(token=config["api_key"])
        stores = Stores(config, authenticator=auth)
        return [stores, StoreOrders(parent=Stores(config, authenticator=auth), config=config, authenticator=auth)]


def build_source(config: Any = None, catalog: Any = None, state: Any = None) -> SourceShopStores:
    return SourceShopStores()
