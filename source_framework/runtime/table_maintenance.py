"""``main.py convert | optimize``: change how a stream's table is stored, never what it holds.

``convert`` makes a Parquet table folder a Delta table in place, keeping its newest checkpoint; ``optimize`` compacts
a Delta table's small files without changing a row, then VACUUMs. Both hold each table's lock while they work.
"""

from __future__ import annotations

import argparse
import logging
from typing import Any

from source_framework.runtime.inputs import InputError, load_checked_config, stream_named, streams_of
from source_framework.runtime.process import EXIT_BAD_INPUT, EXIT_FAILED, EXIT_OK
from source_framework.runtime.secrets import SecretFilter
from source_framework.runtime.state_commands import _fail, _refusals

logger = logging.getLogger("source_framework.tables")

COMMANDS = ("convert", "optimize")


def add_maintenance_commands(commands: Any, common: Any, add_table_flags: Any) -> None:
    for name, text in (("convert", "make Parquet table folders Delta tables, in place, their checkpoints kept"),
                       ("optimize", "compact Delta tables' small files (no row changes), then VACUUM")):
        command = commands.add_parser(name, help=text, parents=[common])
        command.add_argument("--config", required=True, help="the connector config (where the tables are)")
        command.add_argument("--stream", help="only this stream (default: every stream with a table)")
        add_table_flags(command)


def run_maintenance_command(source: Any, parsed: argparse.Namespace, spark_destination: Any) -> int:
    secrets = SecretFilter(())
    try:
        config = load_checked_config(source, parsed.config, secrets, logger)
        streams = streams_of(source, config)
        targets = [stream_named(streams, parsed.stream)] if parsed.stream else [streams[name] for name in sorted(streams)]
        destination = spark_destination(source, config, parsed)
        try:
            for stream in targets:
                _one(destination, stream, parsed.command)
        finally:
            destination.close()
    except InputError as error:
        return _fail(secrets, error, EXIT_BAD_INPUT)
    except Exception as error:
        if not isinstance(error, (ValueError, *_refusals())):  # (a table it must not touch, or cannot convert)
            raise
        return _fail(secrets, error, EXIT_FAILED)
    return EXIT_OK


def _one(destination: Any, stream: Any, command: str) -> None:
    path = destination.table_path(stream.namespace, stream.name)
    if not destination.has_table(stream.namespace, stream.name):
        logger.info("%s: no table at %s", stream.name, path)
    elif command == "convert":
        rows = destination.convert_table(stream.namespace, stream.name)
        logger.info("%s: %s is a Delta table now (%d rows)", stream.name, path, rows)
    else:
        metrics = destination.optimize_table(stream.namespace, stream.name)
        logger.info("%s: %s compacted: %s files rewritten into %s, %s old files vacuumed", stream.name, path,
                    metrics.get("numFilesRemoved", 0), metrics.get("numFilesAdded", 0), metrics.get("filesVacuumed", 0))
