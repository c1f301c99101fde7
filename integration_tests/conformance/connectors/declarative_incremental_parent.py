"""A declarative (YAML manifest) substream whose parent is incremental and whose state carries
the parent's: ``incremental_dependency: true`` on the ``ParentStreamConfig``. The parent, stores,
is incremental on ``openedAt``, filtered on the client (``is_client_side_incremental``: the API
has no filter for it); store_orders keeps a cursor per store and, under ``parent_state``, the
stores' cursor, which airbyte-cdk moves only once the partitions of the stores read before it
are done. A later sync reads the orders of new stores only.

The style of published manifests whose child streams follow an incremental parent (issues and
their comments, pipelines and their jobs), and of their ``run.py``: built with the catalog,
config and state of the command line. The manifest is ``declarative_substream``'s with that change.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

import yaml
from airbyte_cdk.models import AirbyteStateMessage, ConfiguredAirbyteCatalog
from airbyte_cdk.sources.declarative.concurrent_declarative_source import ConcurrentDeclarativeSource

from .declarative_substream import MANIFEST

with open(MANIFEST, encoding="utf-8") as _file:
    _BASE = yaml.safe_load(_file)


def manifest() -> dict[str, Any]:
    built = copy.deepcopy(_BASE)
    definitions = built["definitions"]
    definitions["stores_stream"]["incremental_sync"] = {  # the API has no filter for it: on the client
        "type": "DatetimeBasedCursor",
        "cursor_field": "openedAt",
        "is_client_side_incremental": True,
        "datetime_format": "%Y-%m-%dT%H:%M:%SZ",
        "cursor_datetime_formats": ["%Y-%m-%dT%H:%M:%SZ"],
        "start_datetime": {"type": "MinMaxDatetime", "datetime": "2000-01-01T00:00:00Z", "datetime_format": "%Y-%m-%dT%H:%M:%SZ"},
    }
    (parent,) = definitions["store_orders_stream"]["retriever"]["partition_router"]["parent_stream_configs"]
    parent["incremental_dependency"] = True
    return built


class SourceShopStoresIncrementalParent(ConcurrentDeclarativeSource):
    def __init__(
        self,
        catalog: ConfiguredAirbyteCatalog | None,
        config: Mapping[str, Any] | None,
        state: list[AirbyteStateMessage] | None,
    ) -> None:
        super().__init__(catalog=catalog or ConfiguredAirbyteCatalog(streams=[]), config=config or {}, state=state or [],
                         source_config=manifest())


def build_source(config: Any = None, catalog: Any = None, state: Any = None) -> SourceShopStoresIncrementalParent:
    return SourceShopStoresIncrementalParent(catalog, config, state)
