"""A declarative (YAML manifest) source whose substream keeps ONE cursor for all its partitions:
``global_substream_cursor: true`` on the ``DatetimeBasedCursor`` of a ``SubstreamPartitionRouter``
(one partition per parent store). Its state is airbyte-cdk's global form, ``{"use_global_cursor":
true, "state": {"updatedAt": ...}, "lookback_window": ..., "parent_state": {}}``, which moves only
once every partition is read: a sync that dies before reads every partition again.

The style of published manifests whose partitions are many, or change from sync to sync, so
that a per-partition state would grow or mislead (``global_substream_cursor``, often with
``incremental_dependency`` on the parent), and of their ``run.py``: built with the catalog,
config and state of the command line. Otherwise the manifest is
``declarative_substream``'s.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

from airbyte_cdk.models import AirbyteStateMessage, ConfiguredAirbyteCatalog
from airbyte_cdk.sources.declarative.yaml_declarative_source import (
    YamlDeclarativeSource,
)

MANIFEST = os.path.join(os.path.dirname(os.path.abspath(__file__)), "manifests", "global_substream.yaml")


class SourceShopStoresGlobalCursor(YamlDeclarativeSource):
    def __init__(
        self,
        catalog: ConfiguredAirbyteCatalog | None,
        config: Mapping[str, Any] | None,
        state: list[AirbyteStateMessage] | None,
        **kwargs: Any,
    ) -> None:
        super().__init__(catalog=catalog, config=config, state=state, **{"path_to_yaml": MANIFEST})


def build_source(config: Any = None, catalog: Any = None, state: Any = None) -> SourceShopStoresGlobalCursor:
    return SourceShopStoresGlobalCursor(catalog, config, state)
