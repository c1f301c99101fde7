"""``HttpStream`` + ``IncrementalMixin`` read in date windows: one slice per window.

The style of airbyte's Python HTTP tutorial source (``ExchangeRates``: a ``_cursor_value``
behind the ``state`` property, ``read_records`` wrapping ``super().read_records`` to move the
cursor, ``stream_slices`` chunking the range from the state (or the start date) to now) and of
reporting streams such as source-mintegral's and source-hubspot's chunked ``IncrementalStream``:
``start``/``end`` query parameters per window, numbered pages inside a window.

Endpoint: ``GET /orders?start=..&end=..&page=N&per_page=M`` (``start <= updatedAt < end``),
answering ``{"data": [...], "page": N, "total_pages": T}``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, MutableMapping
from datetime import UTC, datetime, timedelta
from typing import Any

import requests
from airbyte_cdk.models import SyncMode
from airbyte_cdk.sources import AbstractSource
from airbyte_cdk.sources.streams import IncrementalMixin, Stream
from airbyte_cdk.sources.streams.http import HttpStream
from airbyte_cdk.sources.streams.http.requests_native_auth import TokenAuthenticator

DATETIME_FORMAT = "%Y-%m-%dT%H:%M:%SZ"


def _parse(value: str) -> datetime:
    return datetime.strptime(value, DATETIME_FORMAT).replace(tzinfo=UTC)


class Orders(HttpStream, IncrementalMixin):
    primary_key = "id"
    cursor_field = "updatedAt"
    window_days = 90
    page_size = 50

    def __init__(self, config: Mapping[str, Any], start_date: datetime, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._url_base = config["api_url"].rstrip("/") + "/"
        self.start_date = start_date
        self._cursor_value: datetime | None = None

    @property
    def url_base(self) -> str:
        return self._url_base

    @property
    def state(self) -> Mapping[str, Any]:
        if self._cursor_value:
            return {self.cursor_field: self._cursor_value.strftime(DATETIME_FORMAT)}
        return {self.cursor_field: self.start_date.strftime(DATETIME_FORMAT)}

    @state.setter
    def state(self, value: Mapping[str, Any]) -> None:
        if value.get(self.cursor_field):
            self._cursor_value = _parse(value[self.cursor_field])

    def path(self, **kwargs: Any) -> str:
        return "orders"

    def _chunk_date_range(self, start_date: datetime) -> list[Mapping[str, Any]]:
        """Windows of ``window_days`` from ``start_date`` up to now."""
        windows = []
        now = datetime.now(UTC)
        while start_date < now:
            end_date = min(start_date + timedelta(days=self.window_days), now)
            windows.append({"start": start_date.strftime(DATETIME_FORMAT), "end": end_date.strftime(DATETIME_FORMAT)})
            start_date = end_date
        return windows

    def stream_slices(
        self, sync_mode: SyncMode, cursor_field: list[str] | None = None, stream_state: Mapping[str, Any] | None = None
    ) -> Iterable[Mapping[str, Any] | None]:
        if stream_state and stream_state.get(self.cursor_field):
            start_date = max(_parse(stream_state[self.cursor_field]), self.start_date)
        else:
            start_date = self.start_date
        return self._chunk_date_range(start_date)

    def request_params(
        self,
        stream_state: Mapping[str, Any] | None,
        stream_slice: Mapping[str, Any] | None = None,
        next_page_token: Mapping[str, Any] | None = None,
    ) -> MutableMapping[str, Any]:
        params = {"start": stream_slice["start"], "end": stream_slice["end"], "per_page": self.page_size}
        if next_page_token:
            params.update(next_page_token)
        return params

    def next_page_token(self, response: requests.Response) -> Mapping[str, Any] | None:
        body = response.json()
        if body["page"] < body["total_pages"]:
            return {"page": body["page"] + 1}
        return None

    def parse_response(self, response: requests.Response, **kwargs: Any) -> Iterable[Mapping[str, Any]]:
        yield from response.json()["data"]

    def read_records(self, *args: Any, **kwargs: Any) -> Iterable[Mapping[str, Any]]:
        for record in super().read_records(*args, **kwargs):
            latest = _parse(record[self.cursor_field])
            self._cursor_value = max(self._cursor_value, latest) if self._cursor_value else latest
            yield record


class SourceOrdersByWindow(AbstractSource):
    def check_connection(self, logger: Any, config: Mapping[str, Any]) -> tuple[bool, Any]:
        try:
            response = requests.get(
                config["api_url"].rstrip("/") + "/me", headers={"Authorization": f"Bearer {config['api_key']}"}, timeout=10
            )
            response.raise_for_status()
            return True, None
        except requests.RequestException as error:
            return False, f"cannot reach the API: {error}"

    def streams(self, config: Mapping[str, Any]) -> list[Stream]:
        auth = TokenAuthenticator(token=config["api_key"])
        return [Orders(config=config, start_date=_parse(config["start_date"]), authenticator=auth)]


def build_source(config: Any = None, catalog: Any = None, state: Any = None) -> SourceOrdersByWindow:
    return SourceOrdersByWindow()
