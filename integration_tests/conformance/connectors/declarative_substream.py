"""A declarative (YAML manifest) source with a ``SubstreamPartitionRouter``: one partition per
parent store, a ``DatetimeBasedCursor`` per partition (per-partition state), plus two
full-refresh declarative streams (the parent itself, and products paged with
``OffsetIncrement``).

The style of manifest-only connectors such as source-zendesk-support (``ParentStreamConfig``
with ``parent_key``/``partition_field``, the partition in the request path through
``stream_partition``, ``CursorPagination`` over a ``next`` value of the response) and of their
``run.py``: built with the catalog, config and state of the command line.
"""

from __future__ import annotations

import copy
import functools
import os
from collections.abc import Mapping
from typing import Any

import yaml
from airbyte_cdk.models import AirbyteStateMessage, ConfiguredAirbyteCatalog
from airbyte_cdk.sources.declarative.concurrent_declarative_source import ConcurrentDeclarativeSource
from airbyte_cdk.sources.declarative.yaml_declarative_source import (
    YamlDeclarativeSource,
)

MANIFEST = os.path.join(os.path.dirname(os.path.abspath(__file__)), "manifests", "substream_router.yaml")


class SourceShopStoresDeclarative(YamlDeclarativeSource):
    def __init__(
        self,
        catalog: ConfiguredAirbyteCatalog | None,
        config: Mapping[str, Any] | None,
        state: list[AirbyteStateMessage] | None,
        **kwargs: Any,
    ) -> None:
        super().__init__(catalog=catalog, config=config, state=state, **{"path_to_yaml": MANIFEST})


def build_source(config: Any = None, catalog: Any = None, state: Any = None) -> SourceShopStoresDeclarative:
    return SourceShopStoresDeclarative(catalog, config, state)


class SubstreamVariant(ConcurrentDeclarativeSource):
    """This manifest with one change (``edit``, in place), built as ``run.py`` builds the source:
    the styles ``declarative_global_substream`` and ``declarative_incremental_parent``."""

    @staticmethod
    def edit(manifest: dict[str, Any]) -> None:
        raise NotImplementedError

    def __init__(
        self,
        catalog: ConfiguredAirbyteCatalog | None,
        config: Mapping[str, Any] | None,
        state: list[AirbyteStateMessage] | None,
    ) -> None:
        manifest = copy.deepcopy(_manifest())
        self.edit(manifest)
        super().__init__(catalog=catalog or ConfiguredAirbyteCatalog(streams=[]), config=config or {}, state=state or [],
                         source_config=manifest)


@functools.cache
def _manifest() -> dict[str, Any]:
    with open(MANIFEST, encoding="utf-8") as file:
        return yaml.safe_load(file)
