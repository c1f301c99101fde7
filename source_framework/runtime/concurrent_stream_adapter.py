"""``ConcurrentStreamAdapter``: an ``AbstractStream`` of airbyte-cdk's concurrent framework, read partition by partition."""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any

from airbyte_cdk.models import ConfiguredAirbyteStream
from airbyte_cdk.sources.streams.concurrent.abstract_stream import AbstractStream

from source_framework.runtime.stream_adapter_base import (
    SliceRead,
    StateNotApplicable,
    StreamAdapter,
    concurrent_stream,
    short_state,
)
from source_framework.streams.cursor import partition_key
from source_framework.streams.pages import PageFetches

logger = logging.getLogger("source_framework.read")


class ConcurrentStreamAdapter(StreamAdapter):
    """An ``AbstractStream``, read partition by partition as airbyte-cdk's concurrent framework reads it.

    Its state moves only when a partition closes, so it has no checkpoints inside a partition (neither has airbyte-cdk).
    """

    stream: AbstractStream

    def __init__(
        self,
        stream: AbstractStream,
        configured: ConfiguredAirbyteStream,
        rebuild: Callable[[Mapping[str, Any]], AbstractStream] | None,
        built_with: Mapping[str, Any],
    ) -> None:
        super().__init__(stream, configured)
        self._rebuild = rebuild
        self._built_with = dict(built_with) if self.incremental else {}
        # Partitions are airbyte-cdk's unit of concurrent reading; their cursor observes apart.
        self.concurrency_safe = True
        self.syncs_alongside_others = True
        self.slices_fail_alone = True

    def default_primary_key(self) -> list[list[str]]:
        return [list(k) for k in (self.stream.as_airbyte_stream().source_defined_primary_key or [])]

    def default_cursor_field(self) -> list[str]:
        return [self.stream.cursor_field] if self.stream.cursor_field else []

    def validate_state(self, state: Mapping[str, Any]) -> None:
        self._build_with(state)  # its cursor parses the state as it is built

    def start(self, state: Mapping[str, Any]) -> None:
        """A concurrent stream takes its state when it is built: build it anew with ``state``."""
        self._build_with(dict(state or {}) if self.incremental else {})

    def _build_with(self, state: Mapping[str, Any]) -> None:
        try:
            if self._rebuild is None:
                raise StateNotApplicable(
                    f"stream '{self.name}' belongs to a source that takes its state when it is constructed, and this "
                    f"sync must start from {short_state(state)}; construct the source with that state (as its own main "
                    f"does with --state) or use a declarative source, whose states the runtime sets itself"
                )
            self.stream = concurrent_stream(self._rebuild(state))
        except StateNotApplicable:
            if dict(state) != self._built_with:
                raise  # the stream as built is good only for the state it was built with

    def slices(self) -> Iterator[SliceRead]:
        for partition in self.stream.generate_partitions():
            yield _PartitionSlice(self.stream, partition)

    def state(self) -> Mapping[str, Any] | None:
        return dict(self.stream.cursor.state)

    def finish(self) -> None:
        self.stream.cursor.ensure_at_least_one_state_emitted()


class _PartitionSlice(SliceRead):
    def __init__(self, stream: AbstractStream, partition: Any) -> None:
        self._stream = stream
        self._partition = partition
        self.partition = partition_key(partition.to_slice())
        self.observe = stream.cursor.observe

    def items(self, pages: PageFetches | None = None) -> Iterable[Any]:
        return self._partition.read()  # a partition reads its own pages (airbyte-cdk's retriever)

    def close(self) -> None:
        self._stream.cursor.close_partition(self._partition)
