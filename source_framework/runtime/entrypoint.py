"""The command line: ``spec``, ``check``, ``discover``, ``read``, Airbyte style (and ``catalog``, ``state``, ``tables``).

Any airbyte-cdk 7 source runs here unchanged; ``spec``, ``check`` and ``discover`` are airbyte-cdk's own, ``read`` is
ours. stdout carries protocol messages and nothing else; logs, progress and the summary go to stderr.
"""

from __future__ import annotations

import argparse
import logging
import os
import runpy
import sys
from collections.abc import Callable, Mapping
from typing import Any

from airbyte_cdk.entrypoint import AirbyteEntrypoint

from source_framework.helpers.tuning import TUNING
from source_framework.runtime.catalog_command import add_catalog_command, run_catalog
from source_framework.runtime.command_errors import SourceFailed, report_bad_input, report_source_failed, source_call
from source_framework.runtime.destination_setup import spark_destination
from source_framework.runtime.inputs import InputError, load_config
from source_framework.runtime.output import ProtocolOutput
from source_framework.runtime.process import (
    EXIT_BAD_INPUT,
    EXIT_FAILED,
    EXIT_INTERRUPTED,
    EXIT_OK,
    log_to_stderr,
)
from source_framework.runtime.read import schema_missing_message
from source_framework.runtime.read_command import run_read
from source_framework.runtime.secrets import SecretFilter, find_secrets
from source_framework.runtime.state_commands import (
    add_state_commands,
    run_state_command,
)
from source_framework.runtime.table_maintenance import COMMANDS as MAINTENANCE_COMMANDS
from source_framework.runtime.table_maintenance import add_maintenance_commands, run_maintenance_command
from source_framework.runtime.tables_command import add_tables_command, run_tables

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
        f"config's concurrency_level, else {TUNING.concurrency}; 1 reads one slice after another)",
    )
    read.add_argument(
        "--max-checkpoints-ahead",
        type=_positive_int,
        help="checkpoints whose STATE may wait for its commit while reading goes on: fewer read again "
        f"after a crash, more speed where commits lag (default: the config's max_checkpoints_ahead, else "
        f"{TUNING.max_in_flight}; 1 = at most one checkpoint at risk)",
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
    """airbyte-cdk's manifest runner flags, taken with the same meaning (read by whoever builds the source)."""
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
    """Run a connector script as ``__main__`` with its ``launch(source, args)`` call handed to ``handler`` (for tools)."""
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
    """``spec``, ``check`` and ``discover`` through airbyte-cdk, after our own config check so a bad file gets a one-line
    error, not a traceback."""
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
        return report_bad_input(error, output)
    except SourceFailed as failure:
        sys.stdout.flush()
        return report_source_failed(failure, output)
    sys.stdout.flush()
    return EXIT_OK


def _check_schemas(source: Any, config: Mapping[str, Any]) -> None:
    """Every stream has a JSON schema, or ``discover`` says which one has none and how to add it."""
    with source_call("streams()"):
        streams = source.streams(config)
    for stream in streams:
        try:
            stream.get_json_schema()
        except Exception as error:
            raise InputError(schema_missing_message(stream.name, stream, error)) from None
