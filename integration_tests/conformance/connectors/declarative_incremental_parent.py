"""A declarative (YAML manifest) substream whose parent is incremental and whose state carries
the parent's: ``incremental_dependency: true`` on the ``ParentStreamConfig``. The parent, stores,
is incremental on ``openedAt``, filtered on the client (``is_client_side_incremental``: the API
has no filter for it); store_orders keeps a cursor per store and, under ``parent_state``, the
stores' cursor, which airbyte-cdk moves only once the partitions of the stores read before it
are done. A later sync reads the orders of new stores only.

The style of published manifests whose child streams follow an incremental parent (issues and
their comments, pipelines and their jobs), and of their ``run.py``: built with the catalog,
config and state of the command line. Otherwise the manifest is ``declarative_substream``'s.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

from airbyte_cdk.models import AirbyteStateMessage, ConfiguredAirbyteCatalog
from airbyte_cdk.sources.declarative.yaml_declarative_source import (
    YamlDeclarativeSource,
)

MANIFEST = os.path.join(os.path.dirname(os.path.abspath(__file__)), "manifests", "incremental_parent.yaml")


class SourceShopStoresIncrementalParent(YamlDeclarativeSource):
    def __init__(
        self,
        catalog: ConfiguredAirbyteCatalog | None,
        config: Mapping[str, Any] | None,
        state: list[AirbyteStateMessage] | None,
        **kwargs: Any,
    ) -> None:
        super().__init__(catalog=catalog, config=config, state=state, **{"path_to_yaml": MANIFEST})


def build_source(config: Any = None, catalog: Any = None, state: Any = None) -> SourceShopStoresIncrementalParent:
    return SourceShopStoresIncrementalParent(catalog, config, state)
