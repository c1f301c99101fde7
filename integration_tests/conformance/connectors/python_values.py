"""``HttpStream``s whose records hold Python objects, not JSON values: the connector builds them.

The style of source-faker's ``Purchases`` and ``Users`` (timestamps as naive ``datetime``s made
in the connector), of SDK-backed connectors whose client returns objects (enums, ids, dataclasses),
and of streams that turn API text into typed values before yielding them. airbyte-cdk's
entrypoint prints each value as orjson writes it: a naive ``datetime`` as its ISO text without a
zone, an aware one with its offset, a ``date`` as ``YYYY-MM-DD``, an enum as its value, a ``UUID``
as text, a dataclass as an object, a tuple as an array. A destination reading that stdout sees
those; our tables must hold the same.

- ``users``: incremental on ``updatedAt`` (an aware ``datetime`` in the record and in the state,
  which airbyte-cdk serialises), ``createdAt`` as a naive UTC ``datetime`` (source-faker's way),
  ``job`` as an enum, ``company`` as a dataclass, ``address`` with a tuple and a ``UUID`` in it;
  ``state_checkpoint_interval`` 50.
- ``products``: full refresh, ``updatedAt`` as an aware ``datetime``, ``price`` as a float; with
  ``"decimal_prices": true`` in the config, as a ``Decimal`` (what a money-minded SDK returns),
  which airbyte-cdk's serializer cannot write: its sync fails on that stream, and so must ours,
  never with a null price.

Endpoints: ``GET /users?since=..&limit=N[&cursor=TOKEN]``, ``GET /products?offset=N&limit=N``.
"""

from __future__ import annotations

import dataclasses
import enum
import uuid
from collections.abc import Iterable, Mapping, MutableMapping
from datetime import UTC, datetime
from decimal import Decimal
from typing import Any
from urllib.parse import parse_qs, urlparse

import requests
from airbyte_cdk.sources import AbstractSource
from airbyte_cdk.sources.streams import IncrementalMixin, Stream
from airbyte_cdk.sources.streams.http import HttpStream
from airbyte_cdk.sources.streams.http.requests_native_auth import TokenAuthenticator

QUERY_FORMAT = "%Y-%m-%dT%H:%M:%SZ"


class Job(enum.Enum):
    """What an SDK's model would type the field as (the demo API's jobs, and any other as itself)."""

    ENGINEER = "engineer"
    WRITER = "writer"
    MANAGER = "manager"
    DESIGNER = "designer"
    ANALYST = "analyst"
    TEACHER = "teacher"
    NURSE = "nurse"


@dataclasses.dataclass
class Company:
    name: str
    industry: str


def instant(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00"))


class ShopStream(HttpStream):
    page_size = 40

    def __init__(self, config: Mapping[str, Any], **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._url_base = config["api_url"].rstrip("/") + "/"
        self.config = config

    @property
    def url_base(self) -> str:
        return self._url_base


class Users(ShopStream, IncrementalMixin):
    primary_key = "id"
    cursor_field = "updatedAt"
    state_checkpoint_interval = 50

    def __init__(self, config: Mapping[str, Any], **kwargs: Any) -> None:
        super().__init__(config, **kwargs)
        self._cursor: datetime = instant(config["start_date"])

    @property
    def state(self) -> MutableMapping[str, Any]:
        return {self.cursor_field: self._cursor}  # a datetime: airbyte-cdk writes it as ISO text

    @state.setter
    def state(self, value: MutableMapping[str, Any]) -> None:
        if value.get(self.cursor_field):
            self._cursor = max(self._cursor, instant(str(value[self.cursor_field])))

    def path(self, **kwargs: Any) -> str:
        return "users"

    def request_params(self, stream_state: Any = None, stream_slice: Any = None, next_page_token: Any = None) -> MutableMapping[str, Any]:
        params: dict[str, Any] = {"since": self._cursor.strftime(QUERY_FORMAT), "limit": self.page_size}
        if next_page_token:
            params.update(next_page_token)
        return params

    def next_page_token(self, response: requests.Response) -> Mapping[str, Any] | None:
        token = response.json().get("next_cursor")
        return {"cursor": token} if token else None

    def parse_response(self, response: requests.Response, **kwargs: Any) -> Iterable[Mapping[str, Any]]:
        for item in response.json()["data"]:
            record = dict(item)
            record["updatedAt"] = instant(item["updatedAt"])
            record["createdAt"] = instant(item["createdAt"]).astimezone(UTC).replace(tzinfo=None)  # naive, as source-faker's
            job = item.get("job")
            record["job"] = Job(job) if job in Job._value2member_map_ else job
            if isinstance(item.get("company"), Mapping):
                record["company"] = Company(**item["company"])
            if isinstance(item.get("address"), Mapping):
                address = dict(item["address"])
                address["lines"] = (address.pop("street", None), address.get("city"))
                address["ref"] = uuid.uuid5(uuid.NAMESPACE_URL, f"user/{item['id']}")
                record["address"] = address
            yield record

    def read_records(self, *args: Any, **kwargs: Any) -> Iterable[Mapping[str, Any]]:
        for record in super().read_records(*args, **kwargs):
            self._cursor = max(self._cursor, record["updatedAt"])
            yield record


class Products(ShopStream):
    primary_key = "id"

    def path(self, **kwargs: Any) -> str:
        return "products"

    def request_params(self, stream_state: Any = None, stream_slice: Any = None, next_page_token: Any = None) -> MutableMapping[str, Any]:
        return {"offset": (next_page_token or {}).get("offset", 0), "limit": self.page_size}

    def next_page_token(self, response: requests.Response) -> Mapping[str, Any] | None:
        offset = int(parse_qs(urlparse(response.request.url or "").query).get("offset", ["0"])[0])
        following = offset + len(response.json()["data"])
        return {"offset": following} if following < response.json()["total"] else None

    def parse_response(self, response: requests.Response, **kwargs: Any) -> Iterable[Mapping[str, Any]]:
        decimal = bool(self.config.get("decimal_prices"))
        for item in response.json()["data"]:
            record = dict(item)
            record["updatedAt"] = instant(item["updatedAt"])
            if decimal:
                record["price"] = Decimal(str(item["price"]))
            yield record


class SourcePythonValues(AbstractSource):
    def check_connection(self, logger: Any, config: Mapping[str, Any]) -> tuple[bool, Any]:
        return True, None

    def streams(self, config: Mapping[str, Any]) -> list[Stream]:
        auth = TokenAuthenticator(token=config["api_key"])
        return [Users(config, authenticator=auth), Products(config, authenticator=auth)]


def build_source(config: Any = None, catalog: Any = None, state: Any = None) -> SourcePythonValues:
    return SourcePythonValues()
