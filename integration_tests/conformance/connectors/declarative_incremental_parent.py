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

from typing import Any

from .declarative_substream import SubstreamVariant


class SourceShopStoresIncrementalParent(SubstreamVariant):
    @staticmethod
    def edit(manifest: dict[str, Any]) -> None:
        definitions = manifest["definitions"]
        definitions["stores_stream"]["incremental_sync"] = {  # the API has no filter for it: on the client
            "type": "DatetimeBasedCursor",
            "cursor_field": "openedAt",
            "is_client_side_incremental": True,
            "datetime_format": "%Y-%m-%dT%H:%M:%SZ",
            "cursor_datetime_formats": ["%Y-%m-%dT%H:%M:%SZ"],
            "start_datetime": {"type": "MinMaxDatetime", "datetime": "2000-01-01T00:00:00Z",
                               "datetime_format": "%Y-%m-%dT%H:%M:%SZ"},
        }
        (parent,) = definitions["store_orders_stream"]["retriever"]["partition_router"]["parent_stream_configs"]
        parent["incremental_dependency"] = True


def build_source(config: Any = None, catalog: Any = None, state: Any = None) -> SourceShopStoresIncrementalParent:
    return SourceShopStoresIncrementalParent(catalog, config, state)
