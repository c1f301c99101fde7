"""airbyte-cdk's two kinds of streams (``Stream`` and the concurrent ``AbstractStream``) in the one shape the read loop drives.

A ``Stream`` is read the way airbyte-cdk's ``Stream.read`` does, so any stream that runs under airbyte-cdk runs here; a
``StreamFacade`` is read through the ``DefaultStream`` behind it, as airbyte-cdk does.
"""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Callable, Iterator, Mapping
from queue import Empty
from typing import Any

from airbyte_cdk.models import ConfiguredAirbyteStream
from airbyte_cdk.sources.declarative.concurrency_level import ConcurrencyLevel
from airbyte_cdk.sources.message.concurrent_repository import ConcurrentMessageRepository
from airbyte_cdk.sources.streams import Stream
from airbyte_cdk.sources.streams.concurrent.abstract_stream import AbstractStream

from source_framework.runtime.cdk_stream_adapter import CdkStreamAdapter
from source_framework.runtime.concurrent_stream_adapter import ConcurrentStreamAdapter
from source_framework.runtime.stream_adapter_base import (
    StreamAdapter,
    concurrent_stream,
    is_concurrent,
)

logger = logging.getLogger("source_framework.read")


def adapt(
    stream: Any,
    configured: ConfiguredAirbyteStream,
    rebuild: Callable[[Mapping[str, Any]], AbstractStream] | None = None,
    built_with: Mapping[str, Any] | None = None,
) -> StreamAdapter:
    """The adapter for ``stream``; ``rebuild(state)`` rebuilds a concurrent stream with another start state where the
    source allows it, else ``built_with`` is the state it was constructed with."""
    adapter: StreamAdapter
    if is_concurrent(stream):
        adapter = ConcurrentStreamAdapter(concurrent_stream(stream), configured, rebuild, dict(built_with or {}))
    elif isinstance(stream, Stream):
        adapter = CdkStreamAdapter(stream, configured)
    else:
        raise _not_a_stream(stream)
    ignored = adapter.ignored_catalog_cursor()
    if ignored:
        # airbyte-cdk ignores the catalog's cursor without a word; the user would believe the sync follows it.
        logger.warning(
            "stream %s: the catalog's cursor_field '%s' is not used: the stream's cursor is source-defined, '%s', "
            "and the stream is read on it (as airbyte-cdk reads it). Set the catalog's cursor_field to %s, or leave it out",
            adapter.name, ".".join(ignored), ".".join(adapter.cursor_field), json.dumps(adapter.cursor_field),
        )
    return adapter


def _not_a_stream(stream: Any) -> TypeError:
    return TypeError(
        f"stream '{getattr(stream, 'name', stream)}' is a {type(stream).__qualname__}, neither an airbyte-cdk "
        f"Stream nor an AbstractStream; the source's streams() must return one of those"
    )


class MessageDrain:
    """Messages a source's components emit outside the records a stream yields, taken in order by the read loop."""

    def __init__(self, source: Any) -> None:
        repository = getattr(source, "_message_repository", None) or getattr(source, "message_repository", None)
        self._repository = repository
        self._queue = repository._queue if isinstance(repository, ConcurrentMessageRepository) else None
        # Streams synced at once drain from their own threads, and airbyte-cdk's in-memory repository cannot be
        # consumed by two at a time.
        self._lock = threading.Lock()

    def __call__(self) -> Iterator[Any]:
        with self._lock:  # taken whole, then handed on: the lock is not held while a stream acts on them
            messages = list(self._take())
        yield from messages

    def _take(self) -> Iterator[Any]:
        if self._queue is not None:
            while True:
                try:
                    item = self._queue.get_nowait()
                except Empty:
                    break
                yield item
        if self._repository is not None:
            yield from self._repository.consume_queue()


def manifest_concurrency(source: Any, config: Mapping[str, Any]) -> int | None:
    """A declarative manifest's ``concurrency_level``, which its author set for the API: a sync reads no more slices at
    once. None for a source that declares none."""
    manifest = getattr(source, "resolved_manifest", None)
    declared = manifest.get("concurrency_level") if isinstance(manifest, Mapping) else None
    if not isinstance(declared, Mapping):
        return None
    level = ConcurrencyLevel(
        default_concurrency=declared["default_concurrency"],
        max_concurrency=declared.get("max_concurrency"),
        config=dict(config),
        parameters=declared.get("$parameters") or {},
    ).get_concurrency_level()
    return max(1, int(level))

