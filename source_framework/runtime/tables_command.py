"""``main.py tables``: each stream's table as it is now (rows, last commit, its state, schema, misfits), without a JVM.

The tables are read through their own logs with pure file reads: nothing is locked or changed, so it can look at a
table a sync is writing, and pyspark is never imported.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
from typing import Any

from source_framework.runtime.inputs import InputError, load_checked_config, stream_named, streams_of
from source_framework.runtime.process import EXIT_BAD_INPUT, EXIT_FAILED, EXIT_OK
from source_framework.runtime.secrets import SecretFilter
from source_framework.runtime.summary import state_as_words

logger = logging.getLogger("source_framework.tables")

#: a state longer than this (compact JSON) is cut in the text view; ``--json`` has it whole
STATE_SHOWN = 300
#: ``tables show``: a value longer than this is cut in the text view
VALUE_SHOWN = 40


def add_tables_command(commands: Any) -> argparse.ArgumentParser:
    tables = commands.add_parser("tables", help="show each stream's table: rows, last commit, its state, schema (no JVM)")
    tables.add_argument("--config", required=True, help="the connector config (where the tables are)")
    tables.add_argument("--warehouse", help="folder of the Spark tables (default: the config's destination.warehouse, else ./warehouse)")
    tables.add_argument("--stream", help="only this stream's table (default: every stream's)")
    tables.add_argument("--json", action="store_true", help="one JSON document instead of text (show: one JSON line per row)")
    tables.add_argument("what", nargs="*", metavar="show STREAM", help="print the first rows of this stream's table")
    tables.add_argument("--limit", type=int, default=10, help="show: how many rows (default 10)")
    return tables


def run_tables(source: Any, parsed: argparse.Namespace, spark_destination: Any) -> int:
    """Show the tables; exit 0, 1 when a table could not be read (the others are still shown), 2 on bad input."""
    secrets = SecretFilter(())
    try:
        config = load_checked_config(source, parsed.config, secrets, logger)
        streams = streams_of(source, config)
        shown_stream = _shown_stream(parsed)
        if shown_stream is not None:
            parsed.stream = shown_stream
        if parsed.stream:
            streams = {parsed.stream: stream_named(streams, parsed.stream)}
        destination = spark_destination(source, config, parsed)
    except InputError as error:
        sys.stderr.write(f"error: {secrets.mask(str(error))}\n")
        return EXIT_BAD_INPUT
    if shown_stream is not None:
        try:
            return _show_rows(destination, streams[shown_stream], parsed, secrets)
        finally:
            destination.close()
    try:
        found = [describe(destination, stream.namespace, stream.name) for stream in streams.values()]
    finally:
        destination.close()
    document = {"warehouse": destination.warehouse, "source": destination.default_namespace, "tables": found}
    text = json.dumps(document, indent=2, ensure_ascii=False, default=str) + "\n" if parsed.json else as_text(document)
    sys.stdout.write(secrets.mask(text))
    sys.stdout.flush()
    return EXIT_FAILED if any("error" in table for table in found) else EXIT_OK


def _shown_stream(parsed: argparse.Namespace) -> str | None:
    if not parsed.what:
        return None
    if parsed.what[0] != "show" or len(parsed.what) != 2:
        raise InputError(f"tables takes 'show STREAM' or nothing before its flags, got '{' '.join(parsed.what)}'")
    if parsed.stream and parsed.stream != parsed.what[1]:
        raise InputError(f"--stream {parsed.stream} and 'show {parsed.what[1]}' name different streams")
    if parsed.limit < 1:
        raise InputError(f"--limit must be 1 or more, got {parsed.limit}")
    return str(parsed.what[1])


def _show_rows(destination: Any, stream: Any, parsed: argparse.Namespace, secrets: SecretFilter) -> int:
    namespace = stream.namespace
    if not destination.has_table(namespace, stream.name):
        sys.stderr.write(f"error: {stream.name}: no table (read would write it at {destination.table_path(namespace, stream.name)})\n")
        return EXIT_FAILED
    try:
        dataset = _dataset(destination.committed_table(namespace, stream.name))
        rows, total = dataset.head(parsed.limit), dataset.count_rows()
    except Exception as error:
        sys.stderr.write(secrets.mask(f"error: {stream.name}: cannot be read: {type(error).__name__}: {error}") + "\n")
        return EXIT_FAILED
    if parsed.json:
        text = "".join(json.dumps(row, ensure_ascii=False, default=str) + "\n" for row in rows.to_pylist())
    else:
        text = _rows_as_text(rows) + f"({rows.num_rows} of {total} rows)\n"
    sys.stdout.write(secrets.mask(text))
    sys.stdout.flush()
    return EXIT_OK


def _rows_as_text(rows: Any) -> str:
    def cell(value: Any) -> str:
        text = "null" if value is None else value if isinstance(value, str) else json.dumps(value, default=str)
        text = " ".join(text.split())
        return text if len(text) <= VALUE_SHOWN else text[: VALUE_SHOWN - 3] + "..."

    columns = [[name, *(cell(value) for value in rows.column(name).to_pylist())] for name in rows.column_names]
    widths = [max(len(value) for value in column) for column in columns]
    lines = ["  ".join(column[line].ljust(width) for column, width in zip(columns, widths, strict=True)).rstrip()
             for line in range(rows.num_rows + 1)]
    return "\n".join(lines) + "\n"


def _dataset(table: Any) -> Any:
    import pyarrow as pa
    import pyarrow.dataset as ds
    import pyarrow.parquet as pq

    from source_framework.destinations.spark.delta_table import DeltaLakeTable, is_delta_table

    if isinstance(table, DeltaLakeTable):
        from deltalake import DeltaTable

        if not is_delta_table(table.path):  # a folder whose first commit did not happen yet: no Delta log
            return ds.dataset([], schema=pa.schema([]), format="parquet")
        return DeltaTable(table.path).to_pyarrow_dataset()
    files = _parquet_files(table)
    if not files:
        schema = table.recorded_schema()
        return ds.dataset([], schema=schema, format="parquet")
    return ds.dataset(files, schema=pq.read_schema(files[-1]), format="parquet")


def misfits(dataset: Any) -> tuple[dict[str, tuple[int, str]], dict[str, int]]:
    """Per field, from the rows' ``_sf_meta``: the values stored as null (count, first reason) and undeclared fields."""
    import pyarrow.compute as pc

    from source_framework.destinations.spark.arrow_conversion import META

    mismatched: dict[str, tuple[int, str]] = {}
    undeclared: dict[str, int] = {}
    if META not in dataset.schema.names:
        return mismatched, undeclared
    for batch in dataset.to_batches(columns=[META], filter=pc.field(META).is_valid()):
        for text in batch.column(0).to_pylist():
            meta = json.loads(text)
            for error in meta.get("errors", ()):
                count, reason = mismatched.get(error["field"], (0, error.get("reason", "")))
                mismatched[error["field"]] = (count + 1, reason)
            for name in meta.get("undeclared", ()):
                undeclared[name] = undeclared.get(name, 0) + 1
    return mismatched, undeclared


def describe(destination: Any, namespace: str | None, stream: str) -> dict[str, Any]:
    """One stream's table as the JSON document shows it; ``error`` where it cannot be read."""
    from source_framework.destinations.spark.delta_table import DeltaLakeTable

    entry: dict[str, Any] = {"stream": stream, "namespace": namespace or destination.default_namespace}
    try:
        entry["path"] = destination.table_path(namespace, stream)
        entry["exists"] = destination.has_table(namespace, stream)
        if not entry["exists"]:
            return entry
        table = destination.committed_table(namespace, stream)  # Spark only for .read(), never called here
        delta = isinstance(table, DeltaLakeTable)
        entry["format"] = "delta" if delta else "parquet"
        last = table.last_checkpoint()
        dataset = _dataset(table)
        entry["rows"] = int(dataset.count_rows())
        added = _delta_added_rows(table.path, last) if delta else last and last.rows
        entry["last_commit"] = None if last is None else {
            "seq": last.seq,
            "committed_at": last.committed_at,
            "delta_version" if delta else "log_batch": last.batch_id,
            "rows": added,
            "replace": last.replace,
        }
        entry["state"] = last.state if last is not None else None
        entry["pending_reset"] = table.pending_reset() is not None
        schema = table.recorded_schema()
        entry["schema"] = [{"name": column.name, "type": _type_of(column)} for column in schema] if schema is not None else []
        mismatched, undeclared = misfits(dataset)
        entry["values_stored_as_null"] = {name: {"values": count, "first_reason": reason}
                                          for name, (count, reason) in sorted(mismatched.items())}
        entry["undeclared_fields"] = dict(sorted(undeclared.items()))
    except Exception as error:  # a damaged or unreadable table: said in its entry, the others still shown
        entry["error"] = f"{type(error).__name__}: {' '.join(str(error).split())}"
    return entry


def _delta_added_rows(path: str, last: Any) -> int | None:
    from deltalake import DeltaTable

    from source_framework.destinations.spark.delta_log import added_rows

    if last is None:
        return None
    delta = DeltaTable(path)
    for limit in (20, None):  # the last commit of ours is mostly among the newest
        for info in delta.history(limit):
            if info.get("version") == last.batch_id:
                return added_rows(info)
    return None


def _parquet_files(table: Any) -> list[str]:
    """The local paths of the files the folder's log lists, looked for in the table's folder if the warehouse moved."""
    from source_framework.destinations.checkpoint_record import file_name
    from source_framework.destinations.spark.file_sink_log import local_path

    paths = [(uri, local_path(uri)) for uri in table.live_files()]
    return [path if os.path.exists(path) else os.path.join(table.path, file_name(uri)) for uri, path in paths]


def _type_of(column: Any) -> str:
    from source_framework.destinations.spark.table_schema import is_json_text, spark_type_name

    return spark_type_name(column.type) + (" (JSON text)" if is_json_text(column) else "")


def as_text(document: dict[str, Any]) -> str:
    lines = [f"warehouse {document['warehouse']} (source {document['source']})", ""]
    for table in document["tables"]:
        name = table["stream"] if table["namespace"] == document["source"] else f"{table['namespace']}/{table['stream']}"
        if "error" in table and "format" not in table:
            lines += [f"{name}: cannot be looked at: {table['error']}", ""]
            continue
        if not table["exists"]:
            lines += [f"{name}: no table (read would write it at {table['path']})", ""]
            continue
        kind = "Delta table" if table["format"] == "delta" else "Parquet folder (Spark file sink)"
        lines.append(f"{name}: {kind} {table['path']}")
        if "error" in table:
            lines += [f"  {'error':<13}{table['error']}", ""]
            continue
        lines.append(f"  {'rows':<13}{table['rows']}")
        lines += _commit_lines(table)
        columns = table["schema"]
        if columns:
            lines.append(f"  {'schema':<13}{len(columns)} columns")
        width = max((len(column["name"]) for column in columns), default=0) + 2
        lines += [f"    {column['name']:<{width}}{column['type']}" for column in columns]
        lines += _misfit_lines(table)
        lines.append("")
    return "\n".join(lines)


def _misfit_lines(table: dict[str, Any]) -> list[str]:
    lines = [f"{name}: {found['values']} values stored as null ({found['first_reason']})" if found["first_reason"]
             else f"{name}: {found['values']} values stored as null" for name, found in table["values_stored_as_null"].items()]
    lines += [f"{name}: in {count} rows, not in the schema (no column)" for name, count in table["undeclared_fields"].items()]
    if not lines:
        return []
    return [f"  {'misfits':<13}{lines[0]}", *(f"  {'':<13}{line}" for line in lines[1:]), f"  {'':<13}(each row's _sf_meta names them)"]


def _commit_lines(table: dict[str, Any]) -> list[str]:
    commit = table["last_commit"]
    if commit is None:
        return [f"  {'last commit':<13}none yet (no sync has committed to it)"]
    where = f"Delta version {commit['delta_version']}" if "delta_version" in commit else f"log batch {commit['log_batch']}"
    written = "? rows" if commit["rows"] is None else f"{commit['rows']} rows"
    added = f"{written}, replacing the table's rows" if commit["replace"] else f"{written} added"
    state = state_as_words(table["state"]) or json.dumps(table["state"], ensure_ascii=False, separators=(",", ":"), default=str)
    if len(state) > STATE_SHOWN:
        state = f"{state[:STATE_SHOWN]}... ({len(state)} characters; --json shows it whole)"
    lines = [f"  {'last commit':<13}#{commit['seq']} at {commit['committed_at']} ({where}): {added}", f"  {'state':<13}{state}"]
    if table["pending_reset"]:
        lines.append(f"  {'reset':<13}pending: the stream's next sync from an empty state replaces this table")
    return lines
