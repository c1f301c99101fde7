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

from airbyte_cdk.models import AirbyteCatalog, FailureType
from airbyte_cdk.models.airbyte_protocol_serializers import AirbyteCatalogSerializer
from airbyte_cdk.utils.traced_exception import AirbyteTracedException

from source_framework.destinations.spark.atomic_files import write_atomically
from source_framework.runtime.inputs import InputError, check_config, load_config
from source_framework.runtime.process import EXIT_BAD_INPUT, EXIT_FAILED, EXIT_OK
from source_framework.runtime.secrets import SecretFilter, find_secrets

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
        config = load_config(parsed.config)
        secrets = SecretFilter(find_secrets(config, {}))  # until the spec says which fields are secret
        # The source's code runs with stdout pointed at stderr: the catalog is all stdout carries.
        with contextlib.redirect_stdout(sys.stderr):
            spec = _call("spec()", lambda: source.spec(logger))
            secrets = SecretFilter(find_secrets(config, spec.connectionSpecification))
            check_config(source, config, spec, parsed.config)
            catalog = configured_catalog(_call("discover", lambda: source.discover(logger, config)))
    except InputError as error:
        return _error(secrets.mask(str(error)), EXIT_BAD_INPUT)
    except _SourceRaised as raised:
        return _error(secrets.mask(str(raised)), raised.exit_code)
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


class _SourceRaised(Exception):
    def __init__(self, message: str, exit_code: int) -> None:
        super().__init__(message)
        self.exit_code = exit_code


def _call(what: str, call: Any) -> Any:
    """``call()``; what the source raises becomes one line naming ``what`` (a config error exits as bad input)."""
    try:
        return call()
    except Exception as error:
        detail = error.message if isinstance(error, AirbyteTracedException) and error.message else str(error)
        config_error = isinstance(error, AirbyteTracedException) and error.failure_type == FailureType.config_error
        raise _SourceRaised(
            f"the source's {what} raised {type(error).__name__}: {detail}", EXIT_BAD_INPUT if config_error else EXIT_FAILED
        ) from error


def _error(message: str, code: int) -> int:
    sys.stderr.write(f"error: {' '.join(message.split())}\n")
    return code
