"""Loading the command line's input files, with errors that name the file and the problem.

Everything here runs before anything is written, so bad input never leaves a half-written table or state behind.
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Callable, Mapping
from contextlib import AbstractContextManager, nullcontext
from typing import Any

import orjson
from airbyte_cdk.models import (
    ConfiguredAirbyteCatalog,
    ConfiguredAirbyteCatalogSerializer,
)

from source_framework.runtime.secrets import SecretFilter, find_secrets

#: The most one stream's state may take as compact JSON, for a state ``read`` prints and one it is given alike.
MAX_STATE_BYTES = 10 * 1024 * 1024


class InputError(Exception):
    """Bad input from the user: a file that is missing, malformed or of the wrong shape."""


def load_json_file(path: str, what: str) -> Any:
    """Read a JSON file or raise an ``InputError`` that says which file and what is wrong."""
    if not os.path.exists(path):
        raise InputError(f"{what} file '{path}' does not exist")
    if os.path.isdir(path):
        raise InputError(f"{what} file '{path}' is a directory, not a JSON file")
    try:
        with open(path, "rb") as handle:
            raw = handle.read()
    except OSError as error:
        raise InputError(f"{what} file '{path}' cannot be read: {error.strerror}") from None
    try:
        return json.loads(raw)
    except (json.JSONDecodeError, UnicodeDecodeError) as error:
        raise InputError(f"{what} file '{path}' is not valid JSON: {error}") from None


def load_config(path: str) -> dict[str, Any]:
    config = load_json_file(path, "config")
    if not isinstance(config, dict):
        raise InputError(f"config file '{path}' must hold a JSON object, got {type(config).__name__}")
    return config


def check_config(source: Any, config: Mapping[str, Any], spec: Any, path: str) -> None:
    """The config against the connector's spec, as airbyte-cdk's entrypoint checks it (unless the source opts out)."""
    if getattr(source, "check_config_against_spec", True) is False:
        return
    from airbyte_cdk.sources.utils.schema_helpers import check_config_against_spec_or_exit

    try:
        check_config_against_spec_or_exit(config, spec)
    except Exception as error:
        raise InputError(f"config file '{path}' does not match the connector's spec: {getattr(error, 'message', error)}") from None


def load_checked_config(source: Any, path: str, secrets: SecretFilter, logger: logging.Logger,
                        calling: Callable[[str], AbstractContextManager[Any]] = lambda call: nullcontext()) -> dict[str, Any]:
    """The config file, checked against the connector's spec (``source.spec()`` runs within ``calling("spec()")``);
    ``secrets`` masks its secrets from as soon as they are known, so an error is masked with the best known then."""
    config = load_config(path)
    secrets.use(find_secrets(config, {}))  # until the spec says which fields are secret
    with calling("spec()"):
        spec = source.spec(logger)
    secrets.use(find_secrets(config, spec.connectionSpecification))
    check_config(source, config, spec, path)
    return config


def streams_of(source: Any, config: Any) -> dict[str, Any]:
    """The source's streams by name; what ``streams()`` raises is bad input."""
    try:
        return {stream.name: stream for stream in source.streams(config)}
    except Exception as error:
        raise InputError(f"the source's streams() raised {type(error).__name__}: {error}") from None


def stream_named(streams: dict[str, Any], name: str) -> Any:
    if name not in streams:
        raise InputError(f"--stream: the source has no stream '{name}' (it has: {', '.join(sorted(streams))})")
    return streams[name]


#: what to do with ``discover``'s output, said when it is given as the configured catalog
DISCOVERED_HINT = (
    "; this looks like discover's output (the streams the source offers), but read takes a configured catalog "
    "(the streams to sync and how): wrap each stream as {\"stream\": <the stream>, \"sync_mode\": \"incremental\" or "
    "\"full_refresh\", \"destination_sync_mode\": \"append\", \"overwrite\" or \"append_dedup\"}, or let the "
    "catalog command write one from discover: python main.py catalog --config <config> --output <catalog>"
)


def load_catalog(path: str) -> ConfiguredAirbyteCatalog:
    raw = load_json_file(path, "catalog")
    if isinstance(raw, dict) and raw.get("type") == "CATALOG" and isinstance(raw.get("catalog"), dict):
        raise InputError(f"catalog file '{path}' holds a CATALOG message{DISCOVERED_HINT}")
    if not isinstance(raw, dict) or not isinstance(raw.get("streams"), list):
        raise InputError(f"catalog file '{path}' must be an object with a 'streams' list")
    first_at: dict[str, int] = {}
    for index, entry in enumerate(raw["streams"]):
        if not isinstance(entry, dict) or not isinstance(entry.get("stream"), dict):
            discovered = isinstance(entry, dict) and "name" in entry and "json_schema" in entry
            raise InputError(f"catalog file '{path}': streams[{index}] must be an object with a 'stream' object"
                             f"{DISCOVERED_HINT if discovered else ''}")
        for key in ("sync_mode", "destination_sync_mode"):
            if key not in entry:
                raise InputError(f"catalog file '{path}': streams[{index}] has no '{key}'")
        name = entry["stream"].get("name")
        if not isinstance(name, str):
            raise InputError(f"catalog file '{path}': streams[{index}].stream has no 'name'")
        # Each stream has one table, one state and one sync: two entries would write one table at once.
        if name in first_at:
            raise InputError(
                f"catalog file '{path}': stream '{name}' is selected twice (streams[{first_at[name]}] and "
                f"streams[{index}]); keep one entry per stream"
            )
        first_at[name] = index
    try:
        return ConfiguredAirbyteCatalogSerializer.load(raw)
    except Exception as error:  # the serializer's errors are long; keep the first line
        first_line = str(error).splitlines()[0] if str(error) else type(error).__name__
        raise InputError(f"catalog file '{path}' is not a valid configured catalog: {first_line}") from None


def compact_state_size(state: Any) -> int:
    """Bytes of ``state`` as its STATE line carries it (``to_json``'s text where orjson refuses it)."""
    try:
        return len(orjson.dumps(state))
    except orjson.JSONEncodeError:
        from source_framework.runtime.output import to_json

        return len(to_json(state))


def load_state(path: str | None) -> dict[str, Any]:
    """Read a state file (Airbyte's per-stream list, the legacy dict or Singer bookmarks) into ``{stream: state}``; the
    size limit is per stream, not on the file."""
    if not path:
        return {}
    states = _states_of(load_json_file(path, "state"), path)
    for name, state in states.items():
        size = compact_state_size(state)
        if size > MAX_STATE_BYTES:
            raise InputError(
                f"state file '{path}': the state of stream '{name}' is {size / 1e6:.1f} MB, "
                f"over the {MAX_STATE_BYTES // 2**20} MB limit"
            )
    return states


def _states_of(raw: Any, path: str) -> dict[str, Any]:
    if raw in (None, {}, []):
        return {}
    if isinstance(raw, list):
        return _from_state_messages(raw, path)
    if isinstance(raw, dict) and "bookmarks" in raw:
        return _from_singer(raw["bookmarks"], path)
    if isinstance(raw, dict) and raw.get("type") in ("STREAM", "GLOBAL", "LEGACY") or (
        isinstance(raw, dict) and "stream" in raw and "type" in raw
    ):
        return _from_state_messages([raw], path)
    if isinstance(raw, dict):
        return _from_legacy_dict(raw, path)
    raise InputError(f"state file '{path}' must hold a list of per-stream states or an object")


def _from_state_messages(messages: list, path: str) -> dict[str, Any]:
    states: dict[str, Any] = {}
    for index, message in enumerate(messages):
        if isinstance(message, dict) and message.get("type") == "STATE" and "state" in message:
            message = message["state"]  # a whole protocol line copied from stdout
        if not isinstance(message, dict):
            raise InputError(f"state file '{path}': entry {index} is not an object")
        kind = message.get("type", "STREAM")
        if kind == "LEGACY" and isinstance(message.get("data"), dict):
            states.update(_from_legacy_dict(message["data"], path))
        elif kind == "GLOBAL":
            global_state = message["global"] if message.get("global") is not None else {}
            stream_states = global_state.get("stream_states") if isinstance(global_state, dict) else None
            if not isinstance(global_state, dict) or not isinstance(stream_states or [], list):
                raise InputError(f"state file '{path}': entry {index}: 'global' must be an object with a 'stream_states' list")
            for stream_state in stream_states or []:
                states.update([_named_stream_state(stream_state, f"entry {index}: a global stream_states entry", path)])
        else:
            states.update([_named_stream_state(message.get("stream"), f"entry {index}", path)])
    return states


def _named_stream_state(entry: Any, where: str, path: str) -> tuple[str, dict[str, Any]]:
    if not isinstance(entry, dict) or not isinstance(entry.get("stream_descriptor"), dict):
        raise InputError(
            f"state file '{path}': {where} has no 'stream_descriptor' object "
            "(expected Airbyte per-stream state messages)"
        )
    name = entry["stream_descriptor"].get("name")
    if not isinstance(name, str):
        raise InputError(f"state file '{path}': {where} has a stream_descriptor without a name")
    value = entry.get("stream_state") or {}
    if not isinstance(value, dict):
        raise InputError(f"state file '{path}': the stream_state of '{name}' must be an object")
    return name, value


def _from_legacy_dict(raw: dict, path: str) -> dict[str, Any]:
    for name, value in raw.items():
        if not isinstance(value, dict):
            raise InputError(
                f"state file '{path}': the state of stream '{name}' must be a JSON object, got {type(value).__name__}"
            )
    return dict(raw)


def _from_singer(bookmarks: Any, path: str) -> dict[str, Any]:
    if not isinstance(bookmarks, dict):
        raise InputError(f"state file '{path}': 'bookmarks' must be an object of stream bookmarks")
    states: dict[str, Any] = {}
    for name, bookmark in bookmarks.items():
        if not isinstance(bookmark, dict):
            raise InputError(f"state file '{path}': the bookmark of stream '{name}' must be an object")
        if "partitions" in bookmark:
            if not isinstance(bookmark["partitions"], list):
                raise InputError(f"state file '{path}': the partitions of stream '{name}' must be a list")
            states[name] = {"states": [_singer_partition(p, name, path) for p in bookmark["partitions"]]}
            continue
        if "replication_key" in bookmark and "replication_key_value" in bookmark:
            states[name] = {_replication_key(bookmark, name, path): bookmark["replication_key_value"]}
        else:
            states[name] = dict(bookmark)
    return states


def _singer_partition(entry: Mapping[str, Any], name: str, path: str) -> dict[str, Any]:
    if not isinstance(entry, dict) or not isinstance(entry.get("context"), dict):
        raise InputError(f"state file '{path}': partitions of stream '{name}' need a 'context' object")
    if "replication_key" not in entry or "replication_key_value" not in entry:
        raise InputError(
            f"state file '{path}': a partition of stream '{name}' has no replication_key/replication_key_value"
        )
    return {
        "partition": dict(entry["context"]),
        "cursor": {_replication_key(entry, name, path): entry["replication_key_value"]},
    }


def _replication_key(bookmark: Mapping[str, Any], name: str, path: str) -> str:
    key = bookmark["replication_key"]
    if not isinstance(key, str):
        raise InputError(f"state file '{path}': the replication_key of stream '{name}' must be a field name, got {key!r}")
    return key
