"""The tiny connector: two streams over ``tiny_api``, written as any connector author would.

- ``notes``: incremental on an integer cursor (``version``), page-number pagination,
  a checkpoint every 25 records;
- ``authors``: full refresh.

``"base_url": "embedded"`` starts the tiny API in this process (once), so every run sees the
same data without any set-up. ``"ignore_state": true`` is a bug on purpose: ``notes`` then
reads from the start whatever its state, which the acceptance runner's own tests must catch.
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Iterable, Mapping, MutableMapping
from typing import Any

import requests

from source_framework import HttpStream, IncrementalHttpStream, Source

HERE = os.path.dirname(os.path.abspath(__file__))
_embedded: dict = {}


def base_url(config: Mapping[str, Any]) -> str:
    url = config.get("base_url", "embedded")
    if url == "embedded":
        if "url" not in _embedded:
            import tiny_api

            _embedded["url"] = tiny_api.start()
        url = _embedded["url"]
    return url.rstrip("/") + "/"


class TinyStream(HttpStream):
    primary_key = "id"

    def __init__(self, config: Mapping[str, Any]) -> None:
        super().__init__()
        self._url_base = base_url(config)
        self._api_key = config["api_key"]

    @property
    def url_base(self) -> str:
        return self._url_base

    def request_headers(self, **kwargs: Any) -> Mapping[str, Any]:
        return {"X-Api-Key": self._api_key}

    def get_json_schema(self) -> Mapping[str, Any]:
        with open(os.path.join(HERE, "schemas", f"{self.name}.json"), encoding="utf-8") as handle:
            return json.load(handle)

    def parse_response(self, response: requests.Response, **kwargs: Any) -> Iterable[Mapping[str, Any]]:
        yield from response.json()["data"]


class Notes(TinyStream, IncrementalHttpStream):
    cursor_field = "version"
    state_checkpoint_interval = 25

    def __init__(self, config: Mapping[str, Any]) -> None:
        super().__init__(config)
        self.ignore_state = bool(config.get("ignore_state", False))

    def path(self, **kwargs: Any) -> str:
        return "notes"

    def request_params(self, stream_state=None, stream_slice=None, next_page_token=None) -> MutableMapping[str, Any]:
        since = 0 if self.ignore_state else (stream_state or {}).get("version", 0)
        return {"min_version": since, **(next_page_token or {})}

    def next_page_token(self, response: requests.Response) -> Mapping[str, Any] | None:
        following = response.json()["next_page"]
        return {"page": following} if following else None


class Authors(TinyStream):
    def path(self, **kwargs: Any) -> str:
        return "authors"

    def next_page_token(self, response: requests.Response) -> Mapping[str, Any] | None:
        return None


class TinySource(Source):
    source_name = "tiny"

    def check_connection(self, logger: logging.Logger, config: Mapping[str, Any]) -> tuple[bool, Any | None]:
        try:
            response = requests.get(base_url(config) + "authors", headers={"X-Api-Key": config["api_key"]}, timeout=10)
        except requests.RequestException as error:
            return False, f"cannot reach the tiny API: {error}"
        if response.status_code == 401:
            return False, "the tiny API refused the api_key"
        return response.status_code == 200, None if response.status_code == 200 else f"HTTP {response.status_code}"

    def streams(self, config: Mapping[str, Any]) -> list[HttpStream]:
        return [Notes(config), Authors(config)]
