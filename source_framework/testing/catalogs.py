"""Configured catalogs for the acceptance reads, and what the checks need to know per stream."""

from __future__ import annotations

import copy
import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from source_framework.runtime.stream_adapter_base import value_at

FieldPath = tuple[str, ...]
_FULL_REFRESH = {"sync_mode": "full_refresh", "destination_sync_mode": "overwrite"}


@dataclass(frozen=True)
class StreamInfo:
    name: str
    namespace: str | None
    incremental: bool
    cursor_path: FieldPath | None
    primary_key: tuple[FieldPath, ...]
    json_schema: Mapping[str, Any]

    def cursor_value(self, record: Mapping[str, Any]) -> Any:
        return value_at(record, self.cursor_path) if self.cursor_path else None

    def identity(self, record: Mapping[str, Any]) -> str:
        """The record's primary key (as JSON), or the whole record when the stream has none."""
        if self.primary_key:
            return json.dumps([value_at(record, path) for path in self.primary_key], sort_keys=True, default=str)
        return json.dumps(record, sort_keys=True, default=str)


def load_catalog(path: str) -> dict[str, Any]:
    """The configured catalog a test names; a missing or unreadable file is a ValueError naming it."""
    catalog = load_json(path, "configured_catalog_path")
    if not isinstance(catalog, dict) or not isinstance(catalog.get("streams"), list):
        raise ValueError(f"'{path}' is not a configured catalog (no 'streams' list)")
    return catalog


def load_json(path: str, key: str) -> Any:
    try:
        with open(path, encoding="utf-8") as handle:
            return json.load(handle)
    except FileNotFoundError:
        raise ValueError(f"{key} '{path}' does not exist") from None
    except (OSError, ValueError) as error:
        raise ValueError(f"{key} '{path}' is not a readable JSON file: {error}") from None


def incremental_only(catalog: Mapping[str, Any]) -> dict[str, Any]:
    return {"streams": [copy.deepcopy(s) for s in catalog["streams"] if s.get("sync_mode") == "incremental"]}


def as_full_refresh(catalog: Mapping[str, Any]) -> dict[str, Any]:
    return {"streams": [{**copy.deepcopy(configured), **_FULL_REFRESH} for configured in catalog["streams"]]}


def from_discovered(discovered: Mapping[str, Any], without: tuple[str, ...] = ()) -> dict[str, Any]:
    return {"streams": [
        {"stream": stream, **_FULL_REFRESH, "primary_key": stream.get("source_defined_primary_key") or []}
        for stream in discovered.get("streams", []) if stream["name"] not in without
    ]}


def stream_infos(catalog: Mapping[str, Any]) -> dict[str, StreamInfo]:
    infos: dict[str, StreamInfo] = {}
    for configured in catalog["streams"]:
        stream = configured["stream"]
        cursor = configured.get("cursor_field") or stream.get("default_cursor_field") or []
        primary_key = configured.get("primary_key") or stream.get("source_defined_primary_key") or []
        infos[stream["name"]] = StreamInfo(
            name=stream["name"],
            namespace=stream.get("namespace"),
            incremental=configured.get("sync_mode") == "incremental",
            cursor_path=tuple(cursor) if cursor else None,
            primary_key=tuple(_key_path(part) for part in primary_key),
            json_schema=stream.get("json_schema") or {},
        )
    return infos


def _key_path(part: Any) -> FieldPath:
    return tuple(part) if isinstance(part, (list, tuple)) else (str(part),)


def stream_names(catalog: Mapping[str, Any]) -> list[str]:
    return [s["stream"]["name"] for s in catalog["streams"]]
