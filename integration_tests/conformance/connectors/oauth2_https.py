"""``HttpStream``s behind airbyte-cdk's ``Oauth2Authenticator``, against an API served over https.

The style of the Python connectors of OAuth APIs (the Python source-hubspot's and
source-google-search-console's authenticators are airbyte-cdk's ``Oauth2Authenticator``): the config holds a
``credentials`` object with the client id, the client secret and a refresh token (the spec marks
the last two ``airbyte_secret``); the authenticator trades the refresh token for an access
token at the token endpoint (a form POST, ``grant_type=refresh_token``) before the first
request, sends it as ``Authorization: Bearer``, and trades again when it expires. The API and
its token endpoint are https only; the machine trusts their certificate through
``REQUESTS_CA_BUNDLE``, as a connector run behind a corporate CA does.

Streams: ``users``, an ``IncrementalMixin`` cursor moved with every record in
``read_records`` (``GET /users?since=..&limit=N[&cursor=TOKEN]``), and ``stores``, a one-page
full refresh (``GET /stores``). Token endpoint: ``POST /oauth/token``.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping, MutableMapping
from typing import Any

import requests
from airbyte_cdk.models import ConnectorSpecification, ConnectorSpecificationSerializer
from airbyte_cdk.sources import AbstractSource
from airbyte_cdk.sources.streams import IncrementalMixin, Stream
from airbyte_cdk.sources.streams.http import HttpStream
from airbyte_cdk.sources.streams.http.requests_native_auth import Oauth2Authenticator

#: where the token endpoint is, under the API's URL
TOKEN_PATH = "oauth/token"

SPEC = {
    "documentationUrl": "https://example.invalid/conformance-connectors/oauth",
    "connectionSpecification": {
        "$schema": "http://json-schema.org/draft-07/schema#",
        "title": "Shop API over OAuth 2.0 (conformance connectors)",
        "type": "object",
        "required": ["api_url", "start_date", "credentials"],
        "additionalProperties": True,
        "properties": {
            "api_url": {"type": "string", "title": "API URL", "pattern": "^https://", "order": 0},
            "start_date": {
                "type": "string",
                "title": "Start date",
                "pattern": "^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}Z$",
                "order": 1,
            },
            "credentials": {
                "type": "object",
                "title": "OAuth 2.0",
                "required": ["auth_type", "client_id", "client_secret", "refresh_token"],
                "order": 2,
                "properties": {
                    "auth_type": {"type": "string", "const": "oauth2.0"},
                    "client_id": {"type": "string", "title": "Client ID"},
                    "client_secret": {"type": "string", "title": "Client secret", "airbyte_secret": True},
                    "refresh_token": {"type": "string", "title": "Refresh token", "airbyte_secret": True},
                },
            },
        },
    },
}


def authenticator(config: Mapping[str, Any]) -> Oauth2Authenticator:
    credentials = config["credentials"]
    return Oauth2Authenticator(
        token_refresh_endpoint=f"{config['api_url'].rstrip('/')}/{TOKEN_PATH}",
        client_id=credentials["client_id"],
        client_secret=credentials["client_secret"],
        refresh_token=credentials["refresh_token"],
    )


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


class Stores(ShopStream):
    def path(self, **kwargs: Any) -> str:
        return "stores"

    def next_page_token(self, response: requests.Response) -> Mapping[str, Any] | None:
        return None


class Users(ShopStream, IncrementalMixin):
    cursor_field = "updatedAt"
    state_checkpoint_interval = 50
    page_size = 40

    def __init__(self, config: Mapping[str, Any], **kwargs: Any) -> None:
        super().__init__(config, **kwargs)
        self.start_date = config["start_date"]
        self._cursor_value: str | None = None

    @property
    def state(self) -> MutableMapping[str, Any]:
        return {self.cursor_field: self._cursor_value or self.start_date}

    @state.setter
    def state(self, value: MutableMapping[str, Any]) -> None:
        self._cursor_value = value.get(self.cursor_field) or self._cursor_value

    def path(self, **kwargs: Any) -> str:
        return "users"

    def request_params(
        self,
        stream_state: Mapping[str, Any] | None,
        stream_slice: Mapping[str, Any] | None = None,
        next_page_token: Mapping[str, Any] | None = None,
    ) -> MutableMapping[str, Any]:
        since = (stream_state or {}).get(self.cursor_field) or self.start_date
        return {"since": since, "limit": self.page_size, **(next_page_token or {})}

    def next_page_token(self, response: requests.Response) -> Mapping[str, Any] | None:
        token = response.json().get("next_cursor")
        return {"cursor": token} if token else None

    def read_records(self, *args: Any, **kwargs: Any) -> Iterable[Mapping[str, Any]]:
        for record in super().read_records(*args, **kwargs):
            # ISO-8601 UTC text of one format: its order is the instants' order.
            self._cursor_value = max(self._cursor_value or "", record[self.cursor_field])
            yield record


class SourceShopOAuth(AbstractSource):
    def spec(self, logger: logging.Logger) -> ConnectorSpecification:
        return ConnectorSpecificationSerializer.load(SPEC)

    def check_connection(self, logger: Any, config: Mapping[str, Any]) -> tuple[bool, Any]:
        try:
            next(iter(Stores(config, authenticator=authenticator(config)).read_records(sync_mode=None)), None)
            return True, None
        except Exception as error:  # noqa: BLE001 - check reports it
            return False, f"cannot list stores: {error}"

    def streams(self, config: Mapping[str, Any]) -> list[Stream]:
        auth = authenticator(config)
        return [Users(config, authenticator=auth), Stores(config, authenticator=auth)]


def build_source(config: Any = None, catalog: Any = None, state: Any = None) -> SourceShopOAuth:
    return SourceShopOAuth()
