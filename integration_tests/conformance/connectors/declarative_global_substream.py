"""A declarative (YAML manifest) source whose substream keeps ONE cursor for all its partitions:
``global_substream_cursor: true`` on the ``DatetimeBasedCursor`` of a ``SubstreamPartitionRouter``
(one partition per parent store). Its state is airbyte-cdk's global form, ``{"use_global_cursor":
true, "state": {"updatedAt": ...}, "lookback_window": ..., "parent_state": {}}``, which moves only
once every partition is read: a sync that dies before reads every partition again.

The style of published manifests whose partitions are many, or change from sync to sync, so
that a per-partition state would grow or mislead (``global_substream_cursor``, often with
``incremental_dependency`` on the parent), and of their ``run.py``: built with the catalog,
config and state of the command line. The manifest is ``declarative_substream``'s
with that change.
"""

from __future__ import annotations

from typing import Any

from .declarative_substream import SubstreamVariant


class SourceShopStoresGlobalCursor(SubstreamVariant):
    @staticmethod
    def edit(manifest: dict[str, Any]) -> None:
        manifest["definitions"]["store_orders_stream"]["incremental_sync"]["global_substream_cursor"] = True


def build_source(config: Any = None, catalog: Any = None, state: Any = None) -> SourceShopStoresGlobalCursor:
    return SourceShopStoresGlobalCursor(catalog, config, state)
