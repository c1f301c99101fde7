"""A plain ``Stream`` + ``IncrementalMixin`` that sets its own state inside ``read_records``;
no slices.

The style of source-faker's ``Products``/``Users`` streams: ``read_records`` does all the work
(here with a small API client instead of a generator), yields one batch of records at a time
and assigns ``self.state`` after each batch and once more at the end;
``state_checkpoint_interval`` is the batch size, so airbyte-cdk asks for a checkpoint right
after the last record of a batch, before the stream has assigned that batch's state: every
checkpoint trails its records by one batch, as source-faker's do.

Endpoint: ``GET /users?since=..&limit=N[&cursor=TOKEN]``.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from typing import Any

import requests
from airbyte_cdk.sources import AbstractSource
from airbyte_cdk.sources.streams import IncrementalMixin, Stream


class ShopClient:
    """What a vendor SDK would be: one authenticated session, one method per listing."""

    def __init__(self, api_url: str, api_key: str) -> None:
        self.api_url = api_url.rstrip("/")
        self.session = requests.Session()
        self.session.headers["Authorization"] = f"Bearer {api_key}"

    def user_batches(self, since: str, batch_size: int) -> Iterator[list[Mapping[str, Any]]]:
        params = {"since": since, "limit": batch_size}
        while True:
            response = self.session.get(f"{self.api_url}/users", params=params, timeout=30)
            response.raise_for_status()
            body = response.json()
            if body["data"]:
                yield body["data"]
            if not body.get("next_cursor"):
                return
            params["cursor"] = body["next_cursor"]


class Users(Stream, IncrementalMixin):
    primary_key = "id"
    cursor_field = "updatedAt"

    def __init__(self, client: ShopClient, start_date: str, records_per_slice: int, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.client = client
        self.start_date = start_date
        self.records_per_slice = records_per_slice

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

    def read_records(self, **kwargs: Any) -> Iterable[Mapping[str, Any]]:
        since = self.state.get(self.cursor_field) or self.start_date
        batches = self.state.get("batches", 0)
        updated_at = since
        for batch in self.client.user_batches(since, self.records_per_slice):
            for user in batch:
                updated_at = max(updated_at, user[self.cursor_field])
                yield user
            batches += 1
            self.state = {self.cursor_field: updated_at, "batches": batches}
        self.state = {self.cursor_field: updated_at, "batches": batches}


class SourceShopUsersClient(AbstractSource):
    def check_connection(self, logger: Any, config: Mapping[str, Any]) -> tuple[bool, Any]:
        try:
            next(ShopClient(config["api_url"], config["api_key"]).user_batches(config["start_date"], 1), None)
            return True, None
        except requests.RequestException as error:
            return False, f"cannot list users: {error}"

    def streams(self, config: Mapping[str, Any]) -> list[Stream]:
        client = ShopClient(config["api_url"], config["api_key"])
        return [Users(client, config["start_date"], records_per_slice=int(config.get("records_per_slice", 40)))]


def build_source(config: Any = None, catalog: Any = None, state: Any = None) -> SourceShopUsersClient:
    return SourceShopUsersClient()
