"""A Python source on airbyte-cdk's concurrent framework: ``ConcurrentSourceAdapter`` + ``StreamFacade``.

The style of source-stripe's and source-salesforce's ``source.py`` before they became manifests:
an ``AbstractSource`` subclass of ``ConcurrentSourceAdapter`` built in ``run.py`` with the
catalog, config and state of the command line; ``streams()`` builds a ``ConnectorStateManager``
from that state, writes its ``HttpStream``s as usual and wraps each with
``StreamFacade.create_from_stream``: the incremental one with a ``ConcurrentCursor`` on its
datetime cursor field (the slice boundaries are the stream's own ``start``/``end`` window
keys), the full-refresh one with a ``FinalStateCursor``. airbyte-cdk reads the facades'
underlying ``DefaultStream``s concurrently; their state is the cursor's, in the stream's own
sequential form (``{"updatedAt": "..."}``).

The orders stream also yields a LOG message per date window from ``read_records``; airbyte-cdk
passes it through the source's message repository to stdout, and so must ours.

Endpoints: ``GET /orders?start=..&end=..&page=N&per_page=M`` (``start <= updatedAt < end``),
``GET /stores`` (one page).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping, MutableMapping
from datetime import UTC, datetime, timedelta
from typing import Any

import requests
from airbyte_cdk.models import (
    AirbyteLogMessage,
    AirbyteMessage,
    AirbyteStateMessage,
    ConfiguredAirbyteCatalog,
    Level,
    SyncMode,
    Type,
)
from airbyte_cdk.sources.concurrent_source.concurrent_source import ConcurrentSource
from airbyte_cdk.sources.concurrent_source.concurrent_source_adapter import ConcurrentSourceAdapter
from airbyte_cdk.sources.connector_state_manager import ConnectorStateManager
from airbyte_cdk.sources.message import InMemoryMessageRepository, MessageRepository
from airbyte_cdk.sources.streams import Stream
from airbyte_cdk.sources.streams.concurrent.adapters import StreamFacade
from airbyte_cdk.sources.streams.concurrent.cursor import ConcurrentCursor, CursorField, FinalStateCursor
from airbyte_cdk.sources.streams.concurrent.state_converters.datetime_stream_state_converter import (
    CustomFormatConcurrentStreamStateConverter,
)
from airbyte_cdk.sources.streams.http import HttpStream
from airbyte_cdk.sources.streams.http.requests_native_auth import TokenAuthenticator
from airbyte_cdk.sources.types import StreamSlice

DATETIME_FORMAT = "%Y-%m-%dT%H:%M:%SZ"
DEFAULT_CONCURRENCY = 2
#: what the LOG messages the orders stream yields start with (the tests look for them)
LOG_PREFIX = "conformance: orders window"

logger = logging.getLogger("airbyte")


def _parse(value: str) -> datetime:
    return datetime.strptime(value, DATETIME_FORMAT).replace(tzinfo=UTC)


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


class Orders(ShopStream):
    cursor_field = "updatedAt"
    window_days = 60
    page_size = 50

    def __init__(self, config: Mapping[str, Any], **kwargs: Any) -> None:
        super().__init__(config, **kwargs)
        self.start_date = _parse(config["start_date"])

    def path(self, **kwargs: Any) -> str:
        return "orders"

    def stream_slices(
        self, sync_mode: SyncMode, cursor_field: list[str] | None = None, stream_state: Mapping[str, Any] | None = None
    ) -> Iterable[StreamSlice]:
        """Windows from the state's cursor (or the start date) up to now, as ``StreamSlice``s (the
        concurrent cursor keys its records by slice, so a slice must be hashable): the cursor
        records each closed window as a ``start``/``end`` interval."""
        start = self.start_date
        if stream_state and stream_state.get(self.cursor_field):
            start = max(start, _parse(stream_state[self.cursor_field]))
        now = datetime.now(UTC)
        while start < now:
            end = min(start + timedelta(days=self.window_days), now)
            yield StreamSlice(partition={}, cursor_slice={"start": start.strftime(DATETIME_FORMAT), "end": end.strftime(DATETIME_FORMAT)})
            start = end

    def request_params(
        self,
        stream_state: Mapping[str, Any] | None,
        stream_slice: Mapping[str, Any] | None = None,
        next_page_token: Mapping[str, Any] | None = None,
    ) -> MutableMapping[str, Any]:
        assert stream_slice is not None
        return {"start": stream_slice["start"], "end": stream_slice["end"], "per_page": self.page_size, **(next_page_token or {})}

    def next_page_token(self, response: requests.Response) -> Mapping[str, Any] | None:
        body = response.json()
        return {"page": body["page"] + 1} if body["page"] < body["total_pages"] else None

    def read_records(
        self,
        sync_mode: SyncMode,
        cursor_field: list[str] | None = None,
        stream_slice: Mapping[str, Any] | None = None,
        stream_state: Mapping[str, Any] | None = None,
    ) -> Iterable[Mapping[str, Any] | AirbyteMessage]:
        assert stream_slice is not None
        yield AirbyteMessage(
            type=Type.LOG,
            log=AirbyteLogMessage(level=Level.INFO, message=f"{LOG_PREFIX} from {stream_slice['start']}"),
        )
        yield from super().read_records(sync_mode, cursor_field, stream_slice, stream_state)


class Stores(ShopStream):
    def path(self, **kwargs: Any) -> str:
        return "stores"

    def next_page_token(self, response: requests.Response) -> Mapping[str, Any] | None:
        return None


class SourceShopConcurrent(ConcurrentSourceAdapter):
    def __init__(
        self,
        catalog: ConfiguredAirbyteCatalog | None,
        config: Mapping[str, Any] | None,
        state: list[AirbyteStateMessage] | None,
        **kwargs: Any,
    ) -> None:
        self._message_repository = InMemoryMessageRepository(Level.INFO)
        concurrency = int((config or {}).get("num_workers", DEFAULT_CONCURRENCY))
        concurrent_source = ConcurrentSource.create(
            concurrency, max(concurrency // 2, 1), logger, self._slice_logger, self._message_repository
        )
        super().__init__(concurrent_source)
        self._state = state
        self._full_refresh = (
            {s.stream.name for s in catalog.streams if s.sync_mode == SyncMode.full_refresh} if catalog else set()
        )

    @property
    def message_repository(self) -> MessageRepository:
        return self._message_repository

    def check_connection(self, logger: Any, config: Mapping[str, Any]) -> tuple[bool, Any]:
        response = requests.get(
            config["api_url"].rstrip("/") + "/stores", headers={"Authorization": f"Bearer {config['api_key']}"}, timeout=10
        )
        return (True, None) if response.ok else (False, f"stores answered {response.status_code}")

    def streams(self, config: Mapping[str, Any]) -> list[Stream]:
        state_manager = ConnectorStateManager(state=self._state)
        auth = TokenAuthenticator(token=config["api_key"])
        orders = Orders(config, authenticator=auth)
        stores = Stores(config, authenticator=auth)
        return [self._incremental(orders, state_manager), self._full_refresh_only(stores)]

    def _incremental(self, stream: Orders, state_manager: ConnectorStateManager) -> Stream:
        if stream.name in self._full_refresh:
            return self._full_refresh_only(stream)
        state = state_manager.get_stream_state(stream.name, stream.namespace)
        converter = CustomFormatConcurrentStreamStateConverter(DATETIME_FORMAT)
        cursor = ConcurrentCursor(
            stream.name,
            stream.namespace,
            state,
            self.message_repository,
            state_manager,
            converter,
            CursorField(stream.cursor_field),
            ("start", "end"),
            stream.start_date,
            converter.get_end_provider(),
        )
        return StreamFacade.create_from_stream(stream, self, logger, state, cursor)

    def _full_refresh_only(self, stream: Stream) -> Stream:
        cursor = FinalStateCursor(stream.name, stream.namespace, self.message_repository)
        return StreamFacade.create_from_stream(stream, self, logger, {}, cursor)


def build_source(config: Any = None, catalog: Any = None, state: Any = None) -> SourceShopConcurrent:
    return SourceShopConcurrent(catalog, config, state)
