"""``main.py state show | reset | set``: operate on a state file and keep the tables consistent.

Each command holds each table's lock and is crash-safe through the order of its steps: killed at any point, the next
``read`` ends with the table promised or the table as it was, never a mix. ``reset`` marks the table (the marker
applies only to a sync from an empty state), then saves the state file, then deletes the table if asked; ``set``
rewrites the table as a checkpoint of the new state, then saves the state file, so a stale file's state is one the
table has moved past. A stream with no table where ``read`` would write it stops the command unless ``--no-table``.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
from typing import Any

from source_framework.destinations.spark.layout import UnsafeTableName
from source_framework.destinations.spark.table_lock import TableLocked
from source_framework.helpers.faults import fault_point
from source_framework.runtime.inputs import InputError, load_checked_config, stream_named, streams_of
from source_framework.runtime.output import to_json
from source_framework.runtime.process import EXIT_BAD_INPUT, EXIT_FAILED, EXIT_OK
from source_framework.runtime.secrets import SecretFilter
from source_framework.runtime.state_file import StateFile
from source_framework.runtime.summary import state_as_words
from source_framework.streams.cursor import partition_identity

logger = logging.getLogger("source_framework.state")


class NoTable(Exception):
    """A ``state`` command found no table where ``read`` would write the stream."""


def add_state_commands(commands: Any, add_table_flags: Any) -> None:
    state = commands.add_parser("state", help="show, reset or set the state in a state file")
    actions = state.add_subparsers(dest="action", required=True)
    show = actions.add_parser("show", help="print the state file's states")
    show.add_argument("--state-file", required=True)
    reset = actions.add_parser("reset", help="forget the state of all streams or one")
    reset.add_argument("--stream", help="only this stream (default: every stream)")
    reset.add_argument("--tables", action="store_true", help="also delete the tables now")
    set_ = actions.add_parser("set", help="move one stream's cursor back (or forward) to re-sync from it")
    set_.add_argument("--stream", required=True)
    set_.add_argument("--cursor", required=True, help="the new cursor value, e.g. 2025-06-01T00:00:00Z")
    for command in (reset, set_):
        command.add_argument("--state-file", required=True)
        command.add_argument("--config", required=True, help="the connector config (where the tables are)")
        command.add_argument(
            "--no-table",
            action="store_true",
            help="the tables are not where read would write them, on purpose: change only the state file",
        )
        add_table_flags(command)


def run_state_command(source: Any, parsed: argparse.Namespace, spark_destination: Any) -> int:
    """One ``state`` command; errors are printed with the config's secrets masked (a path or cursor may hold one)."""
    secrets = SecretFilter(())
    try:
        if parsed.action == "show":
            if not os.path.exists(parsed.state_file):  # a mistyped name is not an empty state
                raise InputError(f"state file '{parsed.state_file}' does not exist: nothing to show")
            return _show(StateFile(parsed.state_file))
        state_file = StateFile(parsed.state_file)
        config = load_checked_config(source, parsed.config, secrets, logger)
        streams = streams_of(source, config)
        destination = spark_destination(source, config, parsed)
        try:
            if parsed.action == "reset":
                return _reset(destination, streams, state_file, parsed)
            return _set(destination, streams, state_file, parsed, secrets)
        finally:
            destination.close()
    except InputError as error:
        return _fail(secrets, error, EXIT_BAD_INPUT)
    except _refusals() as error:
        return _fail(secrets, error, EXIT_FAILED)


def _refusals() -> tuple[type[Exception], ...]:
    """Errors that changed nothing on a table (imported lazily: ``state show`` should not pay for pyarrow)."""
    from source_framework.destinations.spark.cursor_order import TooManyOddValues
    from source_framework.destinations.spark.file_sink_log import DamagedLog
    from source_framework.destinations.spark.table_recovery import InconsistentTable, TableMoved

    return NoTable, TableLocked, UnsafeTableName, TableMoved, InconsistentTable, DamagedLog, TooManyOddValues


def _fail(secrets: SecretFilter, error: Exception, code: int) -> int:
    sys.stderr.write(f"error: {secrets.mask(str(error))}\n")
    return code


def _show(state_file: StateFile) -> int:
    for message in state_file.messages():
        sys.stdout.buffer.write(to_json({"type": "STATE", "state": message}) + b"\n")
    sys.stdout.flush()
    for name, value in sorted(state_file.states.items()):
        sys.stderr.write(f"{name:<20} {state_as_words(value) or to_json(value).decode()[:200]}\n")
    if not state_file.states:
        sys.stderr.write(f"{state_file.path}: no state\n")
    return EXIT_OK


def _no_table(names: list[str], destination: Any) -> NoTable:
    which = ", ".join(f"'{name}'" for name in names)
    return NoTable(
        f"stream(s) {which}: no table under {destination.warehouse}, where read would write it; nothing was changed. "
        f"If the table is elsewhere, pass --warehouse (or the config's destination section); to change only the "
        f"state file, pass --no-table"
    )


def _reset(destination: Any, streams: dict[str, Any], state_file: StateFile, parsed: argparse.Namespace) -> int:
    names: list[str] = [parsed.stream] if parsed.stream else sorted(streams)
    targets = [stream_named(streams, name) for name in names]
    # Look first, lock after: a look in the wrong warehouse leaves nothing there, not even a lock file.
    tables = {} if parsed.no_table else {s.name: destination.has_table(s.namespace, s.name) for s in targets}
    missing = [s.name for s in targets if not parsed.no_table and not tables[s.name] and (parsed.stream or s.name in state_file.states)]
    if missing:
        raise _no_table(missing, destination)
    found = [stream for stream in targets if tables.get(stream.name)]
    for stream in found:
        destination.lock(stream.namespace, stream.name, purpose="state reset")
    for stream in found:
        destination.request_reset(stream.namespace, stream.name)
    fault_point("state.reset.marked")
    for stream in targets:
        state_file.remove(stream.name)
    state_file.save()
    fault_point("state.reset.saved")
    for stream in targets:
        path = destination.table_path(stream.namespace, stream.name)
        if stream not in found:
            logger.info("%s: state forgotten (%s)", stream.name, "--no-table" if parsed.no_table else f"no table at {path}")
        elif parsed.tables:
            destination.delete_table(stream.namespace, stream.name)
            logger.info("%s: state forgotten, table %s deleted", stream.name, path)
        else:
            logger.info("%s: state forgotten; the next sync replaces the table %s", stream.name, path)
    return EXIT_OK


def _set(destination: Any, streams: dict[str, Any], state_file: StateFile, parsed: argparse.Namespace, secrets: SecretFilter) -> int:
    stream = stream_named(streams, parsed.stream)
    field = stream.cursor_field if isinstance(stream.cursor_field, str) else (stream.cursor_field or [None])[0]
    if not field:
        raise InputError(f"stream '{stream.name}' has no cursor")
    current = state_file.states.get(stream.name) or {}
    committed: Any = None
    if not parsed.no_table:
        if not destination.has_table(stream.namespace, stream.name):
            raise _no_table([stream.name], destination)
        destination.lock(stream.namespace, stream.name, purpose="state set")
        newest = destination.committed_table(stream.namespace, stream.name).last_checkpoint()
        committed = newest.state if newest is not None else None
    # A run that died before printing a commit's STATE left the table ahead of the file, maybe with partitions the
    # file lacks: they must start from the cursor too, or the next sync reads their rows again.
    try:
        partitions = _partitions_of(current, committed)
    except (KeyError, TypeError, AttributeError):
        raise InputError(
            f"state file '{state_file.path}': stream '{stream.name}': each entry of its 'states' needs a 'partition' "
            f"object and a 'cursor' object"
        ) from None
    if partitions is not None:
        new_state: dict[str, Any] = {"states": [{"partition": p, "cursor": {field: parsed.cursor}} for p in partitions]}
    elif hasattr(stream, "partitions"):
        raise InputError(f"stream '{stream.name}' is partitioned and neither the state file nor its table has partitions for it yet")
    else:
        new_state = {field: parsed.cursor}
    try:
        stream.state = new_state  # the stream's own check of the value
    except Exception as error:
        raise InputError(f"--cursor {parsed.cursor!r}: {error}") from None
    if parsed.no_table:
        table = "the table left as it is (--no-table)"
    else:
        path = destination.table_path(stream.namespace, stream.name)
        truncated = destination.truncate_from(stream.namespace, stream.name, field, parsed.cursor, new_state, current)
        if truncated is None:
            raise NoTable(f"stream '{stream.name}': its table {path} has no commit yet; nothing was changed")
        commit, where = truncated
        table = f"table {path} rewritten with its {commit.rows} rows before {parsed.cursor}: commit #{commit.seq} ({where})"
        fault_point("state.set.truncated")
    state_file.states[stream.name] = new_state
    state_file.save()
    # Straight to stderr: a log level hiding INFO must not hide what the command did.
    sys.stderr.write(secrets.mask(f"{stream.name}: state set to {to_json(new_state).decode()}; {table}") + "\n")
    sys.stderr.flush()
    return EXIT_OK


def _partitions_of(*states: Any) -> list[dict[str, Any]] | None:
    """The partitions that per-partition states name, each once; None when no state has that shape."""
    found: dict[str, dict[str, Any]] = {}
    per_partition = False
    for state in states:
        entries = state.get("states") if isinstance(state, dict) else None
        if isinstance(entries, list):
            per_partition = True
            for entry in entries:
                found.setdefault(partition_identity(entry["partition"]), dict(entry["partition"]))
    return list(found.values()) if per_partition else None
