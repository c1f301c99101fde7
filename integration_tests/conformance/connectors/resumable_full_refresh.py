"""Full-refresh ``HttpStream``s on airbyte-cdk's resumable full-refresh cursor.

The style of the plain full-refresh streams of Python connectors (source-commcare's
``Application``, source-hubspot's full-refresh streams, airbyte's tutorial sources): no
``cursor_field``, no ``read_records`` override, a ``next_page_token``. airbyte-cdk 7 gives such
a stream its ``ResumableFullRefreshCursor``: one page per slice, a STATE after each page with
the next page's token (``{"offset": 20}``) and ``{"__ab_full_refresh_sync_complete": true}`` at
the end; a sync started from a page token goes on from that page.

Endpoints: ``GET /products?offset=N&limit=M`` (``{"data": [...], "total": T}``) and
``GET /stores`` (one page).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, MutableMapping
from typing import Any
from urllib.parse import parse_qs, urlparse

import requests
from airbyte_cdk.sources import AbstractSource
from airbyte_cdk.sources.streams import Stream
from airbyte_cdk.sources.streams.http import HttpStream
from airbyte_cdk.sources.streams.http.requests_native_auth import TokenAuthenticator


class ShopStream(HttpStream):
    primary_key = "id"

    def __init__(self, config: Mapping[str, Any], **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._url_base = config["api_url"].rstrip("/") + "/"

    @property
    def url_base(self) -> str:
        return self._url_base

    def parse_response(self, response: requests.Response, **kwargs: Any) -> Iterable[Mapping[str, Any]]:
        yield from response.json()["data"]


class Products(ShopStream):
    page_size = 10

    def path(self, **kwargs: Any) -> str:
        return "products"

    def request_params(
        self,
        stream_state: Mapping[str, Any] | None,
        stream_slice: Mapping[str, Any] | None = None,
        next_page_token: Mapping[str, Any] | None = None,
    ) -> MutableMapping[str, Any]:
        return {"limit": self.page_size, **(next_page_token or {})}

    def next_page_token(self, response: requests.Response) -> Mapping[str, Any] | None:
        body = response.json()
        offset = int(parse_qs(urlparse(response.request.url).query).get("offset", ["0"])[0])
        next_offset = offset + len(body["data"])
        return {"offset": next_offset} if body["data"] and next_offset < body["total"] else None


class Stores(ShopStream):
    def path(self, **kwargs: Any) -> str:
        return "stores"

    def next_page_token(self, response: requests.Response) -> Mapping[str, Any] | None:
        return None


class SourceShopCatalog(AbstractSource):
    def check_connection(self, logger: Any, config: Mapping[str, Any]) -> tuple[bool, Any]:
        response = requests.get(
            config["api_url"].rstrip("/") + "/stores", headers={"Authorization": f"Bearer {config['api_key']}"}, timeout=10
        )
        return (True, None) if response.ok else (False, f"stores answered {response.status_code}")

    def streams(self, config: Mapping[str, Any]) -> list[Stream]:
        auth = TokenAuthenticator(token=config["api_key"])
        return [Products(config, authenticator=auth), Stores(config, authenticator=auth)]


def build_source(config: Any = None, catalog: Any = None, state: Any = None) -> SourceShopCatalog:
    return SourceShopCatalog()
