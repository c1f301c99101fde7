"""The demo connector: five streams over the bundled demo API, one of each kind the framework supports."""

from __future__ import annotations

import datetime as dt
import json
import logging
import os
from collections.abc import Iterable, Mapping, MutableMapping
from typing import Any
from urllib.parse import parse_qs, urlparse

import requests

from source_framework import (
    DateWindowStream,
    HttpStream,
    IncrementalHttpStream,
    PartitionedIncrementalStream,
    RecordsAtPath,
    Source,
    Stream,
    TokenAuthenticator,
    page_json,
)

SCHEMAS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "schemas")
DEFAULT_START = "2025-01-01T00:00:00Z"

_embedded_apis: dict = {}


def api_url(config: Mapping[str, Any]) -> str:
    """The API's base URL; ``"embedded"`` starts the demo API once per process, so the README's job needs no set-up."""
    url = config.get("api_url", "embedded")
    if url != "embedded":
        return url.rstrip("/") + "/"
    knobs = dict(config.get("embedded_api") or {})
    key = (config.get("api_key"), json.dumps(knobs, sort_keys=True))
    if key not in _embedded_apis:
        from source_framework.demo.api import DemoApi

        _embedded_apis[key] = DemoApi(api_key=config.get("api_key"), **knobs).start()
        logging.getLogger("source_framework.demo").info("embedded demo API on %s", _embedded_apis[key].url)
    return _embedded_apis[key].url + "/"


class DemoStream(RecordsAtPath, HttpStream):
    """Shared plumbing: base URL, page size, JSON schemas from ``demo/schemas``; records are each page's ``data`` list."""

    primary_key = "id"
    records_path = "data"

    def __init__(self, config: Mapping[str, Any], **kwargs: Any) -> None:
        super().__init__(authenticator=TokenAuthenticator(token=config.get("api_key", "")), **kwargs)
        self._config = config
        self.page_size = int(config.get("page_size", 500))
        self.is_sorted = bool(config.get("assume_sorted", True))

    def backoff_time(self, response_or_exception: Any) -> float | None:
        """Wait what Retry-After asks on 429/503; retry other 5xx and connection errors after 0.5 s."""
        return self.retry_after_wait(response_or_exception) or 0.5

    @property
    def url_base(self) -> str:
        # Asked on the first request, so commands that only look at streams (discover, state) do not start the API.
        return api_url(self._config)

    def get_json_schema(self) -> Mapping[str, Any]:
        with open(os.path.join(SCHEMAS, f"{self.name}.json"), encoding="utf-8") as handle:
            return json.load(handle)


class Users(DemoStream, IncrementalHttpStream):
    """``GET /users?since=&limit=&cursor=``: one slice, cursor pagination, sorted by updatedAt."""

    cursor_field = "updatedAt"

    def __init__(self, config: Mapping[str, Any]) -> None:
        super().__init__(config)
        self.start = config.get("start_date", DEFAULT_START)
        self.state_checkpoint_interval = config.get("state_checkpoint_interval", 1000)

    def path(self, **kwargs: Any) -> str:
        return "users"

    def request_params(self, stream_state=None, stream_slice=None, next_page_token=None) -> MutableMapping[str, Any]:
        params = {"since": (stream_state or {}).get(self.cursor_field) or self.start, "limit": self.page_size}
        if next_page_token:
            params["cursor"] = next_page_token["cursor"]
        return params

    def next_page_token(self, response: requests.Response) -> Mapping[str, Any] | None:
        token = page_json(response).get("next_cursor")
        return {"cursor": token} if token else None


class Orders(DemoStream, DateWindowStream):
    """``GET /orders?start=&end=&page=&per_page=``: monthly windows, page-number pagination."""

    cursor_field = "updatedAt"
    window_step = dt.timedelta(days=30)

    def __init__(self, config: Mapping[str, Any]) -> None:
        super().__init__(config, start_date=config.get("start_date", DEFAULT_START))
        self.state_checkpoint_interval = config.get("state_checkpoint_interval", 1000)

    def path(self, **kwargs: Any) -> str:
        return "orders"

    def request_params(self, stream_state=None, stream_slice=None, next_page_token=None) -> MutableMapping[str, Any]:
        page = (next_page_token or {}).get("page", 1)
        return {"start": stream_slice["start"], "end": stream_slice["end"], "per_page": self.page_size, "page": page}

    def next_page_token(self, response: requests.Response) -> Mapping[str, Any] | None:
        body = page_json(response)
        return {"page": body["page"] + 1} if body["page"] < body["total_pages"] else None

    def page_tokens(self, response: requests.Response) -> list[Mapping[str, Any]]:
        body = page_json(response)
        return [{"page": page} for page in range(body["page"] + 1, body["total_pages"] + 1)]


class Stores(DemoStream):
    """``GET /stores``: a small full-refresh list, no pagination."""

    def path(self, **kwargs: Any) -> str:
        return "stores"

    def next_page_token(self, response: requests.Response) -> Mapping[str, Any] | None:
        return None


class StoreOrders(DemoStream, PartitionedIncrementalStream):
    """``GET /stores/{id}/orders?since=&offset=&limit=``: one slice and one cursor per store."""

    cursor_field = "updatedAt"

    def __init__(self, config: Mapping[str, Any], parent: Stores) -> None:
        super().__init__(config)
        self.parent = parent
        self.start = config.get("start_date", DEFAULT_START)
        self.state_checkpoint_interval = config.get("state_checkpoint_interval", 1000)

    def partitions(self) -> Iterable[Mapping[str, Any]]:
        for store in self.parent.read_only_records():
            yield {"store_id": store["id"]}

    def path(self, stream_slice: Mapping[str, Any] | None = None, **kwargs: Any) -> str:
        return f"stores/{stream_slice['partition']['store_id']}/orders"

    def request_params(self, stream_state=None, stream_slice=None, next_page_token=None) -> MutableMapping[str, Any]:
        since = self.cursor_for(stream_slice) or self.start
        return {"since": since, "limit": self.page_size, "offset": (next_page_token or {}).get("offset", 0)}

    def next_page_token(self, response: requests.Response) -> Mapping[str, Any] | None:
        offset = page_json(response).get("next_offset")
        return {"offset": offset} if offset is not None else None


class Products(DemoStream):
    """``GET /products?offset=&limit=``: full refresh, offset pagination."""

    def path(self, **kwargs: Any) -> str:
        return "products"

    def request_params(self, stream_state=None, stream_slice=None, next_page_token=None) -> MutableMapping[str, Any]:
        return {"offset": (next_page_token or {}).get("offset", 0), "limit": self.page_size}

    def next_page_token(self, response: requests.Response) -> Mapping[str, Any] | None:
        body = page_json(response)
        offset = int(parse_qs(urlparse(str(response.request.url)).query).get("offset", ["0"])[0])
        following = offset + len(body["data"])
        return {"offset": following} if body["data"] and following < body["total"] else None


class DemoSource(Source):
    source_name = "demo"

    def check_connection(self, logger: logging.Logger, config: Mapping[str, Any]) -> tuple[bool, Any | None]:
        try:
            response = requests.get(
                api_url(config) + "me",
                headers={"Authorization": f"Bearer {config.get('api_key', '')}"},
                timeout=10,
            )
        except requests.RequestException as error:
            return False, f"cannot reach the demo API: {error}"
        if response.status_code in (401, 403):
            return False, "the demo API refused the api_key"
        if response.status_code != 200:
            return False, f"the demo API answered HTTP {response.status_code}"
        return True, None

    def streams(self, config: Mapping[str, Any]) -> list[Stream]:
        stores = Stores(config)
        return [Users(config), Orders(config), stores, StoreOrders(config, parent=Stores(config)), Products(config)]
