"""airbyte-cdk's two kinds of streams, in the one shape the read loop drives.

airbyte-cdk 7 has two stream families, and published connectors use both:

- ``Stream`` (``HttpStream``, ``HttpSubStream``, every Python connector): slices from
  ``stream_slices()``, items from ``read_records(slice)``, and state kept by the stream itself:
  a ``state`` property (``CheckpointMixin``, ``IncrementalMixin``), a ``Cursor`` from
  ``get_cursor()`` (resumable full refresh, substreams), or the legacy ``get_updated_state``.
- ``AbstractStream`` (the concurrent framework: declarative YAML manifests, ``DefaultStream``):
  partitions from ``generate_partitions()``, records from ``partition.read()``, state from the
  stream's concurrent ``cursor`` (it observes each record; closing a partition moves it). The
  ``StreamFacade``s that ``ConcurrentSourceAdapter`` sources return are ``Stream``s only in name:
  the ``DefaultStream`` behind each is what airbyte-cdk reads, and what is read here.

``adapt(stream, configured, ...)`` wraps either in a ``StreamAdapter``::

    adapter.start(state)                  # the state this sync starts from
    for stream_slice in adapter.slices():
        for item in stream_slice.items():  # what the stream yields: records and messages
            ...
        stream_slice.close()
        adapter.state()                    # covers every record of every closed slice
    adapter.finish()

``CdkStreamAdapter`` (``runtime.cdk_stream_adapter``) reads a ``Stream`` the way airbyte-cdk's
``Stream.read`` does (its own checkpoint reader picks the slices; the state comes from the same
place), so that any stream that runs under airbyte-cdk runs here; only *when* a checkpoint is
taken is the read loop's. Where the stream's own code dies on its cursor field (a ``KeyError``),
the error says so. ``ConcurrentStreamAdapter`` (``runtime.concurrent_stream_adapter``) reads an
``AbstractStream``; the shape both share is ``runtime.stream_adapter_base``'s.

Around the streams, what the read loop takes from their source: the messages its components emit
besides the records (``MessageDrain``) and its manifest's concurrency bound (``manifest_concurrency``).
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
    """The adapter for ``stream``. For concurrent streams, ``rebuild(state)`` builds the stream
    anew with another start state where the source allows it (``runtime.cdk_stream_state``);
    where it does not, ``built_with`` is the state the source was constructed with."""
    adapter: StreamAdapter
    if is_concurrent(stream):
        adapter = ConcurrentStreamAdapter(concurrent_stream(stream), configured, rebuild, dict(built_with or {}))
    elif isinstance(stream, Stream):
        adapter = CdkStreamAdapter(stream, configured)
    else:
        raise _not_a_stream(stream)
    ignored = adapter.ignored_catalog_cursor()
    if ignored:
        # airbyte-cdk reads such a stream on its own cursor without a word; a user who named
        # another one in the catalog would otherwise believe the sync follows it.
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


# -- the source around its streams ----------------------------------------------------------


class MessageDrain:
    """Messages a source's components emit outside the records a stream yields.

    airbyte-cdk components put LOG, TRACE and STATE messages into the source's message
    repository: concurrent cursors their states, declarative retrievers whatever a page carries
    that is not a record. airbyte-cdk's entrypoint prints them between records; the read loop
    takes them from here, in the order they were emitted. A declarative source's repository puts
    them straight on its concurrent framework's queue, which nothing else reads here.
    """

    def __init__(self, source: Any) -> None:
        repository = getattr(source, "_message_repository", None) or getattr(source, "message_repository", None)
        self._repository = repository
        self._queue = repository._queue if isinstance(repository, ConcurrentMessageRepository) else None
        # Streams synced at once drain from their own threads, and airbyte-cdk's in-memory
        # repository cannot be consumed by two at a time (``while deque: deque.popleft()``).
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
    """The most partitions airbyte-cdk reads at once for a declarative ``source``: its manifest's
    ``concurrency_level`` (``default_concurrency``, interpolated against the config and capped
    by ``max_concurrency``), which ``ConcurrentDeclarativeSource`` sizes its worker pool with.
    The manifest's author set it for the API (rate limits, fair use); a sync here reads no more
    slices at once than that. None for a source that declares none."""
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

