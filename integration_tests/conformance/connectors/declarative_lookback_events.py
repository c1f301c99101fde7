"""``declarative_lookback`` without a primary key: its records are events, known by their data."""

from __future__ import annotations

from typing import Any

from .declarative_lookback import SourceShopLookback


class SourceShopLookbackEvents(SourceShopLookback):
    primary_key = False


def build_source(config: Any = None, catalog: Any = None, state: Any = None) -> SourceShopLookbackEvents:
    return SourceShopLookbackEvents(catalog, config, state)
