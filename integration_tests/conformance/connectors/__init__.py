"""Connectors for the conformance suite, one module per style found in published Airbyte sources.

Each module subclasses airbyte-cdk's own classes (never source_framework's) and exposes
``build_source(config, catalog, state)``: what that style's ``run.py`` hands to ``launch``.
Most Python sources ignore the three arguments; declarative ones and ``concurrent_adapter``
(a ``ConcurrentSourceAdapter``) need them at construction, as published connectors of those
styles do. Schemas live in ``schemas/`` and the spec in
``spec.json``, where airbyte-cdk's default loaders look for them (the package root).
"""

STYLES = (
    "date_slices",
    "checkpoint_mixin",
    "state_in_read_records",
    "airbyte_messages",
    "multiprocessing_pool",
    "http_substream",
    "declarative_datetime",
    "declarative_substream",
    "declarative_global_substream",
    "declarative_incremental_parent",
    "resumable_full_refresh",
    "concurrent_adapter",
    "next_page_token_snapshot",
    "next_page_token_sync_token",
    "legacy_inclusive_cursor",
    "oauth2_https",
    "python_values",
)
