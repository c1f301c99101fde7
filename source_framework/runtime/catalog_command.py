"""``catalog``: the configured catalog ``read`` takes, made from what ``discover`` offers.

The catalog is the only thing on stdout (the source's own prints go to stderr); errors are one masked line on stderr.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import logging
import sys
from typing import Any

from airbyte_cdk.models import AirbyteCatalog
from airbyte_cdk.models.airbyte_protocol_serializers import AirbyteCatalogSerializer

from source_framework.destinations.spark.atomic_files import write_atomically
from source_framework.runtime.command_errors import SourceFailed, source_call
from source_framework.runtime.inputs import InputError, load_checked_config
from source_framework.runtime.process import EXIT_BAD_INPUT, EXIT_FAILED, EXIT_OK
from source_framework.runtime.secrets import SecretFilter

logger = logging.getLogger("source_framework")

#: said once per run: the choice left to the user, and how to make it
DEDUP_HINT = (
    "incremental streams append (each sync adds the records new or changed since the last); for one row per "
    "primary key, set their destination_sync_mode to append_dedup"
)


def add_catalog_command(commands: Any, common: argparse.ArgumentParser) -> argparse.ArgumentParser:
    command = commands.add_parser(
        "catalog", parents=[common], help="print a configured catalog for read, made from discover's streams"
    )
    command.add_argument("--config", required=True)
    command.add_argument("--output", help="write the catalog to this file instead of stdout")
    return command


def configured_catalog(discovered: AirbyteCatalog) -> dict[str, Any]:
    """``discovered`` as a configured catalog: incremental and appended where a stream can be, else full refresh overwriting."""
    configured = []
    for stream in AirbyteCatalogSerializer.dump(discovered)["streams"]:
        cursor = list(stream.get("default_cursor_field") or [])
        incremental = "incremental" in (stream.get("supported_sync_modes") or []) and bool(
            cursor or stream.get("source_defined_cursor")
        )
        entry: dict[str, Any] = {
            "stream": stream,
            "sync_mode": "incremental" if incremental else "full_refresh",
            "destination_sync_mode": "append" if incremental else "overwrite",
        }
        if incremental:
            entry["cursor_field"] = cursor
        entry["primary_key"] = stream.get("source_defined_primary_key") or []
        configured.append(entry)
    return {"streams": configured}


def run_catalog(source: Any, parsed: argparse.Namespace) -> int:
    secrets = SecretFilter([])
    try:
        # The source's code runs with stdout pointed at stderr: the catalog is all stdout carries.
        with contextlib.redirect_stdout(sys.stderr):
            config = load_checked_config(source, parsed.config, secrets, logger, source_call)
            with source_call("discover"):
                discovered = source.discover(logger, config)
            catalog = configured_catalog(discovered)
    except InputError as error:
        return _error(secrets.mask(str(error)), EXIT_BAD_INPUT)
    except SourceFailed as failure:
        return _error(secrets.mask(str(failure)), EXIT_BAD_INPUT if failure.failure_type == "config_error" else EXIT_FAILED)
    text = json.dumps(catalog, indent=2) + "\n"
    if parsed.output:
        write_atomically(parsed.output, text.encode("utf-8"))  # a reader never finds half a catalog
        sys.stderr.write(f"wrote a configured catalog of {len(catalog['streams'])} streams to {parsed.output}\n")
    else:
        sys.stdout.write(text)
        sys.stdout.flush()
    if any(entry["sync_mode"] == "incremental" for entry in catalog["streams"]):
        sys.stderr.write(f"note: {DEDUP_HINT}\n")
    return EXIT_OK


def _error(message: str, code: int) -> int:
    sys.stderr.write(f"error: {' '.join(message.split())}\n")
    return code
