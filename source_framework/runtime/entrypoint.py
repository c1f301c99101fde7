"""The command line: ``spec``, ``check``, ``discover`` and ``read``, Airbyte style.

::

    if __name__ == "__main__":
        launch(MySource(), sys.argv[1:])

``spec``, ``check`` and ``discover`` are airbyte-cdk's own. ``read`` is ours: it lands records in
Spark tables (or prints them with ``--destination stdout``) and prints each STATE only after the
records before it are committed.

stdout carries protocol messages and nothing else: during ``read`` the process's file
descriptor 1 is pointed at stderr, so a stray ``print`` or the JVM's own output cannot reach it,
and protocol lines go to a private copy of the original stdout. stderr gets the logs, the
progress of ``read`` (``runtime.progress``) and its end-of-run summary (``runtime.summary``).
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
import time
from typing import Any, Dict, List, Mapping, Optional, Set, Tuple

from airbyte_cdk.entrypoint import AirbyteEntrypoint
from airbyte_cdk.models import ConfiguredAirbyteCatalog, SyncMode
from airbyte_cdk.sources.utils.schema_helpers import check_config_against_spec_or_exit
from airbyte_cdk.utils.airbyte_secrets_utils import update_secrets

from source_framework.compare.command import COMMAND as COMPARE_COMMAND
from source_framework.compare.command import add_compare_parser, run_compare
from source_framework.destinations.base import (
    APPEND,
    APPEND_DEDUP,
    OVERWRITE,
    Destination,
)
from source_framework.runtime.inputs import (
    InputError,
    load_catalog,
    load_config,
    load_state,
)
from source_framework.runtime.output import ProtocolOutput
from source_framework.runtime.progress import make_progress
from source_framework.runtime.read import read_streams
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
from source_framework.runtime.summary import format_summary
from source_framework.sources.source import Source
from source_framework.streams.cursor import CursorValueError

logger = logging.getLogger("source_framework")

EXIT_OK, EXIT_FAILED, EXIT_BAD_INPUT, EXIT_INTERRUPTED = 0, 1, 2, 130


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="main.py", description="An Airbyte source that lands data in Spark tables.")
    commands = parser.add_subparsers(dest="command", required=True)
    commands.add_parser("spec", help="print the connector's specification")
    for name, text in (("check", "check the config against the API"), ("discover", "print the catalog")):
        command = commands.add_parser(name, help=text)
        command.add_argument("--config", required=True)
    read = commands.add_parser("read", help="sync the configured streams")
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
    read.add_argument("--warehouse", help="folder of the Spark tables (default: the config's destination.warehouse, else ./warehouse)")
    read.add_argument("--spark-master", help="Spark master URL, e.g. local[*], spark://host:7077 or sc://host:15002")
    read.add_argument(
        "--quiet",
        action="store_true",
        help="no progress on stderr (neither the live table on a terminal nor the line per committed "
        "checkpoint otherwise) and no end-of-run summary",
    )
    add_state_commands(commands)
    add_compare_parser(commands)
    return parser


def launch(source: Source, args: List[str]) -> None:
    """Run one command of ``source`` and exit with its status code."""
    parsed = build_parser().parse_args(args)
    if parsed.command == "read":
        sys.exit(run_read(source, parsed))
    if parsed.command == "state":
        sys.exit(run_state_command(source, parsed))
    if parsed.command == COMPARE_COMMAND:
        sys.exit(run_compare(source, parsed))
    sys.exit(run_cdk_command(source, parsed))


def run_cdk_command(source: Source, parsed: argparse.Namespace) -> int:
    """``spec``, ``check`` and ``discover`` through airbyte-cdk's entrypoint, after our own
    check of the config file so that a bad file gets a one-line error, not a traceback."""
    cdk_args = [parsed.command]
    if parsed.command != "spec":
        try:
            load_config(parsed.config)
        except InputError as error:
            return _bad_input(error, ProtocolOutput())
        cdk_args += ["--config", parsed.config]
    entrypoint = AirbyteEntrypoint(source)
    for line in entrypoint.run(entrypoint.parse_args(cdk_args)):
        sys.stdout.write(line + "\n")
    sys.stdout.flush()
    return EXIT_OK


def run_read(source: Source, parsed: argparse.Namespace) -> int:
    output = ProtocolOutput(_private_stdout())
    _log_to_stderr()
    try:
        config = load_config(parsed.config)
        spec = source.spec(logger)
        secrets = SecretFilter(find_secrets(config, spec.connectionSpecification))
        output = ProtocolOutput(output._out, secrets)
        update_secrets(secrets.secrets)
        for handler in logging.getLogger().handlers:
            handler.addFilter(MaskingLogFilter(secrets))
        _check_config(config, spec)
        catalog = load_catalog(parsed.catalog)
        states, rebuild, state_file = _load_states(parsed)
        if state_file is not None:
            output = ProtocolOutput(output._out, secrets, on_state=state_file.update)
        for name, value in states.items():
            if secrets.contains_secret(json.dumps(value, default=str)):
                raise InputError(f"state file '{parsed.state}': the state of stream '{name}' contains a secret value from the config; refusing it")
        streams = _prepare_streams(source, config, catalog, states, parsed, rebuild)
        destination = make_destination(source, config, parsed, output)
    except InputError as error:
        return _bad_input(error, output)

    started = time.monotonic()
    logger.info("reading %d stream(s) into %s", len(catalog.streams), destination.describe())
    progress = make_progress(parsed.quiet)
    output.add_state_listener(progress.checkpoint_committed)
    output._out = progress.protocol_stream(output._out)
    try:
        with progress:
            result = read_streams(streams, catalog, states, destination, output, rebuild=rebuild, progress=progress)
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
        sys.stderr.write(format_summary(result, time.monotonic() - started))
        sys.stderr.flush()
    return EXIT_FAILED if result.failed else EXIT_OK


def _check_config(config: Mapping[str, Any], spec: Any) -> None:
    try:
        check_config_against_spec_or_exit(config, spec)
    except Exception as error:
        raise InputError(f"config file does not match the connector's spec: {getattr(error, 'message', error)}") from None


def _prepare_streams(
    source: Source,
    config: Mapping[str, Any],
    catalog: ConfiguredAirbyteCatalog,
    states: Mapping[str, Any],
    parsed: argparse.Namespace,
    rebuild: Set[str],
) -> Dict[str, Any]:
    """Check the catalog against the source and apply the input state, before anything is written."""
    streams = {stream.name: stream for stream in source.streams(config)}
    for configured in catalog.streams:
        name = configured.stream.name
        if name not in streams:
            raise InputError(
                f"catalog file '{parsed.catalog}' names stream '{name}', which the source does not have "
                f"(it has: {', '.join(sorted(streams))})"
            )
        stream = streams[name]
        mode = configured.destination_sync_mode.value
        if mode not in (APPEND, OVERWRITE, APPEND_DEDUP):
            raise InputError(f"catalog file '{parsed.catalog}': stream '{name}' has unknown destination_sync_mode '{mode}'")
        if mode == APPEND_DEDUP and not (configured.primary_key or stream.primary_key):
            raise InputError(f"catalog file '{parsed.catalog}': stream '{name}' asks for append_dedup but has no primary key")
        if configured.sync_mode == SyncMode.incremental:
            if not stream.supports_incremental:
                raise InputError(
                    f"catalog file '{parsed.catalog}': stream '{name}' has no cursor, so it cannot be read incrementally"
                )
            if name in states:
                try:
                    stream.state = states[name]
                except (CursorValueError, ValueError, TypeError, AttributeError) as error:
                    problem = f"state file '{parsed.state or parsed.state_file}': {error}"
                    if parsed.on_bad_state != "resync":
                        raise InputError(problem) from None
                    logger.warning("%s; --on-bad-state resync: stream %s re-syncs from scratch and its table is rebuilt", problem, name)
                    stream.state = {}
                    rebuild.add(name)
    return streams


def _load_states(parsed: argparse.Namespace) -> Tuple[Dict[str, Any], Set[str], Optional[StateFile]]:
    """The input states, the streams to rebuild (bad state and ``--on-bad-state resync``), and the
    state file to keep up to date, if any."""
    if parsed.state and parsed.state_file:
        raise InputError("give --state or --state-file, not both")
    path = parsed.state or parsed.state_file
    try:
        if parsed.state_file:
            state_file = StateFile(parsed.state_file)
            return state_file.states, set(), state_file
        return load_state(parsed.state), set(), None
    except InputError as error:
        if parsed.on_bad_state != "resync":
            raise
        logger.warning("%s; --on-bad-state resync: every stream re-syncs from scratch and its table is rebuilt", error)
        if parsed.state_file:
            os.replace(path, path + ".corrupt")
            logger.warning("the unreadable state file was kept as %s", path + ".corrupt")
            state_file = StateFile(parsed.state_file)
            return {}, {"*"}, state_file
        return {}, {"*"}, None


def make_destination(source: Source, config: Mapping[str, Any], parsed: argparse.Namespace, output: ProtocolOutput) -> Destination:
    settings = dict(config.get("destination") or {})
    kind = parsed.destination or settings.get("type", "spark")
    if kind == "stdout":
        from source_framework.destinations.stdout import StdoutDestination

        return StdoutDestination(output)
    if kind != "spark":
        raise InputError(f"config file '{parsed.config}': destination.type must be 'spark' or 'stdout', got {kind!r}")
    from source_framework.destinations.spark.writer import SparkDestination

    return SparkDestination(
        warehouse=parsed.warehouse or settings.get("warehouse", "./warehouse"),
        default_namespace=source.name,
        master=parsed.spark_master or settings.get("spark_master", "local[*]"),
        spark_conf=settings.get("spark_conf") or {},
        max_pending_records=int(settings.get("max_pending_records", 200_000)),
        max_pending_bytes=int(settings.get("max_pending_mb", 256)) * 1024 * 1024,
        stage_rows=int(settings.get("stage_rows", 100_000)),
    )


def _bad_input(error: InputError, output: ProtocolOutput) -> int:
    message = str(error)
    output.error(message, error, failure_type="config_error")
    output.flush()
    sys.stderr.write(f"error: {message}\n")
    return EXIT_BAD_INPUT


def _private_stdout() -> Any:
    """A binary file on the real stdout, after pointing descriptor 1 at stderr."""
    sys.stdout.flush()
    protocol_fd = os.dup(1)
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    return os.fdopen(protocol_fd, "wb", buffering=1 << 16)


def _log_to_stderr() -> None:
    root = logging.getLogger()
    for handler in list(root.handlers):
        root.removeHandler(handler)
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    root.addHandler(handler)
    root.setLevel(logging.INFO)
    for noisy in ("py4j", "urllib3", "pyspark"):
        logging.getLogger(noisy).setLevel(logging.WARNING)
