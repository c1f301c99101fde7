"""A table's schema across runs: what each commit records, and what a stream's new schema may change.

New columns are added (null in earlier rows), ``bigint -> double`` and any type -> ``string`` widen (the table is rewritten
once: Spark fails on files whose column types differ), undeclared columns are kept, and anything else is refused before
anything is written (``integration_tests/test_schema_evolution.py`` checks every case)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
from airbyte_cdk.models import FailureType

from source_framework.destinations.spark.arrow_conversion import ENCODING_KEY, JSON_ENCODING, METADATA_COLUMNS, TIMESTAMP

SCHEMA_FORMAT = 1

#: Field metadata of a text column that was a timestamp column (``TableWriter.already_in_table`` looks for the rewrite's text).
WAS_KEY = b"source_framework.was"
WAS_TIMESTAMP = b"timestamp"

NEW, SAME, ADDED, WIDENED, INCOMPATIBLE = "new", "same", "added", "widened", "incompatible"

_TYPES: dict[str, pa.DataType] = {
    str(arrow_type): arrow_type for arrow_type in (pa.int64(), pa.float64(), pa.bool_(), pa.string(), TIMESTAMP, pa.date32())
}

_SPARK_NAMES = {"int64": "bigint", "double": "double", "bool": "boolean", "string": "string",
                str(TIMESTAMP): "timestamp", "date32[day]": "date"}  # fmt: skip


def schema_to_json(schema: pa.Schema) -> dict[str, Any]:
    """Every column in order, metadata columns included, with its type name and ``encoding``/``was`` markings."""
    return {"format": SCHEMA_FORMAT, "columns": [_column_to_json(column) for column in schema]}


def _column_to_json(column: pa.Field) -> dict[str, Any]:
    entry = {"name": column.name, "type": str(column.type)}
    if is_json_text(column):
        entry["encoding"] = JSON_ENCODING.decode()
    if was_timestamp(column):
        entry["was"] = WAS_TIMESTAMP.decode()
    return entry


def schema_from_json(recorded: Mapping[str, Any]) -> pa.Schema:
    return pa.schema([_column_from_json(column) for column in recorded.get("columns") or ()])


def _column_from_json(column: Mapping[str, Any]) -> pa.Field:
    name, type_name = column["name"], column["type"]
    if type_name not in _TYPES:
        raise ValueError(f"the table's recorded schema gives column {name!r} the type {type_name!r}, which this version does not write")
    metadata = {ENCODING_KEY: JSON_ENCODING} if column.get("encoding") == JSON_ENCODING.decode() else {}
    if column.get("was") == WAS_TIMESTAMP.decode():
        metadata[WAS_KEY] = WAS_TIMESTAMP
    return pa.field(name, _TYPES[type_name], metadata=metadata or None)


def schema_from_footer(footer: pa.Schema) -> pa.Schema:
    """A table's schema from a Parquet footer (a table whose commits recorded none), its timestamps as Spark's one type."""
    return pa.schema([pa.field(column.name, TIMESTAMP) if pa.types.is_timestamp(column.type) else column for column in footer])


def was_timestamp(column: pa.Field) -> bool:
    return (column.metadata or {}).get(WAS_KEY) == WAS_TIMESTAMP


def _marked(column: pa.Field, was: pa.Field) -> pa.Field:
    widened_now = pa.types.is_timestamp(was.type) and column.type == pa.string()
    if widened_now or (was_timestamp(was) and column.type == was.type):
        return column.with_metadata({**(column.metadata or {}), WAS_KEY: WAS_TIMESTAMP})
    return column


def is_json_text(column: pa.Field) -> bool:
    return (column.metadata or {}).get(ENCODING_KEY) == JSON_ENCODING


def spark_type_name(arrow_type: pa.DataType) -> str:
    return _SPARK_NAMES.get(str(arrow_type), str(arrow_type))


@dataclass(frozen=True)
class Widening:
    """A column whose type becomes wider; the table's rows are cast."""

    column: str
    old: pa.DataType
    new: pa.DataType

    def __str__(self) -> str:
        return f"'{self.column}' {spark_type_name(self.old)} -> {spark_type_name(self.new)}"


@dataclass(frozen=True)
class Incompatibility:
    """A column whose new type the table's rows cannot take without loss."""

    column: str
    old: pa.DataType
    new: pa.DataType

    def __str__(self) -> str:
        return (
            f"column '{self.column}' is {spark_type_name(self.old)} in the table and {spark_type_name(self.new)} "
            f"in the stream's schema now"
        )


@dataclass(frozen=True)
class CaseClash:
    """A new column whose name differs only by case from a table column: Spark and Delta take them for the same name."""

    column: str
    table_column: str

    def __str__(self) -> str:
        return (f"the stream's schema adds column '{self.column}', which differs only by case from the table's column "
                f"'{self.table_column}' (column names are case-insensitive in Spark and Delta)")


@dataclass(frozen=True)
class SchemaChange:
    """What a run does to its table's schema (see the module docstring)."""

    #: the schema the run writes: the table's columns, widened or kept, then the added ones, then the metadata columns
    table: pa.Schema
    added: tuple[str, ...] = ()
    widened: tuple[Widening, ...] = ()
    kept: tuple[str, ...] = ()
    incompatible: tuple[Incompatibility | CaseClash, ...] = ()
    #: the table had no schema (a new table, or one this run replaces)
    new_table: bool = False

    @property
    def kind(self) -> str:
        if self.new_table:
            return NEW
        if self.incompatible:
            return INCOMPATIBLE
        if self.widened:
            return WIDENED
        return ADDED if self.added else SAME

    @property
    def needs_rewrite(self) -> bool:
        """Files of the old and the new schema cannot be read together: the rows are rewritten."""
        return bool(self.widened) and not self.incompatible


def compare_schemas(recorded: pa.Schema | None, stream: pa.Schema) -> SchemaChange:
    """How the table's schema (``recorded``; None when it has none) takes the stream's; metadata columns are never compared."""
    if recorded is None:
        return SchemaChange(table=stream, new_table=True)
    declared = {column.name: column for column in _data_columns(stream)}
    columns: list[pa.Field] = []
    widened: list[Widening] = []
    kept: list[str] = []
    incompatible: list[Incompatibility | CaseClash] = []
    for old in _data_columns(recorded):
        new = declared.get(old.name)
        if new is None:
            kept.append(old.name)
            columns.append(old)
        elif new.type == old.type:
            columns.append(_marked(new, old))
        elif is_widening(old.type, new.type):
            widened.append(Widening(old.name, old.type, new.type))
            columns.append(_marked(new, old))
        else:
            incompatible.append(Incompatibility(old.name, old.type, new.type))
            columns.append(old)
    added = [column for name, column in declared.items() if name not in recorded.names]
    by_case = {name.casefold(): name for name in recorded.names}
    incompatible += [CaseClash(column.name, by_case[column.name.casefold()]) for column in added
                     if column.name.casefold() in by_case]
    metadata = [column for column in stream if column.name in METADATA_COLUMNS]
    return SchemaChange(
        table=pa.schema(columns + added + metadata),
        added=tuple(column.name for column in added),
        widened=tuple(widened),
        kept=tuple(kept),
        incompatible=tuple(incompatible),
    )


def is_widening(old: pa.DataType, new: pa.DataType) -> bool:
    """Every old value has a value of the new type."""
    return (old == pa.int64() and new == pa.float64()) or (new == pa.string() and old != pa.string())


def _data_columns(schema: pa.Schema) -> list[pa.Field]:
    return [column for column in schema if column.name not in METADATA_COLUMNS]


class IncompatibleSchema(Exception):
    """The stream's schema changed in a way its table cannot take; nothing was written (a config error: a retry fails again)."""

    failure_type = FailureType.config_error

    def __init__(self, stream: str, table_path: str, change: SchemaChange) -> None:
        self.stream, self.table_path, self.change = stream, table_path, change
        super().__init__(self._message())

    def _message(self) -> str:
        problems = "; ".join(str(problem) for problem in self.change.incompatible)
        return (
            f"the schema of stream '{self.stream}' changed in a way its table {self.table_path} cannot take, so "
            f"nothing was written: {problems}. In place, only bigint -> double, any type -> string and new columns "
            f"are applied. To rebuild the table with the new schema (its records are read again from the source): "
            f"python main.py state reset --stream {self.stream} --tables --state-file <your state file> "
            f"--config <your config>, then sync again"
        )
