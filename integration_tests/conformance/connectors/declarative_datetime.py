"""A declarative (YAML manifest) source: ``DatetimeBasedCursor`` date windows, one stream with
``CursorPagination`` and one with page numbers (``PageIncrement``); two slices at a time
(``concurrency_level``).

The style of manifest-only connectors such as source-stripe (``DatetimeBasedCursor`` with a
``step``, ``start_time_option``/``end_time_option`` request parameters, ``end_datetime`` at
``now_utc()``, ``JsonFileSchemaLoader`` under the package) and source-gitlab (``PageIncrement``
with ``page``/``per_page``), and of their ``run.py``: the ``YamlDeclarativeSource`` subclass is
built with the catalog, config and state of the command line (source-stripe's ``_get_source``).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

from airbyte_cdk.models import AirbyteStateMessage, ConfiguredAirbyteCatalog
from airbyte_cdk.sources.declarative.yaml_declarative_source import (
    YamlDeclarativeSource,
)

MANIFEST = os.path.join(os.path.dirname(os.path.abspath(__file__)), "manifests", "datetime_cursor.yaml")


class SourceShopDatetime(YamlDeclarativeSource):
    def __init__(
        self,
        catalog: ConfiguredAirbyteCatalog | None,
        config: Mapping[str, Any] | None,
        state: list[AirbyteStateMessage] | None,
        **kwargs: Any,
    ) -> None:
        super().__init__(catalog=catalog, config=config, state=state, **{"path_to_yaml": MANIFEST})


def build_source(config: Any = None, catalog: Any = None, state: Any = None) -> SourceShopDatetime:
    return SourceShopDatetime(catalog, config, state)
