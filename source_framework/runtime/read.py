"""``read``: sync each configured stream in catalog order, each failing apart from the others."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Any

from airbyte_cdk.models import ConfiguredAirbyteCatalog

from source_framework.destinations.base import Destination, StreamSink, StreamTarget
from source_framework.helpers.tuning import TUNING
from source_framework.runtime.concurrency import run_in_order
from source_framework.runtime.output import ProtocolOutput
from source_framework.runtime.results import ReadResult, StreamResult
from source_framework.runtime.side_messages import print_leftovers
from source_framework.runtime.stream_adapter_base import StreamAdapter
from source_framework.runtime.stream_sync import StreamSync, SyncControls, report_error

if TYPE_CHECKING:
    from source_framework.runtime.progress import Progress

logger = logging.getLogger("source_framework.read")


class SchemaMissing(Exception):
    """A stream has no JSON schema, so its table has no columns."""


def read_streams(
    adapters: Mapping[str, StreamAdapter],
    catalog: ConfiguredAirbyteCatalog,
    states: Mapping[str, Any],
    destination: Destination,
    output: ProtocolOutput,
    rebuild: Iterable[str] = (),
    progress: Progress | None = None,
    side_messages: Callable[[], Iterable[Any]] = lambda: (),
    state_as_given: bool = False,
    concurrency: int = 1,
    stop_on_failure: bool = False,
    max_checkpoints_ahead: int = TUNING.max_in_flight,
) -> ReadResult:
    """Sync every configured stream in catalog order; a failing stream stops the others only with ``stop_on_failure``.
    Each stream's table, checkpoints and STATEs are the same whatever the ``concurrency``."""
    rebuild = set(rebuild)
    shared = SyncControls(permits=threading.Semaphore(concurrency) if concurrency > 1 else None)

    failed = threading.Event()

    def sync(configured: Any) -> Callable[[], StreamResult | None]:
        def task() -> StreamResult | None:
            name = configured.stream.name
            if failed.is_set():
                logger.info("stream %s is not synced: the source stops the sync at the first stream that fails "
                            "(stop_sync_on_stream_failure)", name)
                return None
            synced = _sync_one(adapters[name], configured.destination_sync_mode.value, states, destination, output,
                               rebuild, progress, side_messages, state_as_given, concurrency, shared,
                               max_checkpoints_ahead)
            if synced.error is not None and stop_on_failure:
                failed.set()
            return synced

        return task

    result = ReadResult()
    for together in _groups(catalog.streams, adapters):
        result.streams += [r for r in run_in_order([sync(c) for c in together], concurrency, shared.stop) if r]
        print_leftovers(side_messages, output)
    return result


def _groups(configured: Iterable[Any], adapters: Mapping[str, StreamAdapter]) -> list[list[Any]]:
    """The streams in catalog order, grouped: each run of streams that may sync alongside others is one group."""
    groups: list[list[Any]] = []
    for entry in configured:
        alongside = adapters[entry.stream.name].syncs_alongside_others
        if alongside and groups and adapters[groups[-1][-1].stream.name].syncs_alongside_others:
            groups[-1].append(entry)
        else:
            groups.append([entry])
    return groups


def _sync_one(
    adapter: StreamAdapter,
    destination_sync_mode: str,
    states: Mapping[str, Any],
    destination: Destination,
    output: ProtocolOutput,
    rebuild: set,
    progress: Progress | None,
    side_messages: Callable[[], Iterable[Any]],
    state_as_given: bool,
    concurrency: int,
    shared: SyncControls,
    max_checkpoints_ahead: int = TUNING.max_in_flight,
) -> StreamResult:
    """One stream, start to end; whatever goes wrong (its set-up included) fails this stream only."""
    name, namespace = adapter.name, adapter.namespace
    output.stream_status(name, namespace, "STARTED")
    started = time.monotonic()
    sink: StreamSink | None = None
    sync: StreamSync | None = None
    try:
        target = StreamTarget(
            name=name,
            namespace=namespace,
            json_schema=_schema_of(adapter),
            incremental=adapter.incremental,
            destination_sync_mode=destination_sync_mode,
            primary_key=adapter.primary_key,
            cursor_field=adapter.cursor_field,
            rebuild=name in rebuild or "*" in rebuild,
            pages=adapter.raw_pages,
            state=states.get(name),
        )
        sink = destination.open_stream(target)
        sync = StreamSync(adapter, target, sink, output, states.get(name), side_messages, state_as_given, concurrency, shared,
                          max_checkpoints_ahead)
        output.stream_status(name, namespace, "RUNNING")
        if progress is not None:
            progress.stream_started(sync.result)
        stream_result = sync.run()
    except Exception as error:  # one stream's failure is reported, then the next stream runs
        if sink is not None:
            sink.abort()
        if sync is not None:
            sync.barrier.print_committed()
        stream_result = sync.result if sync is not None else StreamResult(name=name)
        report_error(output, name, namespace, error)
        stream_result.failed(error)
    if stream_result.error is None:
        output.stream_status(name, namespace, "COMPLETE")
    else:  # failed, or read to its end with failed slices (each reported when it failed)
        output.stream_status(name, namespace, "INCOMPLETE")
        logger.error("stream %s failed after %d records: %s", name, stream_result.records,
                     output.secrets.mask(str(stream_result.error)))
    stream_result.duration = time.monotonic() - started
    if sink is not None:
        stream_result.values_not_kept = sink.values_not_kept()
    if progress is not None:
        progress.stream_finished(stream_result)
    return stream_result


def _schema_of(adapter: StreamAdapter) -> Mapping[str, Any]:
    try:
        schema = adapter.json_schema()
    except Exception as error:
        raise SchemaMissing(schema_missing_message(adapter.name, getattr(adapter, "stream", None), error)) from error
    if not isinstance(schema, Mapping):
        raise SchemaMissing(f"stream '{adapter.name}': get_json_schema() returned {type(schema).__name__}, not a JSON schema object")
    return schema


def schema_missing_message(name: str, stream: Any, error: BaseException) -> str:
    """Where airbyte-cdk looked for a stream's schema, and the two ways to provide one."""
    module = type(stream).__module__ if stream is not None else "?"
    package = module.split(".")[0]
    where = (
        "the stream class is defined in a script run as __main__, which has no package to look in"
        if package == "__main__"
        else f"it looked for schemas/{name}.json inside the package '{package}'"
    )
    return (
        f"stream '{name}' has no JSON schema ({type(error).__name__}: {error}): {where}. Provide one: put the schema "
        f"in a file schemas/{name}.json beside the module that defines the stream (source_framework's stream bases "
        f"look there, also for scripts), or override get_json_schema() in the stream class to return it"
    )

