"""``main.py state show | reset | set``: operate on a state file and keep the tables consistent.

- ``show`` prints the file's states as STATE messages on stdout (and a summary on stderr).
- ``reset`` forgets the state of every stream, or of ``--stream``; with ``--tables`` it also
  deletes their tables, else it marks them so that their next sync replaces them (not appends
  a second copy).
- ``set`` moves a stream's cursor (every partition's, for partitioned streams) to ``--cursor``
  and rewrites its table without the rows at or after that cursor, recorded as a checkpoint of
  the new state: the next sync re-reads exactly those rows, once.
"""

from __future__ import annotations

import argparse
import logging
import os
import shutil
import sys
from typing import Any, Dict, List, Mapping

from source_framework.runtime.inputs import InputError, load_config
from source_framework.runtime.state_file import StateFile

logger = logging.getLogger("source_framework.state")


def add_state_commands(commands: Any) -> None:
    state = commands.add_parser("state", help="show, reset or set the state in a state file")
    actions = state.add_subparsers(dest="action", required=True)
    show = actions.add_parser("show", help="print the state file's states")
    show.add_argument("--state-file", required=True)
    reset = actions.add_parser("reset", help="forget the state of all streams or one")
    reset.add_argument("--state-file", required=True)
    reset.add_argument("--config", required=True, help="the connector config (where the tables are)")
    reset.add_argument("--stream", help="only this stream (default: every stream)")
    reset.add_argument("--tables", action="store_true", help="also delete the tables now")
    set_ = actions.add_parser("set", help="move one stream's cursor back (or forward) to re-sync from it")
    set_.add_argument("--state-file", required=True)
    set_.add_argument("--config", required=True)
    set_.add_argument("--stream", required=True)
    set_.add_argument("--cursor", required=True, help="the new cursor value, e.g. 2025-06-01T00:00:00Z")


def run_state_command(source: Any, parsed: argparse.Namespace) -> int:
    from source_framework.runtime.process import EXIT_BAD_INPUT, log_to_stderr

    log_to_stderr()
    try:
        state_file = StateFile(parsed.state_file)
        if parsed.action == "show":
            return _show(state_file)
        config = load_config(parsed.config)
        streams = {stream.name: stream for stream in source.streams(config)}
        if parsed.action == "reset":
            return _reset(source, config, streams, state_file, parsed)
        return _set(source, config, streams, state_file, parsed)
    except InputError as error:
        sys.stderr.write(f"error: {error}\n")
        return EXIT_BAD_INPUT


def _show(state_file: StateFile) -> int:
    import orjson

    for message in state_file.messages():
        sys.stdout.write(orjson.dumps({"type": "STATE", "state": message}).decode() + "\n")
    for name, value in sorted(state_file.states.items()):
        sys.stderr.write(f"{name:<20} {orjson.dumps(value).decode()[:200]}\n")
    if not state_file.states:
        sys.stderr.write(f"{state_file.path}: no state\n")
    return 0


def _table_path(source: Any, config: Mapping[str, Any], stream: Any) -> str:
    warehouse = (config.get("destination") or {}).get("warehouse", "./warehouse")
    return os.path.join(os.path.abspath(warehouse), stream.namespace or source.name, stream.name)


def _reset(source: Any, config: Mapping[str, Any], streams: Dict[str, Any], state_file: StateFile, parsed: argparse.Namespace) -> int:
    from source_framework.destinations.spark.writer import request_reset

    if parsed.stream and parsed.stream not in streams:
        raise InputError(f"--stream: the source has no stream '{parsed.stream}' (it has: {', '.join(sorted(streams))})")
    names: List[str] = [parsed.stream] if parsed.stream else sorted(streams)
    for name in names:
        state_file.remove(name)
        path = _table_path(source, config, streams[name])
        if parsed.tables:
            shutil.rmtree(path, ignore_errors=True)
            logger.info("%s: state forgotten, table %s deleted", name, path)
        elif os.path.isdir(path):
            request_reset(path)
            logger.info("%s: state forgotten; the next sync replaces the table %s", name, path)
        else:
            logger.info("%s: state forgotten", name)
    state_file.save()
    return 0


def _set(source: Any, config: Mapping[str, Any], streams: Dict[str, Any], state_file: StateFile, parsed: argparse.Namespace) -> int:
    stream = streams.get(parsed.stream)
    if stream is None:
        raise InputError(f"--stream: the source has no stream '{parsed.stream}' (it has: {', '.join(sorted(streams))})")
    field = stream.cursor_field if isinstance(stream.cursor_field, str) else (stream.cursor_field or [None])[0]
    if not field:
        raise InputError(f"stream '{stream.name}' has no cursor")
    current = state_file.states.get(stream.name) or {}
    if "states" in current:
        new_state: Dict[str, Any] = {
            "states": [{"partition": p["partition"], "cursor": {field: parsed.cursor}} for p in current["states"]]
        }
    elif hasattr(stream, "partitions"):
        raise InputError(f"stream '{stream.name}' is partitioned and the state file has no partitions for it yet")
    else:
        new_state = {field: parsed.cursor}
    try:
        stream.state = new_state  # the stream's own check of the value
    except Exception as error:
        raise InputError(f"--cursor {parsed.cursor!r}: {error}") from None
    _truncate_table_from(_table_path(source, config, stream), field, parsed.cursor, new_state, config)
    state_file.states[stream.name] = new_state
    state_file.save()
    logger.info("%s: cursor set to %s", stream.name, parsed.cursor)
    return 0


def _truncate_table_from(path: str, field: str, cursor: str, new_state: Mapping[str, Any], config: Mapping[str, Any]) -> None:
    """Keep the rows before ``cursor`` (and those with none), committed as a checkpoint of ``new_state``."""
    from source_framework.destinations.spark.session import get_spark
    from source_framework.destinations.spark.table import SparkTable

    destination = config.get("destination") or {}
    table = SparkTable(lambda: get_spark(destination.get("spark_master", "local[*]"), conf=destination.get("spark_conf")), path)
    last = table.last_checkpoint()
    if last is None:
        return
    from pyspark.sql import functions as F

    frame = table.read()
    column = frame[field]
    kept = frame.where(column.isNull() | (column < F.lit(cursor).cast(frame.schema[field].dataType)))
    info = table.commit(kept, state=dict(new_state), seq=last["seq"] + 1, replace=True, extra={"start_state": dict(new_state)})
    logger.info("%s: table rewritten with the %d rows before %s", path, info.rows, cursor)
