"""The table's schema across runs (issue 11, item 8): what a commit records, and how a stream's new
schema compares with the table's. No Spark needed."""

from __future__ import annotations

import pyarrow as pa
import pytest

from source_framework.destinations.spark.arrow_conversion import ENCODING_KEY, JSON_ENCODING, METADATA_COLUMNS, TIMESTAMP, arrow_schema
from source_framework.destinations.spark.table_schema import (
    ADDED,
    INCOMPATIBLE,
    NEW,
    SAME,
    WIDENED,
    IncompatibleSchema,
    compare_schemas,
    schema_from_footer,
    schema_from_json,
    schema_to_json,
)

EVERY_TYPE = {
    "id": {"type": "integer"},
    "score": {"type": "number"},
    "active": {"type": "boolean"},
    "name": {"type": ["null", "string"]},
    "seen": {"type": "string", "format": "date-time"},
    "born": {"type": "string", "format": "date"},
    "tags": {"type": "array"},
}


def schema(**properties) -> pa.Schema:
    return arrow_schema({"properties": properties})


def data_columns(table: pa.Schema) -> list:
    return [(f.name, f.type) for f in table if f.name not in METADATA_COLUMNS]


# -- the schema a commit records ---------------------------------------------------------------------


def test_the_recorded_schema_round_trips_every_column_type_and_the_json_marking():
    stream = arrow_schema({"properties": EVERY_TYPE})
    recorded = schema_to_json(stream)
    assert recorded["columns"][0] == {"name": "id", "type": "int64"}
    assert {"name": "tags", "type": "string", "encoding": "json"} in recorded["columns"]
    assert [c["name"] for c in recorded["columns"]] == stream.names
    back = schema_from_json(recorded)
    assert back.equals(stream, check_metadata=True)
    assert back.field("tags").metadata == {ENCODING_KEY: JSON_ENCODING}


def test_a_recorded_schema_with_a_type_this_version_does_not_know_is_refused_clearly():
    with pytest.raises(ValueError, match="'x'.*'decimal128"):
        schema_from_json({"columns": [{"name": "x", "type": "decimal128(10, 2)"}]})


# -- comparing the table's schema with the stream's new one --------------------------------------------


def test_a_table_without_a_schema_takes_the_streams():
    stream = schema(id={"type": "integer"})
    change = compare_schemas(None, stream)
    assert change.kind == NEW and change.table.equals(stream)


def test_the_same_schema_changes_nothing():
    stream = arrow_schema({"properties": EVERY_TYPE})
    change = compare_schemas(stream, stream)
    assert change.kind == SAME and change.table.equals(stream, check_metadata=True)
    assert (change.added, change.widened, change.kept, change.incompatible) == ((), (), (), ())


def test_added_columns_come_after_the_tables_columns_and_before_the_metadata_columns():
    table = schema(id={"type": "integer"}, name={"type": "string"})
    stream = schema(email={"type": "string"}, id={"type": "integer"}, name={"type": "string"}, age={"type": "integer"})
    change = compare_schemas(table, stream)
    assert change.kind == ADDED and change.added == ("email", "age")
    assert change.table.names == ["id", "name", "email", "age", *METADATA_COLUMNS]
    assert data_columns(change.table)[2:] == [("email", pa.string()), ("age", pa.int64())]


@pytest.mark.parametrize("old, new", [
    ({"type": "integer"}, {"type": "number"}),
    ({"type": "integer"}, {"type": "string"}),
    ({"type": "number"}, {"type": "string"}),
    ({"type": "boolean"}, {"type": "string"}),
    ({"type": "string", "format": "date-time"}, {"type": "string"}),
    ({"type": "string", "format": "date"}, {}),
    ({"type": "integer"}, {"type": ["string", "integer"]}),
])  # fmt: skip
def test_widening_changes_are_applied(old, new):
    change = compare_schemas(schema(id={"type": "integer"}, x=old), schema(id={"type": "integer"}, x=new))
    assert change.kind == WIDENED
    (widening,) = change.widened
    assert widening.column == "x" and widening.new == change.table.field("x").type == schema(x=new).field("x").type
    assert widening.old == schema(x=old).field("x").type


def test_added_and_widened_together_are_a_widening_that_also_adds():
    change = compare_schemas(schema(n={"type": "integer"}), schema(n={"type": "number"}, extra={"type": "string"}))
    assert change.kind == WIDENED and change.added == ("extra",) and change.needs_rewrite
    assert data_columns(change.table) == [("n", pa.float64()), ("extra", pa.string())]


def test_an_object_that_becomes_a_string_keeps_its_column_type_and_takes_the_new_marking():
    change = compare_schemas(schema(o={"type": "object"}), schema(o={"type": "string"}))
    assert change.kind == SAME
    assert change.table.field("o").metadata is None  # new values are stored as plain text, as declared


def test_a_timestamp_column_that_becomes_text_is_marked_so_in_every_later_schema():
    """Its rows from before hold the rewrite's text, which ``already_in_table`` must know to find them again."""
    from source_framework.destinations.spark.table_schema import was_timestamp

    at = {"type": "string", "format": "date-time"}
    change = compare_schemas(schema(at=at), schema(at={"type": "string"}))
    assert change.kind == WIDENED and was_timestamp(change.table.field("at"))
    recorded = schema_to_json(change.table)
    assert {"name": "at", "type": "string", "was": "timestamp"} in recorded["columns"]
    later = compare_schemas(schema_from_json(recorded), schema(at={"type": "string"}))
    assert later.kind == SAME and was_timestamp(later.table.field("at"))  # kept by the next runs
    kept = compare_schemas(schema_from_json(recorded), schema(other={"type": "string"}))
    assert was_timestamp(kept.table.field("at"))  # and while the stream no longer declares it
    as_json = compare_schemas(schema_from_json(recorded), schema(at={"type": "object"}))
    assert was_timestamp(as_json.table.field("at")) and as_json.table.field("at").metadata[ENCODING_KEY] == JSON_ENCODING
    assert not was_timestamp(compare_schemas(schema(n={"type": "integer"}), schema(n={"type": "string"})).table.field("n"))
    assert not was_timestamp(compare_schemas(None, schema(at={"type": "string"})).table.field("at"))  # a new table


@pytest.mark.parametrize("old, new, shown_old, shown_new", [
    ({"type": "string"}, {"type": "integer"}, "string", "bigint"),
    ({"type": "number"}, {"type": "integer"}, "double", "bigint"),
    ({"type": "boolean"}, {"type": "integer"}, "boolean", "bigint"),
    ({"type": "string", "format": "date"}, {"type": "string", "format": "date-time"}, "date", "timestamp"),
    ({"type": "string", "format": "date-time"}, {"type": "boolean"}, "timestamp", "boolean"),
])  # fmt: skip
def test_changes_the_tables_rows_cannot_follow_are_incompatible(old, new, shown_old, shown_new):
    change = compare_schemas(schema(id={"type": "integer"}, x=old), schema(id={"type": "integer"}, x=new))
    assert change.kind == INCOMPATIBLE
    (problem,) = change.incompatible
    assert problem.column == "x" and f"'x' is {shown_old} in the table" in str(problem) and shown_new in str(problem)


def test_a_column_the_stream_no_longer_declares_stays_in_the_table():
    table = schema(id={"type": "integer"}, gone={"type": "object"}, name={"type": "string"})
    change = compare_schemas(table, schema(id={"type": "integer"}, name={"type": "string"}))
    assert change.kind == SAME and change.kept == ("gone",)
    assert change.table.names == table.names
    assert change.table.field("gone").metadata == {ENCODING_KEY: JSON_ENCODING}  # still written as JSON text


def test_the_metadata_columns_of_a_table_are_not_compared():
    """A table committed before schemas were recorded: its schema is read from a file footer, where
    Spark's own types (no JSON marking) stand for every column, the metadata ones too."""
    footer = pa.schema([("id", pa.int64()), ("_sf_extracted_at", pa.timestamp("us", tz="UTC")), ("_sf_meta", pa.string())])
    change = compare_schemas(footer, schema(id={"type": "integer"}))
    assert change.kind == SAME and change.table.names == ["id", *METADATA_COLUMNS]
    assert change.table.field("_sf_extracted_at").type == TIMESTAMP


def test_a_footers_timestamp_of_another_unit_or_zone_is_sparks_one_timestamp_type():
    footer = pa.schema([("seen", pa.timestamp("ns")), ("born", pa.date32()), ("n", pa.int64())])
    recorded = schema_from_footer(footer)
    assert [column.type for column in recorded] == [TIMESTAMP, pa.date32(), pa.int64()]
    stream = schema(seen={"type": "string", "format": "date-time"}, born={"type": "string", "format": "date"}, n={"type": "integer"})
    assert compare_schemas(recorded, stream).kind == SAME


def test_the_incompatible_error_names_columns_types_and_the_way_to_rebuild():
    change = compare_schemas(schema(a={"type": "string"}, b={"type": "number"}), schema(a={"type": "integer"}, b={"type": "boolean"}))
    error = IncompatibleSchema("users", "/w/demo/users", change)
    message = str(error)
    assert "'a' is string in the table" in message and "'b' is double in the table" in message
    assert "bigint" in message and "boolean" in message and "/w/demo/users" in message and "nothing was written" in message
    assert "python main.py state reset --stream users --tables --state-file" in message
    assert error.failure_type.value == "config_error"


# -- column names that differ only by case (issue 49, item 10) ----------------------------------------------


@pytest.mark.parametrize("properties, clash", [
    ({"Name": {"type": "string"}, "name": {"type": "string"}}, "'Name' and 'name'"),
    ({"id": {"type": "integer"}, "_SF_META": {"type": "string"}}, "'_SF_META' and '_sf_meta'"),
    ({"a": {}, "A": {}, "b": {}, "B": {"type": "integer"}}, "'a' and 'A'"),
])
def test_property_names_that_differ_only_by_case_are_refused(properties, clash):
    """Spark's and Delta's column names are case-insensitive: a table with both cannot be read
    (``COLUMN_ALREADY_EXISTS``), so the stream's schema is refused before anything is written."""
    with pytest.raises(ValueError, match=f"{clash}.*differ only by case"):
        arrow_schema({"properties": properties})


def test_a_column_added_with_the_case_of_a_table_column_is_incompatible():
    table = schema(id={"type": "integer"}, name={"type": "string"})
    change = compare_schemas(table, schema(id={"type": "integer"}, NAME={"type": "string"}))
    assert change.kind == INCOMPATIBLE
    (problem,) = change.incompatible
    assert "'NAME'" in str(problem) and "'name'" in str(problem) and "only by case" in str(problem)
    message = str(IncompatibleSchema("users", "/w/demo/users", change))
    assert "nothing was written" in message and "only by case" in message
