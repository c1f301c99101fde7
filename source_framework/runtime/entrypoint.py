"""The command line: ``spec``, ``check``, ``discover``, ``read``, Airbyte style (and ``catalog``, ``state``, ``tables``).

::

    if __name__ == "__main__":
        launch(MySource(), sys.argv[1:])

Any airbyte-cdk 7 source runs here unchanged: one built on ``AbstractSource`` (``HttpStream``s
and any other ``Stream``), or on the concurrent framework (declarative YAML manifests,
``DefaultStream``). ``spec``, ``check`` and ``discover`` are airbyte-cdk's own. ``read`` is ours:
it lands records in Spark tables (or prints them with ``--destination stdout``) and prints each
STATE only after the records before it are committed. Every flag airbyte-cdk's entrypoint takes
(``--debug``, ``--manifest-path``, ``--components-path``) is taken here too. ``catalog`` prints
the configured catalog ``read`` takes, made from ``discover`` (``runtime.catalog_command``);
``tables`` shows each stream's table without a JVM (``runtime.tables_command``).

stdout carries protocol messages and nothing else (``runtime.process``; ``catalog``: the catalog). stderr gets the logs,
the progress of ``read`` (``runtime.progress``) and its end-of-run summary (``runtime.summary``).
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import runpy
import sys
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager, nullcontext
from typing import TYPE_CHECKING, Any, BinaryIO

from airbyte_cdk.entrypoint import AirbyteEntrypoint
from airbyte_cdk.models import ConfiguredAirbyteCatalog, SyncMode
from airbyte_cdk.utils.airbyte_secrets_utils import update_secrets
from airbyte_cdk.utils.traced_exception import AirbyteTracedException

from source_framework.destinations.base import (
    APPEND,
    APPEND_DEDUP,
    OVERWRITE,
    Destination,
)
from source_framework.destinations.spark.layout import UnsafeTableName, warehouse_for
from source_framework.destinations.spark.table_lock import TableLocked
from source_framework.runtime.catalog_command import add_catalog_command, run_catalog
from source_framework.runtime.cdk_stream_state import state_setter
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
    EXIT_BAD_INPUT,
    EXIT_FAILED,
    EXIT_INTERRUPTED,
    EXIT_OK,
    log_to_stderr,
    private_stdout,
    tuned_for_streaming,
)
from source_framework.runtime.progress import make_progress
from source_framework.runtime.read import MAX_IN_FLIGHT, read_streams, schema_missing_message
from source_framework.runtime.request_cache import request_cache_folder
from source_framework.runtime.secrets import (
    MaskingLogFilter,
    SecretFilter,
    find_secrets,
)
from source_framework.runtime.state_commands import (
    add_state_commands,
    run_state_command,
)
from source_framework.runtime.state_file import StateFile
from source_framework.runtime.stream_adapter_base import StreamAdapter, is_concurrent, means_no_state, supports_incremental
from source_framework.runtime.stream_adapters import MessageDrain, adapt, manifest_concurrency
from source_framework.runtime.summary import format_summary
from source_framework.runtime.table_maintenance import COMMANDS as MAINTENANCE_COMMANDS
from source_framework.runtime.table_maintenance import add_maintenance_commands, run_maintenance_command
from source_framework.runtime.tables_command import add_tables_command, run_tables
from source_framework.streams.cursor import CursorValueError

if TYPE_CHECKING:
    from source_framework.destinations.spark.page_conversion import ConverterPool

#: Slices of a stream read at once when neither --concurrency nor the config says.
DEFAULT_CONCURRENCY = 4

logger = logging.getLogger("source_framework")

__all__ = ["EXIT_BAD_INPUT", "EXIT_FAILED", "EXIT_INTERRUPTED", "EXIT_OK", "build_parser", "launch", "run_read", "run_script"]


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="main.py", description="An Airbyte source that lands data in Spark tables.")
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--debug", action="store_true", help="detailed debug logs (as airbyte-cdk's --debug)")
    commands = parser.add_subparsers(dest="command", required=True)
    commands.add_parser("spec", help="print the connector's specification", parents=[common])
    for name, text in (("check", "check the config against the API"), ("discover", "print the catalog")):
        command = commands.add_parser(name, help=text, parents=[common])
        command.add_argument("--config", required=True)
        _add_cdk_manifest_flags(command)
    _add_cdk_manifest_flags(add_catalog_command(commands, common))
    read = commands.add_parser("read", help="sync the configured streams", parents=[common])
    read.add_argument("--config", required=True, help="config JSON file")
    read.add_argument("--catalog", required=True, help="configured catalog JSON file")
    read.add_argument("--state", help="state JSON file: per-stream list, legacy dict or Singer bookmarks")
    read.add_argument(
        "--state-file",
        help="a state file to read at start and rewrite atomically after every STATE (local development)",
    )
    read.add_argument(
        "--on-bad-state",
        choices=["fail", "resync"],
        default="fail",
        help="a corrupt state, or one of the wrong shape for its stream: stop with an error (default), "
        "or re-sync that stream from scratch and rebuild its table (logged)",
    )
    read.add_argument(
        "--destination",
        choices=["spark", "stdout"],
        help="where records go (default: the config's destination.type, else spark)",
    )
    read.add_argument(
        "--quiet",
        action="store_true",
        help="no progress on stderr (neither the live table on a terminal nor the line per committed "
        "checkpoint otherwise) and no end-of-run summary",
    )
    read.add_argument(
        "--from-state-as-given",
        action="store_true",
        help="read each stream from the given state exactly, even where the table holds a newer checkpoint "
        "(by default a state older than the table's resumes from the table, so nothing is written twice)",
    )
    read.add_argument(
        "--concurrency",
        type=_positive_int,
        help="slices of a stream read at once, in worker threads, where the stream allows it (default: the "
        f"config's concurrency_level, else {DEFAULT_CONCURRENCY}; 1 reads one slice after another)",
    )
    read.add_argument(
        "--max-checkpoints-ahead",
        type=_positive_int,
        help="checkpoints whose STATE may wait for its commit while reading goes on: fewer read again "
        f"after a crash, more speed where commits lag (default: the config's max_checkpoints_ahead, else "
        f"{MAX_IN_FLIGHT}; 1 = at most one checkpoint at risk)",
    )
    add_table_flags(read)
    _add_cdk_manifest_flags(read)
    add_state_commands(commands, add_table_flags)
    add_maintenance_commands(commands, common, add_table_flags)
    add_tables_command(commands)
    return parser


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be a whole number of 1 or more, got {text!r}")
    return value


def concurrency_of(parsed: argparse.Namespace, config: Mapping[str, Any], source: Any = None) -> int:
    """``--concurrency``, else the config's ``concurrency_level`` (airbyte-cdk's declarative name for
    it), else ``DEFAULT_CONCURRENCY``; never more than a declarative source's manifest allows."""
    if getattr(parsed, "concurrency", None):
        value = int(parsed.concurrency)
    else:
        value = config.get("concurrency_level", DEFAULT_CONCURRENCY)
        if not isinstance(value, int) or isinstance(value, bool) or value < 1:
            raise InputError(f"config file '{parsed.config}': concurrency_level must be a whole number of 1 or more, got {value!r}")
    bound = manifest_concurrency(source, config) if source is not None else None
    if bound is not None and bound < value:
        logger.info("the manifest's concurrency_level allows %d slices at once; reading %d at once, not %d", bound, bound, value)
        return bound
    return value


def checkpoints_ahead_of(parsed: argparse.Namespace, config: Mapping[str, Any]) -> int:
    """``--max-checkpoints-ahead``, else the config's ``max_checkpoints_ahead``, else ``MAX_IN_FLIGHT``:
    how far reading may run ahead of its last STATE, in checkpoints."""
    if getattr(parsed, "max_checkpoints_ahead", None):
        return int(parsed.max_checkpoints_ahead)
    value = config.get("max_checkpoints_ahead", MAX_IN_FLIGHT)
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        raise InputError(f"config file '{parsed.config}': max_checkpoints_ahead must be a whole number of 1 or more, got {value!r}")
    return value


def add_table_flags(command: argparse.ArgumentParser) -> None:
    """What locates the tables and how to share them; ``read`` and the ``state`` commands take them alike."""
    command.add_argument("--warehouse", help="folder of the Spark tables (default: the config's destination.warehouse, else ./warehouse)")
    command.add_argument("--spark-master", help="Spark master URL, e.g. local[*], spark://host:7077 or sc://host:15002")
    command.add_argument(
        "--wait-for-lock",
        action="store_true",
        help="when another process is writing a table, wait for it instead of stopping with an error",
    )


def _add_cdk_manifest_flags(command: argparse.ArgumentParser) -> None:
    """airbyte-cdk's entrypoint takes these for its manifest runner; so do we, with the same meaning
    (they are read by whoever builds the source, not by the entrypoint)."""
    command.add_argument("--manifest-path", help="path to the YAML manifest file (as airbyte-cdk's entrypoint)")
    command.add_argument("--components-path", help="path to the custom components file (as airbyte-cdk's entrypoint)")


#: While ``run_script`` runs a connector script: what its ``launch(source, args)`` call does instead.
_launch_handler: Callable[[Any, list[str]], Any] | None = None


def launch(source: Any, args: list[str]) -> None:
    """Run one command of ``source`` (any airbyte-cdk 7 source) and exit with its status code."""
    if _launch_handler is not None:
        _launch_handler(source, list(args))
        return
    parsed = build_parser().parse_args(args)
    if parsed.command in ("state", "catalog", "tables", *MAINTENANCE_COMMANDS):
        log_to_stderr()  # read sets up its own; spec/check/discover are airbyte-cdk's
    sys.exit(run_command(source, parsed))


def run_script(script: str, args: list[str], handler: Callable[[Any, list[str]], Any]) -> None:
    """Run a connector script as ``__main__``, with its ``launch(source, args)`` call handed to
    ``handler(source, args)`` instead of this command line.

    The seam the tools use to drive a connector the way its author runs it (``python main.py
    ...``) without knowing how the script builds its source: ``python -m source_framework.compare``
    reads it through a counting destination or airbyte-cdk's own entrypoint, the acceptance
    suites take the source object itself::

        run_script("main.py", ["read", "--config", "c.json"], lambda source, args: print(source.name))
    """
    global _launch_handler
    folder = os.path.dirname(os.path.abspath(script))
    if folder not in sys.path:  # stays: the source may import its modules lazily
        sys.path.insert(0, folder)
    saved_argv, sys.argv = sys.argv, [script, *args]
    _launch_handler = handler
    try:
        runpy.run_path(script, run_name="__main__")
    finally:
        _launch_handler, sys.argv = None, saved_argv


def run_command(source: Any, parsed: argparse.Namespace) -> int:
    if parsed.command == "read":
        return run_read(source, parsed)
    if parsed.command == "state":
        return run_state_command(source, parsed, spark_destination)
    if parsed.command == "catalog":
        return run_catalog(source, parsed)
    if parsed.command in MAINTENANCE_COMMANDS:
        return run_maintenance_command(source, parsed, spark_destination)
    if parsed.command == "tables":
        return run_tables(source, parsed, spark_destination)
    return run_cdk_command(source, parsed)


def run_cdk_command(source: Any, parsed: argparse.Namespace) -> int:
    """``spec``, ``check`` and ``discover`` through airbyte-cdk's entrypoint, after our own
    check of the config file so that a bad file gets a one-line error, not a traceback; what
    the source's own code raises gets a TRACE error, as airbyte-cdk's ``launch`` prints it."""
    cdk_args = [parsed.command] + (["--debug"] if parsed.debug else [])
    output = ProtocolOutput()
    try:
        if parsed.command != "spec":
            config = load_config(parsed.config)
            output.secrets = SecretFilter(find_secrets(config, {}))  # until the spec says which fields are secret
            with source_call("spec()"):
                spec = source.spec(logger)
            output.secrets = SecretFilter(find_secrets(config, spec.connectionSpecification))
            if parsed.command == "discover":
                _check_schemas(source, config)
            cdk_args += ["--config", parsed.config]
            for flag in ("manifest_path", "components_path"):
                if getattr(parsed, flag, None):
                    cdk_args += ["--" + flag.replace("_", "-"), getattr(parsed, flag)]
        entrypoint = AirbyteEntrypoint(source)
        with source_call(parsed.command):
            for line in entrypoint.run(entrypoint.parse_args(cdk_args)):
                # airbyte-cdk masks its log lines, not a CONNECTION_STATUS quoting the source's error
                sys.stdout.write(output.secrets.mask(line) + "\n")
    except InputError as error:
        return _bad_input(error, output)
    except SourceFailed as failure:
        sys.stdout.flush()
        return _source_failed(failure, output)
    sys.stdout.flush()
    return EXIT_OK


class SourceFailed(Exception):
    """The source's own code (``spec()``, ``streams()``, a command of airbyte-cdk's entrypoint)
    raised outside any stream's read: the command cannot go on."""

    def __init__(self, call: str, error: BaseException) -> None:
        detail = error.message if isinstance(error, AirbyteTracedException) and error.message else str(error)
        super().__init__(f"{call} raised {type(error).__name__}: {detail}")
        self.error = error
        failure_type = getattr(error, "failure_type", None) if isinstance(error, AirbyteTracedException) else None
        #: as airbyte-cdk's entrypoint reports it: a traced exception's own type, else system_error
        self.failure_type = getattr(failure_type, "value", None) or "system_error"


@contextmanager
def source_call(call: str) -> Iterator[None]:
    """What the source's code raises in the block becomes ``SourceFailed`` naming ``call``."""
    try:
        yield
    except (InputError, SourceFailed):
        raise
    except Exception as error:
        raise SourceFailed(f"the source's {call}", error) from error


def _check_schemas(source: Any, config: Mapping[str, Any]) -> None:
    """Every stream has a JSON schema, or ``discover`` says which one has none and how to add it."""
    with source_call("streams()"):
        streams = source.streams(config)
    for stream in streams:
        try:
            stream.get_json_schema()
        except Exception as error:
            raise InputError(schema_missing_message(stream.name, stream, error)) from None


def run_read(
    source: Any,
    parsed: argparse.Namespace,
    protocol_out: BinaryIO | None = None,
    wrap_destination: Callable[[Destination], Destination] | None = None,
) -> int:
    """``read``. With ``protocol_out`` (in-process runs, see ``source_framework.testing.read``) the
    protocol lines go there and the process's stdout and logging are left as they are.
    ``wrap_destination`` decorates the destination the records go to (a tool counting them)."""
    in_process = protocol_out is not None
    # In process, the terminal is not ours to draw on: progress goes to the caller's logging only.
    progress = make_progress(parsed.quiet, terminal=not in_process)
    output = ProtocolOutput(progress.protocol_stream(protocol_out or private_stdout()))
    if not in_process:
        log_to_stderr(parsed.debug)
    with _masking_logs() as masking, request_cache_folder():
        converters: ConverterPool | None = None  # until the destination has them
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
            return _bad_input(error, output)
        except SourceFailed as failure:
            return _source_failed(failure, output)
        except Exception as error:  # the source's code called from a stream's set-up (a rebuild with its state)
            return _source_failed(SourceFailed("read's set-up", error), output)
        finally:
            if converters is not None:  # the set-up failed before a destination took them
                converters.close()
        try:
            modes = {entry.stream.name: entry.destination_sync_mode.value for entry in catalog.streams}
            destination.reserve([(adapter.namespace, adapter.name, modes[name]) for name, adapter in adapters.items()])
        except (TableLocked, UnsafeTableName) as error:
            destination.close()
            return _cannot_start(error, output)
        except OSError as error:  # the warehouse runs through a file, or this user cannot write there
            destination.close()
            where = getattr(destination, "warehouse", None) or "the destination"
            return _cannot_start(InputError(f"warehouse {where}: cannot create the tables' folders there ({error})"), output)
        if state_file is not None and state_file.changed_on_disk(adapters):
            # A `state reset` or `state set` changed these streams' states (and tables) after the file was
            # loaded, while this run had no lock yet: syncing from what was loaded would undo it.
            logger.warning("state file '%s' changed while this run waited for its tables; reading it again", state_file.path)
            try:
                states, rebuild, state_file = _load_states(parsed, output)
                adapters = prepare_streams(source, config, catalog, states, parsed, rebuild)
            except Exception as error:
                destination.close()
                if isinstance(error, InputError):
                    return _bad_input(error, output)
                return _source_failed(error if isinstance(error, SourceFailed) else SourceFailed("read's set-up", error), output)
        if state_file is not None:
            output.add_state_listener(state_file.update)

        started = time.monotonic()
        logger.info("reading %d stream(s) into %s", len(catalog.streams), destination.describe())
        output.add_state_listener(progress.checkpoint_committed)
        # The process's own settings only when the process is ours (see runtime/process.py).
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
    """Mask config secrets in every log line for the duration of the command."""
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
    """Check the catalog against the source and the input states against the streams, before
    anything is written; one adapter per configured stream."""
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
    """Give the stream its input state now, so that a state of the wrong shape stops ``read``
    before anything is written (or, with ``--on-bad-state resync``, re-syncs the stream)."""
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
    """The input states, the streams to rebuild (bad state and ``--on-bad-state resync``), and the
    state file to keep up to date, if any. A full refresh's final state means "no state"; a state
    holding one of the config's secrets is refused."""
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
    # A path that names no file is a mistake to point out, not a bad state to rebuild every table over.
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
        # The unreadable file stays where it is until the first checkpoint replaces it: a run that
        # other bad input stops leaves it as it was.
        return {}, {"*"}, StateFile.replacing_unreadable(parsed.state_file) if parsed.state_file else None


def start_page_converters(config: Mapping[str, Any], parsed: argparse.Namespace) -> ConverterPool | None:
    """The sync's page converters, the first already starting, where the config sends the records to
    Spark through this process (``destinations/spark/page_conversion``); None otherwise.

    Why as soon as the config is read, before the source's spec, the catalog, the states and the
    streams' set-up: a converter takes 0.1-0.15 s to start (Arrow's import mostly), and one started
    with the destination, after all that, was ready 0.0-0.13 s before the first page, or just after
    it on a busy machine. Started here, the first commit comes sooner: 200,000 demo orders at
    interval 100, 6 interleaved pairs, 27-39 ms against 31-45 ms (the rest of it is the table's and
    the converter's first commit, not the start).
    """
    settings = config.get("destination") or {}
    if not isinstance(settings, Mapping) or _destination_kind(settings, parsed) != "spark":
        return None
    from source_framework.destinations.spark.page_conversion import ConverterPool

    converters = ConverterPool()
    if str(settings.get("writer", "auto")) != "spark":
        converters.warm()
    return converters


def _destination_kind(settings: Mapping[str, Any], parsed: argparse.Namespace) -> Any:
    return getattr(parsed, "destination", None) or settings.get("type", "spark")


def make_destination(
    source: Any, config: Mapping[str, Any], parsed: argparse.Namespace, output: ProtocolOutput,
    converters: ConverterPool | None = None, max_checkpoints_ahead: int | None = None,
) -> Destination:
    """The destination ``read`` writes to; ``converters``: the sync's page converters, where
    ``start_page_converters`` started them (the destination owns them now, and closes them);
    ``max_checkpoints_ahead``: the read's bound (``checkpoints_ahead_of``), which sets how many
    checkpoints a Spark table holds for one commit."""
    settings = dict(config.get("destination") or {})
    kind = _destination_kind(settings, parsed)
    if kind == "stdout":
        from source_framework.destinations.stdout import StdoutDestination

        return StdoutDestination(output)
    if kind != "spark":
        raise InputError(f"config file '{parsed.config}': destination.type must be 'spark' or 'stdout', got {kind!r}")
    return spark_destination(source, config, parsed, converters, max_checkpoints_ahead)


def spark_destination(
    source: Any, config: Mapping[str, Any], parsed: argparse.Namespace, converters: ConverterPool | None = None,
    max_checkpoints_ahead: int | None = None,
) -> Any:
    """The Spark destination the config's ``destination`` section and the flags describe;
    ``converters``: the sync's page converters (``ConverterPool``), where it started them already
    (closed here if the destination cannot be made); ``max_checkpoints_ahead``: a read's bound
    (None: the default's)."""
    from source_framework.destinations.spark.buffer import hold_for
    from source_framework.destinations.spark.destination import SparkDestination
    from source_framework.destinations.spark.session import CONNECT_RETRY_SECONDS

    settings = dict(config.get("destination") or {})
    warehouse = parsed.warehouse or settings.get("warehouse", "./warehouse")
    table_format = str(settings.get("table_format", "delta"))
    try:
        warehouse_for(str(warehouse), table_format)
    except ValueError as error:
        if converters is not None:
            converters.close()
        given = "--warehouse" if parsed.warehouse else f"config file '{parsed.config}': destination.warehouse"
        raise InputError(f"{given}: {error}") from None
    try:
        return SparkDestination(
            warehouse=warehouse,
            default_namespace=default_namespace(source),
            former_namespaces=former_namespaces(source),
            master=getattr(parsed, "spark_master", None) or settings.get("spark_master", "local[*]"),
            spark_conf=settings.get("spark_conf") or {},
            max_pending_records=int(settings.get("max_pending_records", 200_000)),
            max_pending_bytes=int(settings.get("max_pending_mb", 256)) * 1024 * 1024,
            stage_rows=int(settings.get("stage_rows", 100_000)),
            retention_seconds=float(settings.get("retention_hours", 6)) * 3600,
            wait_for_lock=bool(getattr(parsed, "wait_for_lock", False)),
            writer=str(settings.get("writer", "auto")),
            connect_retry_seconds=float(settings.get("connect_retry_seconds", CONNECT_RETRY_SECONDS)),
            converters=converters,
            on_type_mismatch=str(settings.get("on_type_mismatch", "null")),
            table_format=table_format,
            # half the read's bound, so one commit runs while the next is read (a larger hold is only handed over)
            hold_checkpoints=hold_for(max_checkpoints_ahead),
        )
    except (TypeError, ValueError) as error:
        if converters is not None:
            converters.close()
        raise InputError(f"config file '{parsed.config}': the destination section is not valid: {error}") from None


def default_namespace(source: Any) -> str:
    """The namespace of the tables of streams that have none: the source's name; for a manifest
    run as airbyte-cdk's own declarative class (``python -m source_framework shop.yaml``), whose
    name is that class's whatever the manifest, the manifest's: its file's name, or its folder's
    for the ``manifest.yaml`` of airbyte's manifest-only connectors (``source-shop/manifest.yaml``)."""
    manifest = getattr(source, "_path_to_yaml", None)
    if not isinstance(manifest, str) or former_namespaces(source) == ():
        return str(source.name)
    stem = os.path.splitext(os.path.basename(manifest))[0]
    if stem == "manifest":
        return os.path.basename(os.path.dirname(os.path.abspath(manifest))) or stem
    return stem or str(source.name)


def former_namespaces(source: Any) -> tuple[str, ...]:
    """Where earlier versions put the tables ``default_namespace`` now puts elsewhere: a manifest's
    under the name of airbyte-cdk's class. A source class of the connector's own keeps its name."""
    cls = type(source)
    manifest = getattr(source, "_path_to_yaml", None)
    if isinstance(manifest, str) and cls.__module__.startswith("airbyte_cdk.") and source.name == cls.__name__:
        return (str(source.name),)
    return ()


def _cannot_start(error: Exception, output: ProtocolOutput) -> int:
    """A table is locked by another run, a stream's name cannot be a table, or the warehouse
    cannot hold tables: nothing was read."""
    message = output.secrets.mask(str(error))
    locked = isinstance(error, TableLocked)
    output.error(message, error, failure_type="transient_error" if locked else "config_error")
    output.flush()
    sys.stderr.write(f"error: {message}\n")
    return EXIT_FAILED if locked else EXIT_BAD_INPUT


def _source_failed(failure: SourceFailed, output: ProtocolOutput) -> int:
    """A TRACE error with the failure type airbyte-cdk would give, one line on stderr (the stack
    trace is in the TRACE), secrets masked in both; non-zero exit."""
    message = output.secrets.mask(" ".join(str(failure).split()))
    output.error(message, failure.error, failure_type=failure.failure_type)
    output.flush()
    sys.stderr.write(f"error: {message}\n")
    return EXIT_BAD_INPUT if failure.failure_type == "config_error" else EXIT_FAILED


def _bad_input(error: InputError, output: ProtocolOutput) -> int:
    message = output.secrets.mask(str(error))
    output.error(message, error, failure_type="config_error")
    output.flush()
    sys.stderr.write(f"error: {message}\n")
    return EXIT_BAD_INPUT
