"""``HttpStream`` + ``CheckpointMixin``: the stream keeps a datetime cursor and checks records
against the state on the client side; no slices.

The style of source-commcare's ``IncrementalStream(CommcareStream, CheckpointMixin)`` (the
``state`` getter returns the cursor as a ``datetime`` object and leaves it to airbyte-cdk to
serialise; the setter parses it back; ``request_params`` reads the current cursor through
``self.state``) and of source-hubspot's ``ClientSideIncrementalStream`` (records older than the
incoming state are dropped on the client, the state moves with every record that passes,
``state_checkpoint_interval`` asks for mid-stream checkpoints).

Endpoint: ``GET /users?since=..&limit=N[&cursor=TOKEN]`` in ``(updatedAt, id)`` order,
answering ``{"data": [...], "next_cursor": TOKEN | null}``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, MutableMapping
from datetime import UTC, datetime
from typing import Any

import requests
from airbyte_cdk.sources import AbstractSource
from airbyte_cdk.sources.streams import CheckpointMixin, Stream
from airbyte_cdk.sources.streams.http import HttpStream
from airbyte_cdk.sources.streams.http.requests_native_auth import TokenAuthenticator

QUERY_FORMAT = "%Y-%m-%dT%H:%M:%SZ"


def parse_datetime(value: Any) -> datetime:
    """ISO-8601 text (what airbyte-cdk writes a datetime state as) or a datetime, as an aware datetime."""
    if isinstance(value, datetime):
        moment = value
    else:
        moment = datetime.fromisoformat(str(value).replace("Z", "+00:00"))
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


class ShopStream(HttpStream):
    page_size = 40

    def __init__(self, config: Mapping[str, Any], **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._url_base = config["api_url"].rstrip("/") + "/"

    @property
    def url_base(self) -> str:
        return self._url_base

    def next_page_token(self, response: requests.Response) -> Mapping[str, Any] | None:
        token = response.json().get("next_cursor")
        return {"cursor": token} if token else None

    def parse_response(self, response: requests.Response, **kwargs: Any) -> Iterable[Mapping[str, Any]]:
        yield from response.json()["data"]


class Users(ShopStream, CheckpointMixin):
    primary_key = "id"
    cursor_field = "updatedAt"
    state_checkpoint_interval = 50

    def __init__(self, config: Mapping[str, Any], **kwargs: Any) -> None:
        super().__init__(config, **kwargs)
        self._cursor_value: datetime = parse_datetime(config["start_date"])
        self._initial_cursor: datetime = self._cursor_value

    @property
    def state(self) -> MutableMapping[str, Any]:
        return {self.cursor_field: self._cursor_value}

    @state.setter
    def state(self, value: MutableMapping[str, Any]) -> None:
        if self.cursor_field in value:
            self._cursor_value = self._initial_cursor = max(parse_datetime(value[self.cursor_field]), self._cursor_value)

    def path(self, **kwargs: Any) -> str:
        return "users"

    def request_params(
        self,
        stream_state: Mapping[str, Any] | None,
        stream_slice: Mapping[str, Any] | None = None,
        next_page_token: Mapping[str, Any] | None = None,
    ) -> MutableMapping[str, Any]:
        since: datetime = self.state[self.cursor_field]
        params = {"since": since.strftime(QUERY_FORMAT), "limit": self.page_size}
        if next_page_token:
            params.update(next_page_token)
        return params

    def filter_by_state(self, record: Mapping[str, Any]) -> bool:
        """Keep records at or after the state the sync started from; move the cursor forward."""
        record_value = parse_datetime(record[self.cursor_field])
        self._cursor_value = max(self._cursor_value, record_value)
        return record_value >= self._initial_cursor

    def read_records(self, *args: Any, **kwargs: Any) -> Iterable[Mapping[str, Any]]:
        for record in super().read_records(*args, **kwargs):
            if self.filter_by_state(record):
                yield record


class SourceShopUsers(AbstractSource):
    def check_connection(self, logger: Any, config: Mapping[str, Any]) -> tuple[bool, Any]:
        try:
            next(Users(config, authenticator=TokenAuthenticator(token=config["api_key"])).read_records(sync_mode=None), None)
            return True, None
        except Exception as error:
            return False, f"cannot read users: {error}"

    def streams(self, config: Mapping[str, Any]) -> list[Stream]:
        return [Users(config, authenticator=TokenAuthenticator(token=config["api_key"]))]


def build_source(config: Any = None, catalog: Any = None, state: Any = None) -> SourceShopUsers:
    return SourceShopUsers()
