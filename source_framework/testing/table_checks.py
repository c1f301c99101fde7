"""Each Spark table holds exactly the records the source produced, and a rerun adds no rows, compared via the JSON schema."""

from __future__ import annotations

import datetime as dt
import json
from collections import Counter
from collections.abc import Callable, Collection, Mapping, Sequence
from typing import Any

from source_framework.testing.catalogs import StreamInfo
from source_framework.testing.connector_runs import ReadOutput
from source_framework.testing.cursors import parse_instant

MAX_EXAMPLES = 3
_EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)
_MICROSECOND = dt.timedelta(microseconds=1)

Row = tuple[tuple[str, Any], ...]


def _column_kind(spec: Mapping[str, Any]) -> str:
    declared = spec.get("type")
    types = [declared] if isinstance(declared, str) else list(declared or [])
    non_null = [t for t in dict.fromkeys(types) if t != "null"]
    if len(non_null) != 1:
        return "text"
    kind = non_null[0]
    if kind == "string":
        return {"date-time": "timestamp", "date": "date"}.get(str(spec.get("format")), "string")
    return {"integer": "int", "number": "float", "boolean": "bool"}.get(kind, "json")


def _canonical_json(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def _instant_micros(value: Any) -> int | None:
    if isinstance(value, dt.datetime):
        aware = value.astimezone(dt.UTC)  # a naive value from collect() is local time
        return (aware - _EPOCH) // _MICROSECOND
    parsed = parse_instant(value) if isinstance(value, str) else None
    return None if parsed is None else (parsed - _EPOCH) // _MICROSECOND


def _record_value(kind: str, value: Any) -> Any:
    if value is None:
        return None
    if kind == "timestamp":
        return _instant_micros(value)
    if kind == "date":
        if not isinstance(value, str):
            return None
        try:
            return dt.date.fromisoformat(value.strip()[:10])
        except ValueError:
            return None
    if kind == "int":
        if isinstance(value, bool):
            return None
        if isinstance(value, int):
            return value
        if isinstance(value, float):
            return int(value) if value.is_integer() else None
        if isinstance(value, str):
            try:
                return int(value.strip())
            except ValueError:
                return None
        return None
    if kind == "float":
        if isinstance(value, bool) or not isinstance(value, (int, float, str)):
            return None
        try:
            return float(value)
        except ValueError:
            return None
    if kind == "bool":
        return value if isinstance(value, bool) else {"true": True, "false": False}.get(value)
    if kind == "json" or not isinstance(value, str):
        return _canonical_json(value)
    return _object_text(value)


def _table_value(kind: str, value: Any) -> Any:
    if value is None:
        return None
    if kind == "timestamp":
        return _instant_micros(value)
    if kind == "float":
        return float(value)
    if kind == "json":
        return _canonical_json(json.loads(value))
    if kind in ("string", "text"):
        return _object_text(value)
    return value


def _object_text(text: str) -> str:
    """Text holding a JSON object or list, canonical; other text as it is."""
    try:
        parsed = json.loads(text)
    except ValueError:
        return text
    return _canonical_json(parsed) if isinstance(parsed, (dict, list)) else text


def _row(columns: list[tuple[str, str]], get: Callable[[str], Any], convert: Callable[[str, Any], Any]) -> Row:
    return tuple((name, convert(kind, get(name))) for name, kind in columns)


def _columns(stream: StreamInfo) -> list[tuple[str, str]]:
    properties = stream.json_schema.get("properties") or {}
    return sorted((name, _column_kind(spec or {})) for name, spec in properties.items())


def record_rows(records: Sequence[Mapping[str, Any]], stream: StreamInfo) -> Counter:
    columns = _columns(stream)
    return Counter(_row(columns, record.get, _record_value) for record in records)


def read_tables(spark: Any, destination: Any, streams: Mapping[str, StreamInfo]) -> dict[str, Counter | None]:
    """Each stream's table as Spark reads it, as a multiset of comparable rows (None when the stream's table has no commit)."""
    tables: dict[str, Counter | None] = {}
    for name, stream in streams.items():
        table = destination.committed_table(stream.namespace, stream.name, spark)
        if table.last_checkpoint() is None:
            tables[name] = None
            continue
        frame = table.read()
        columns = [column for column, _ in _columns(stream)]
        present = set(frame.columns)
        rows = [row.asDict() for row in frame.select(*[c for c in columns if c in present]).collect()]
        tables[name] = table_rows(table.path, present, rows, stream)
    return tables


def table_rows(path: str, present: Collection[str], rows: Sequence[Mapping[str, Any]], stream: StreamInfo) -> Counter:
    """A table's rows (by column, as Spark's ``collect()`` or Arrow's ``to_pylist()`` gives them) as comparable rows;
    ``present``: the table's columns, which must hold every column the stream's schema declares."""
    columns = _columns(stream)
    absent = [column for column, _ in columns if column not in present]
    if absent:
        raise AssertionError(f"table {path} has no column(s) {absent} although the schema declares them")
    if not columns:  # a schema that declares no column: a row is its count
        return Counter({(): len(rows)}) if rows else Counter()
    return Counter(_row(columns, row.get, _table_value) for row in rows)


def _examples(rows: Counter) -> str:
    return "; ".join(json.dumps(dict(row), default=str)[:240] for row in list(rows.elements())[:MAX_EXAMPLES])


def check_tables_equal_records(
    tables: Mapping[str, Counter | None], reference: ReadOutput, streams: Mapping[str, StreamInfo]
) -> None:
    problems = []
    for name, stream in streams.items():
        expected = record_rows(reference.records(name), stream)
        table = tables.get(name)
        if table is None:
            if sum(expected.values()):
                problems.append(f"stream '{name}': no table, but the source produced {sum(expected.values())} records")
            continue
        if table != expected:
            missing, extra = expected - table, table - expected
            problems.append(
                f"stream '{name}': table has {sum(table.values())} rows, the source produced "
                f"{sum(expected.values())} records; {sum(missing.values())} records not in the table "
                f"(e.g. {_examples(missing)}), {sum(extra.values())} rows the source did not produce "
                f"(e.g. {_examples(extra)})"
            )
    assert not problems, "Spark tables vs the records the source produced:\n" + "\n".join(problems)


def check_rerun_adds_no_rows(before: Mapping[str, Counter | None], after: Mapping[str, Counter | None]) -> None:
    problems = []
    for name in before:
        old, new = before[name] or Counter(), after.get(name) or Counter()
        if old != new:
            problems.append(
                f"stream '{name}': {sum(old.values())} rows before the rerun, {sum(new.values())} after; "
                f"added {sum((new - old).values())} (e.g. {_examples(new - old)}), "
                f"lost {sum((old - new).values())} (e.g. {_examples(old - new)})"
            )
    assert not problems, "a rerun from the final state changed the tables:\n" + "\n".join(problems)
