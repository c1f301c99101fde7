"""The date-window manifest of ``declarative_datetime`` with a ``lookback_window``: each sync reads
again the days before its state, as manifest-only connectors do for records that arrive late
(source-stripe's ``lookback_window``, set from its config). Not one of ``STYLES``: only
``test_lookback_window.py`` runs it.

``declarative_lookback_events`` is the same source without a primary key (an event log).
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

import yaml
from airbyte_cdk.models import AirbyteStateMessage, ConfiguredAirbyteCatalog
from airbyte_cdk.sources.declarative.concurrent_declarative_source import ConcurrentDeclarativeSource

from .declarative_datetime import MANIFEST

LOOKBACK = "P60D"

with open(MANIFEST, encoding="utf-8") as _file:
    _BASE = yaml.safe_load(_file)


def manifest(primary_key: bool) -> dict[str, Any]:
    built = copy.deepcopy(_BASE)
    built["definitions"]["incremental_sync"]["lookback_window"] = LOOKBACK
    if not primary_key:
        del built["definitions"]["base_stream"]["primary_key"]
    return built


class SourceShopLookback(ConcurrentDeclarativeSource):
    primary_key = True

    def __init__(
        self,
        catalog: ConfiguredAirbyteCatalog | None,
        config: Mapping[str, Any] | None,
        state: list[AirbyteStateMessage] | None,
    ) -> None:
        super().__init__(catalog=catalog or ConfiguredAirbyteCatalog(streams=[]), config=config or {}, state=state or [],
                         source_config=manifest(self.primary_key))


def build_source(config: Any = None, catalog: Any = None, state: Any = None) -> SourceShopLookback:
    return SourceShopLookback(catalog, config, state)
