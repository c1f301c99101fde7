"""The ``read`` command: set a sync up, hand it to ``runtime.read.read_streams``, and report how it ended."""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager, nullcontext
from typing import TYPE_CHECKING, Any, BinaryIO

from airbyte_cdk.models import ConfiguredAirbyteCatalog, SyncMode
from airbyte_cdk.utils.airbyte_secrets_utils import update_secrets

from source_framework.destinations.base import (
    APPEND,
    APPEND_DEDUP,
    OVERWRITE,
    Destination,
)
from source_framework.destinations.spark.layout import UnsafeTableName
from source_framework.destinations.spark.table_lock import TableLocked
from source_framework.helpers.tuning import TUNING
from source_framework.runtime.cdk_stream_state import state_setter
from source_framework.runtime.command_errors import (
    SourceFailed,
    report_bad_input,
    report_cannot_start,
    report_source_failed,
    source_call,
)
from source_framework.runtime.destination_setup import make_destination, start_page_converters
from source_framework.runtime.error_log import one_traceback_per_error
from source_framework.runtime.inputs import (
    InputError,
    check_config,
    load_catalog,
    load_config,
    load_state,
)
from source_framework.runtime.output import ProtocolOutput
from source_framework.runtime.process import (
    EXIT_FAILED,
    EXIT_INTERRUPTED,
    EXIT_OK,
    log_to_stderr,
    private_stdout,
    tuned_for_streaming,
)
from source_framework.runtime.progress import make_progress
from source_framework.runtime.read import read_streams
from source_framework.runtime.request_cache import request_cache_folder
from source_framework.runtime.secrets import (
    MaskingLogFilter,
    SecretFilter,
    find_secrets,
)
from source_framework.runtime.state_file import StateFile
from source_framework.runtime.stream_adapter_base import StreamAdapter, is_concurrent, means_no_state, supports_incremental
from source_framework.runtime.stream_adapters import MessageDrain, adapt, manifest_concurrency
from source_framework.runtime.summary import format_summary
from source_framework.streams.cursor import CursorValueError

if TYPE_CHECKING:
    from source_framework.destinations.spark.page_conversion import ConverterPool

logger = logging.getLogger("source_framework")


def concurrency_of(parsed: argparse.Namespace, config: Mapping[str, Any], source: Any = None) -> int:
    """``--concurrency``, else the config's ``concurrency_level``, else ``TUNING.concurrency``; capped by the manifest."""
    if getattr(parsed, "concurrency", None):
        value = int(parsed.concurrency)
    else:
        value = config.get("concurrency_level", TUNING.concurrency)
        if not isinstance(value, int) or isinstance(value, bool) or value < 1:
            raise InputError(f"config file '{parsed.config}': concurrency_level must be a whole number of 1 or more, got {value!r}")
    bound = manifest_concurrency(source, config) if source is not None else None
    if bound is not None and bound < value:
        logger.info("the manifest's concurrency_level allows %d slices at once; reading %d at once, not %d", bound, bound, value)
        return bound
    return value


def checkpoints_ahead_of(parsed: argparse.Namespace, config: Mapping[str, Any]) -> int:
    """``--max-checkpoints-ahead``, else the config's, else ``TUNING.max_in_flight``: how far reading may outrun its STATEs."""
    if getattr(parsed, "max_checkpoints_ahead", None):
        return int(parsed.max_checkpoints_ahead)
    value = config.get("max_checkpoints_ahead", TUNING.max_in_flight)
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        raise InputError(f"config file '{parsed.config}': max_checkpoints_ahead must be a whole number of 1 or more, got {value!r}")
    return value


def run_read(
    source: Any,
    parsed: argparse.Namespace,
    protocol_out: BinaryIO | None = None,
    wrap_destination: Callable[[Destination], Destination] | None = None,
) -> int:
    """``read``. With ``protocol_out`` (in-process runs) the process's stdout and logging are left alone;
    ``wrap_destination`` decorates the destination (a tool counting records)."""
    in_process = protocol_out is not None
    progress = make_progress(parsed.quiet, terminal=not in_process)
    output = ProtocolOutput(progress.protocol_stream(protocol_out or private_stdout()))
    if not in_process:
        log_to_stderr(parsed.debug)
    with _masking_logs() as masking, request_cache_folder():
        converters: ConverterPool | None = None
        try:
            config = load_config(parsed.config)
            converters = start_page_converters(config, parsed)
            output.secrets = masking.secrets = SecretFilter(find_secrets(config, {}))  # until the spec says more
            with source_call("spec()"):
                spec = source.spec(logger)
            output.secrets = masking.secrets = SecretFilter(find_secrets(config, spec.connectionSpecification))
            update_secrets(list(output.secrets.secrets))
            check_config(source, config, spec, parsed.config)
            catalog = load_catalog(parsed.catalog)
            states, rebuild, state_file = _load_states(parsed, output)
            concurrency = concurrency_of(parsed, config, source)
            ahead = checkpoints_ahead_of(parsed, config)
            adapters = prepare_streams(source, config, catalog, states, parsed, rebuild)
            destination = make_destination(source, config, parsed, output, converters, ahead)
            converters = None  # the destination's now: it closes them
            master_secrets = getattr(destination, "secrets", None)  # a Spark Connect URL's token and headers
            if master_secrets:
                known = output.secrets
                output.secrets = masking.secrets = SecretFilter([*known.secrets, *known.short_secrets, *master_secrets])
                update_secrets(list(output.secrets.secrets))
            if wrap_destination is not None:
                destination = wrap_destination(destination)
        except InputError as error:
            return report_bad_input(error, output)
        except SourceFailed as failure:
            return report_source_failed(failure, output)
        except Exception as error:  # the source's code called from a stream's set-up (a rebuild with its state)
            return report_source_failed(SourceFailed("read's set-up", error), output)
        finally:
            if converters is not None:
                converters.close()
        try:
            destination.reserve([(adapter.namespace, adapter.name) for adapter in adapters.values()])
        except (TableLocked, UnsafeTableName) as error:
            destination.close()
            return report_cannot_start(error, output)
        except OSError as error:
            destination.close()
            where = getattr(destination, "warehouse", None) or "the destination"
            return report_cannot_start(InputError(f"warehouse {where}: cannot create the tables' folders there ({error})"), output)
        if state_file is not None and state_file.changed_on_disk(adapters):
            # A `state reset`/`state set` changed these streams while this run waited for its lock: reload, or it undoes it.
            logger.warning("state file '%s' changed while this run waited for its tables; reading it again", state_file.path)
            try:
                states, rebuild, state_file = _load_states(parsed, output)
                adapters = prepare_streams(source, config, catalog, states, parsed, rebuild)
            except Exception as error:
                destination.close()
                if isinstance(error, InputError):
                    return report_bad_input(error, output)
                return report_source_failed(error if isinstance(error, SourceFailed) else SourceFailed("read's set-up", error), output)
        if state_file is not None:
            output.add_state_listener(state_file.update)

        started = time.monotonic()
        logger.info("reading %d stream(s) into %s", len(catalog.streams), destination.describe())
        output.add_state_listener(progress.checkpoint_committed)
        tuning = tuned_for_streaming() if not in_process else nullcontext()
        try:
            with progress, one_traceback_per_error(keep=not in_process), tuning:
                result = read_streams(
                    adapters, catalog, states, destination, output, rebuild=rebuild, progress=progress,
                    side_messages=MessageDrain(source), state_as_given=parsed.from_state_as_given,
                    concurrency=concurrency, stop_on_failure=getattr(source, "stop_sync_on_stream_failure", False) is True,
                    max_checkpoints_ahead=ahead,
                )
        except KeyboardInterrupt:
            logger.warning(
                "interrupted (Ctrl-C): the tables keep every checkpoint committed so far; run the same command "
                "again, with the last STATEs (or the same --state-file), to go on from there"
            )
            return EXIT_INTERRUPTED
        finally:
            destination.close()
            output.flush()
    if not parsed.quiet:
        sys.stderr.write(format_summary(result, time.monotonic() - started, output.secrets))
        sys.stderr.flush()
    return EXIT_FAILED if result.failed else EXIT_OK


@contextmanager
def _masking_logs() -> Iterator[MaskingLogFilter]:
    masking = MaskingLogFilter(SecretFilter(()))
    handlers = list(logging.getLogger().handlers)
    for handler in handlers:
        handler.addFilter(masking)
    try:
        yield masking
    finally:
        for handler in handlers:
            handler.removeFilter(masking)


def prepare_streams(
    source: Any,
    config: Mapping[str, Any],
    catalog: ConfiguredAirbyteCatalog,
    states: dict[str, Any],
    parsed: argparse.Namespace,
    rebuild: set[str],
) -> dict[str, StreamAdapter]:
    """Check the catalog and input states against the source before anything is written; one adapter per stream."""
    with source_call("streams()"):
        streams = {stream.name: stream for stream in source.streams(config)}
    set_state = state_setter(source, config)
    adapters: dict[str, StreamAdapter] = {}
    for configured in catalog.streams:
        name = configured.stream.name
        if name not in streams:
            raise InputError(
                f"catalog file '{parsed.catalog}' names stream '{name}', which the source does not have "
                f"(it has: {', '.join(sorted(streams))})"
            )
        stream = streams[name]
        rebuild_with = None
        if set_state is not None and is_concurrent(stream):
            rebuild_with = lambda state, name=name, namespace=stream.namespace: set_state(name, namespace, state)  # noqa: E731
        adapter = adapt(stream, configured, rebuild_with, built_with=states.get(name))
        _check_modes(adapter, configured, stream, parsed)
        if configured.sync_mode == SyncMode.incremental and name in states:
            _check_state(adapter, states, rebuild, parsed)
        adapters[name] = adapter
    return adapters


def _check_modes(adapter: StreamAdapter, configured: Any, stream: Any, parsed: argparse.Namespace) -> None:
    name = adapter.name
    mode = configured.destination_sync_mode.value
    if mode not in (APPEND, OVERWRITE, APPEND_DEDUP):
        raise InputError(f"catalog file '{parsed.catalog}': stream '{name}' has unknown destination_sync_mode '{mode}'")
    if mode == APPEND_DEDUP and not adapter.primary_key:
        raise InputError(f"catalog file '{parsed.catalog}': stream '{name}' asks for append_dedup but has no primary key")
    if configured.sync_mode == SyncMode.incremental and not supports_incremental(stream):
        raise InputError(f"catalog file '{parsed.catalog}': stream '{name}' has no cursor, so it cannot be read incrementally")
    if configured.sync_mode == SyncMode.incremental and mode == OVERWRITE:
        raise InputError(
            f"catalog file '{parsed.catalog}': stream '{name}' is incremental with destination_sync_mode overwrite: "
            f"each sync would replace the table with only the records changed since the last one, and the rest "
            f"would be lost. Use append or append_dedup for an incremental stream, or full_refresh with overwrite "
            f"to replace the table with all records on each sync"
        )


def _check_state(adapter: StreamAdapter, states: dict[str, Any], rebuild: set[str], parsed: argparse.Namespace) -> None:
    """Give the stream its input state now, so a state of the wrong shape stops ``read`` before anything is written."""
    name = adapter.name
    try:
        adapter.validate_state(states[name])
    except (CursorValueError, ValueError, TypeError, AttributeError, KeyError) as error:
        problem = f"state file '{parsed.state or parsed.state_file}': stream '{name}': {error}"
        if parsed.on_bad_state != "resync":
            raise InputError(problem) from None
        logger.warning("%s; --on-bad-state resync: stream %s re-syncs from scratch and its table is rebuilt", problem, name)
        states[name] = {}
        adapter.validate_state({})
        rebuild.add(name)


def _load_states(parsed: argparse.Namespace, output: ProtocolOutput) -> tuple[dict[str, Any], set[str], StateFile | None]:
    """The input states, the streams to rebuild, and the state file to keep up to date; a state holding a secret is refused."""
    states, rebuild, state_file = _read_state_input(parsed)
    for name, value in list(states.items()):
        if means_no_state(value):
            states[name] = {}
        if output.secrets.contains_secret(json.dumps(value, default=str)):
            raise InputError(
                f"state file '{parsed.state or parsed.state_file}': the state of stream '{name}' contains "
                f"a secret value from the config; refusing it"
            )
    return states, rebuild, state_file


def _read_state_input(parsed: argparse.Namespace) -> tuple[dict[str, Any], set[str], StateFile | None]:
    if parsed.state and parsed.state_file:
        raise InputError("give --state or --state-file, not both")
    path = parsed.state or parsed.state_file
    if parsed.state and not os.path.exists(path):
        raise InputError(f"state file '{path}' does not exist")
    if path and os.path.isdir(path):
        raise InputError(f"state file '{path}' is a directory, not a JSON file")
    try:
        if parsed.state_file:
            state_file = StateFile(parsed.state_file)
            return state_file.states, set(), state_file
        return load_state(parsed.state), set(), None
    except InputError as error:
        if parsed.on_bad_state != "resync":
            raise
        logger.warning("%s; --on-bad-state resync: every stream re-syncs from scratch and its table is rebuilt", error)
        # The unreadable file stays until the first checkpoint replaces it, so other bad input leaves it as it was.
        return {}, {"*"}, StateFile.replacing_unreadable(parsed.state_file) if parsed.state_file else None

