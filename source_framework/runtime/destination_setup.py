"""The destination a command writes to, as the config's ``destination`` section and the flags describe it."""

from __future__ import annotations

import argparse
import os
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from source_framework.destinations.base import Destination
from source_framework.destinations.spark.layout import warehouse_for
from source_framework.helpers.tuning import TUNING
from source_framework.runtime.inputs import InputError
from source_framework.runtime.output import ProtocolOutput

if TYPE_CHECKING:
    from source_framework.destinations.spark.page_conversion import ConverterPool


#: the ``destination`` section's keys (docs/configuration.md has what each one does)
DESTINATION_KEYS = ("type", "warehouse", "table_format", "spark_master", "spark_conf", "writer", "max_pending_records",
                    "max_pending_mb", "stage_rows", "retention_hours", "connect_retry_seconds", "on_type_mismatch")


def destination_settings(config: Mapping[str, Any], parsed: argparse.Namespace) -> dict[str, Any]:
    """The config's ``destination`` section; an unknown key is refused, since a misspelt ``warehose`` would silently
    leave the tables in the default warehouse."""
    settings = config.get("destination") or {}
    if not isinstance(settings, Mapping):
        raise InputError(f"config file '{parsed.config}': destination must be an object, got {type(settings).__name__}")
    unknown = sorted(str(key) for key in settings if key not in DESTINATION_KEYS)
    if unknown:
        import difflib

        hints = [f"'{key}'" + "".join(f" (did you mean '{close}'?)" for close in difflib.get_close_matches(key, DESTINATION_KEYS, 1))
                 for key in unknown]
        raise InputError(f"config file '{parsed.config}': the destination section has no setting {', '.join(hints)}; "
                         f"its settings are {', '.join(DESTINATION_KEYS)}")
    return dict(settings)


def start_page_converters(config: Mapping[str, Any], parsed: argparse.Namespace) -> ConverterPool | None:
    """The sync's page converters, started as soon as the config is read (they are slow to start), where records go to
    Spark through this process; else None."""
    settings = destination_settings(config, parsed)  # (before anything starts: a bad key fails at once)
    if _destination_kind(settings, parsed) != "spark":
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
    """The destination ``read`` writes to; it takes ownership of ``converters`` and closes them."""
    settings = destination_settings(config, parsed)
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
    """The Spark destination the config and flags describe; ``converters`` are closed here if it cannot be made."""
    from source_framework.destinations.spark.destination import SparkDestination
    from source_framework.destinations.spark.session import CONNECT_RETRY_SECONDS

    settings = destination_settings(config, parsed)
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
            # half the read's bound, so one commit runs while the next is read (a larger group is only handed over)
            group_size=TUNING.group_size_for(max_checkpoints_ahead),
        )
    except (TypeError, ValueError) as error:
        if converters is not None:
            converters.close()
        raise InputError(f"config file '{parsed.config}': the destination section is not valid: {error}") from None


def default_namespace(source: Any) -> str:
    """The namespace of tables of streams that have none: the source's name, or for a manifest run as airbyte-cdk's own
    declarative class, the manifest file's name (its folder's for a ``manifest.yaml``)."""
    manifest = getattr(source, "_path_to_yaml", None)
    if not isinstance(manifest, str) or former_namespaces(source) == ():
        return str(source.name)
    stem = os.path.splitext(os.path.basename(manifest))[0]
    if stem == "manifest":
        return os.path.basename(os.path.dirname(os.path.abspath(manifest))) or stem
    return stem or str(source.name)


def former_namespaces(source: Any) -> tuple[str, ...]:
    """Where earlier versions put the tables ``default_namespace`` now puts elsewhere (a manifest's, under airbyte-cdk's class name)."""
    cls = type(source)
    manifest = getattr(source, "_path_to_yaml", None)
    if isinstance(manifest, str) and cls.__module__.startswith("airbyte_cdk.") and source.name == cls.__name__:
        return (str(source.name),)
    return ()

