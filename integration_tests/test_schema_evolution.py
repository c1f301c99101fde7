"""Schemas that change between syncs, and append_dedup's keys (issue 11, items 8, 16 and 17).

One source with one small stream per case is synced twice in this process (on the test run's one
Spark session): the first sync with each stream's first schema, the second with its changed one.
Every table is then read once by a separate Spark application (conftest's ``new_application``:
plain ``spark.read.parquet``, or Spark with Delta's jars for a Delta table, default options), which
is what a user's reader sees. A stream whose
change the table cannot take fails alone: the other streams of the same sync complete.
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Iterable, Mapping
from typing import Any

import pytest
from airbyte_cdk.models import ConnectorSpecification, SyncMode
from airbyte_cdk.sources import AbstractSource
from airbyte_cdk.sources.streams import Stream

from source_framework.destinations.base import StreamTarget
from source_framework.destinations.spark.arrow_conversion import arrow_schema, records_to_arrow
from source_framework.destinations.spark.destination import SparkDestination
from source_framework.destinations.spark.layout import table_path
from source_framework.destinations.spark.table import SparkTable
from source_framework.testing import read

pytestmark = pytest.mark.slow  # two syncs per table format and a separate Spark application: the quick tier (-m "not slow") leaves it out

INTEGER, NUMBER, STRING, BOOLEAN = {"type": "integer"}, {"type": "number"}, {"type": ["null", "string"]}, {"type": "boolean"}
DATE_TIME, OBJECT = {"type": "string", "format": "date-time"}, {"type": "object"}

#: stream -> (primary key or None, destination sync mode, first sync's (properties, records), second sync's);
#: a stream without a first sync's entry gets its table from ``legacy_table`` instead
CASES: dict[str, Any] = {
    "append_added": (None, "append",
                     ({"id": INTEGER, "name": STRING}, [{"id": 1, "name": "a", "score": 0.5, "note": "n"}]),
                     ({"id": INTEGER, "name": STRING, "score": NUMBER},
                      [{"id": 2, "name": "b", "score": 2.5}, {"id": 3, "name": "\ud800 lone", "score": None}])),
    "append_widened": (None, "append",
                       ({"id": INTEGER, "amount": INTEGER, "flag": BOOLEAN, "seen": DATE_TIME, "code": INTEGER},
                        [{"id": 1, "amount": 10, "flag": True, "seen": "2024-01-01T10:00:00+02:00", "code": 7}]),
                       ({"id": INTEGER, "amount": NUMBER, "flag": STRING, "seen": STRING, "code": STRING},
                        [{"id": 2, "amount": 2.5, "flag": "maybe", "seen": "yesterday", "code": "A7"}])),
    "append_incompatible": (None, "append",
                            ({"id": INTEGER, "amount": STRING}, [{"id": 1, "amount": "ten"}]),
                            ({"id": INTEGER, "amount": INTEGER}, [{"id": 2, "amount": 2}])),
    "dedup_added": ([["id"]], "append_dedup",
                    ({"id": INTEGER, "name": STRING}, [{"id": 1, "name": "a"}, {"id": 2, "name": "b"}]),
                    ({"id": INTEGER, "name": STRING, "score": NUMBER},
                     [{"id": 2, "name": "b2", "score": 9.5}, {"id": 3, "name": "c", "score": 1.0}])),
    "dedup_widened": ([["id"]], "append_dedup",
                      ({"id": INTEGER, "amount": INTEGER}, [{"id": 1, "amount": 10}, {"id": 2, "amount": 20}]),
                      ({"id": INTEGER, "amount": NUMBER}, [{"id": 2, "amount": 2.5}])),
    "dedup_incompatible": ([["id"]], "append_dedup",
                           ({"id": INTEGER, "flag": BOOLEAN}, [{"id": 1, "flag": True}]),
                           ({"id": INTEGER, "flag": INTEGER}, [{"id": 1, "flag": 5}])),
    "null_keys": ([["id"]], "append_dedup",
                  ({"id": INTEGER, "v": INTEGER}, [{"id": None, "v": 1}, {"id": None, "v": 2}, {"id": 1, "v": 3}]),
                  ({"id": INTEGER, "v": INTEGER}, [{"id": None, "v": 4}, {"id": 1, "v": 5}])),
    "nested_keys": ([["user", "id"]], "append_dedup",
                    ({"user": OBJECT, "v": INTEGER}, [{"user": {"id": 1, "name": "x"}, "v": 1}, {"user": {"id": 2}, "v": 2}]),
                    ({"user": OBJECT, "v": INTEGER}, [{"user": {"id": 1}, "v": 3}, {"user": {"name": "no id"}, "v": 4}])),
    "dotted_keys": ([["a.b"]], "append_dedup",
                    ({"a.b": INTEGER, "v": INTEGER}, [{"a.b": 1, "v": 1}, {"a.b": 2, "v": 2}]),
                    ({"a.b": INTEGER, "v": INTEGER}, [{"a.b": 1, "v": 3}])),
    "legacy_changed": (None, "append", None,
                       ({"id": INTEGER, "seen": DATE_TIME, "n": NUMBER, "name": STRING}, [{"id": 2, "n": 0.5, "name": "b"}])),
}
LEGACY = ({"id": INTEGER, "seen": DATE_TIME, "n": INTEGER}, [{"id": 1, "seen": "2024-01-01T00:00:00Z", "n": 7}])
FAILING = {"append_incompatible", "dedup_incompatible"}



class Rows(Stream):
    """A full-refresh stream of given records under a given schema."""

    def __init__(self, name: str, primary_key: list[list[str]] | None, properties: Mapping[str, Any], records: list[dict]):
        self._name, self._primary_key, self._properties, self._records = name, primary_key, properties, records

    @property
    def name(self) -> str:
        return self._name

    @property
    def primary_key(self) -> list[list[str]] | None:
        return self._primary_key

    def get_json_schema(self) -> Mapping[str, Any]:
        return {"type": "object", "properties": dict(self._properties)}

    def read_records(self, sync_mode, cursor_field=None, stream_slice=None, stream_state=None) -> Iterable[Mapping[str, Any]]:
        yield from self._records


class CasesSource(AbstractSource):
    """Every case as one stream, at schema version ``version`` (0: first sync, 1: second)."""

    def __init__(self, version: int) -> None:
        self.version = version

    def spec(self, logger: logging.Logger) -> ConnectorSpecification:
        return ConnectorSpecification(connectionSpecification={"type": "object", "properties": {}})

    def check_connection(self, logger, config):
        return True, None

    def streams(self, config: Mapping[str, Any]) -> list[Stream]:
        return [Rows(name, key, *versions[self.version]) for name, (key, _, *versions) in CASES.items() if versions[self.version]]


def cases_catalog(version: int) -> dict[str, Any]:
    return {"streams": [
        {"stream": {"name": name, "json_schema": {}, "supported_sync_modes": ["full_refresh"]},
         "sync_mode": SyncMode.full_refresh.value, "destination_sync_mode": mode}
        for name, (_, mode, *versions) in CASES.items() if versions[version]
    ]}  # fmt: skip


def legacy_table(spark, path: str) -> None:
    """A table as the version before this one wrote it: commits that record no schema."""
    properties, records = LEGACY
    batch = records_to_arrow(records, arrow_schema({"properties": properties}), extracted_at_ms=0, sync_id="old", checkpoint=0)
    SparkTable(spark, path).commit(batch, state={}, seq=0)


def statuses(output) -> dict[str, str]:
    """The last stream status each stream reported."""
    found = {}
    for message in output.messages:
        trace = message.get("trace") or {}
        if message["type"] == "TRACE" and trace.get("type") == "STREAM_STATUS":
            found[trace["stream_status"]["stream_descriptor"]["name"]] = trace["stream_status"]["status"]
    return found


def errors(output) -> dict[str, str]:
    found = {}
    for message in output.messages:
        trace = message.get("trace") or {}
        if message["type"] == "TRACE" and trace.get("type") == "ERROR":
            found[trace["error"]["stream_descriptor"]["name"]] = trace["error"]["message"]
    return found


def folder_listing(path: str) -> list[str]:
    return sorted(os.path.relpath(os.path.join(root, name), path) for root, _, names in os.walk(path) for name in names)


@pytest.fixture(scope="module", params=["parquet", "delta"])
def synced(request, new_application, spark, tmp_path_factory):
    """Both syncs, then one fresh Spark application's view of every table, for each table format
    (the table written "by the version before" is a Parquet folder in both: a table keeps its format)."""
    warehouse = str(tmp_path_factory.mktemp("evolving"))
    config = {"destination": {"type": "spark", "warehouse": warehouse, "spark_master": "local[1]", "table_format": request.param}}
    paths = {name: table_path(os.path.realpath(warehouse), CasesSource(0).name, name) for name in CASES}
    first = read(CasesSource(0), config, cases_catalog(0))
    legacy_table(spark, paths["legacy_changed"])
    after_first = {name: folder_listing(paths[name]) for name in FAILING}
    second = read(CasesSource(1), config, cases_catalog(1))
    seen = new_application(list(paths.values()))
    return {"first": first, "second": second, "paths": paths, "after_first": after_first, "seen": {n: seen[p] for n, p in paths.items()},
            "format": request.param}


def table_rows(synced, name: str, *columns: str) -> list[tuple]:
    seen = synced["seen"][name]
    assert "error" not in seen, seen.get("error")
    return sorted((tuple(row[c] for c in columns) for row in seen["rows"]), key=repr)


def test_both_syncs_complete_every_stream_but_the_incompatible_ones(synced):
    assert synced["first"].returncode == 0, errors(synced["first"])
    assert set(statuses(synced["first"]).values()) == {"COMPLETE"} and len(statuses(synced["first"])) == len(CASES) - 1
    second = statuses(synced["second"])
    assert {name for name, status in second.items() if status != "COMPLETE"} == FAILING, errors(synced["second"])
    assert synced["second"].returncode != 0


# -- item 8: schemas evolve -------------------------------------------------------------------------


def test_item_8_an_added_column_is_visible_to_a_plain_reader_with_old_rows_null(synced):
    seen = synced["seen"]["append_added"]
    assert seen.get("types", {}).get("score") == "double", seen
    if synced["format"] == "parquet":
        assert seen["columns"][:3] == ["id", "name", "score"]
    else:  # Delta's schema evolution (Spark's mergeSchema and delta-rs alike) adds a column after the others
        assert seen["columns"][:2] == ["id", "name"] and seen["columns"][-1] == "score"
    assert table_rows(synced, "append_added", "id", "score") == [(1, None), (2, 2.5), (3, None)]


def test_item_8_fields_the_schema_does_not_declare_are_named_in_sf_meta(synced):
    (first,) = [row for row in synced["seen"]["append_added"]["rows"] if row["id"] == 1]
    assert json.loads(first["_sf_meta"])["undeclared"] == ["note", "score"]
    (later,) = [row for row in synced["seen"]["append_added"]["rows"] if row["id"] == 2]
    assert later["_sf_meta"] is None  # declared since: nothing to say


def test_item_16_a_lone_surrogate_is_replaced_and_noted_and_the_sync_goes_on(synced):
    (row,) = [row for row in synced["seen"]["append_added"]["rows"] if row["id"] == 3]
    assert row["name"] == "\ufffd lone"
    (error,) = json.loads(row["_sf_meta"])["errors"]
    assert error["field"] == "name" and "\\ud800" in error["reason"]


def test_item_8_a_table_whose_commits_recorded_no_schema_is_compared_by_its_files_schema(synced):
    """Written by the version before this one: the schema comes from a data file's footer."""
    types = synced["seen"]["legacy_changed"].get("types", {})
    assert (types.get("seen"), types.get("n"), types.get("name")) == ("timestamp", "double", "string"), synced["seen"]["legacy_changed"]
    assert table_rows(synced, "legacy_changed", "id", "seen", "n", "name") == [(1, "2024-01-01 00:00:00", 7.0, None), (2, None, 0.5, "b")]


def test_item_8_widened_columns_are_applied_to_old_rows_too(synced):
    types = synced["seen"]["append_widened"].get("types", {})
    assert (types.get("amount"), types.get("flag"), types.get("seen"), types.get("code")) == ("double", "string", "string", "string")
    assert table_rows(synced, "append_widened", "id", "amount", "flag", "seen", "code") == [
        (1, 10.0, "true", "2024-01-01T08:00:00.000000Z", "7"),
        (2, 2.5, "maybe", "yesterday", "A7"),
    ]


def test_item_8_every_commit_records_the_tables_schema(synced):
    table = SparkDestination(os.path.dirname(os.path.dirname(synced["paths"]["append_widened"])), "x")._table_at(
        synced["paths"]["append_widened"], None)
    columns = {c["name"]: c["type"] for c in table.last_checkpoint().schema["columns"]}
    assert (columns["amount"], columns["flag"], columns["_sf_meta"]) == ("double", "string", "string")
    first = list(table.committed_checkpoints())[-1]
    assert {c["name"]: c["type"] for c in first.schema["columns"]}["amount"] == "int64"


@pytest.mark.parametrize("name, column, old, new", [
    ("append_incompatible", "amount", "string", "bigint"),
    ("dedup_incompatible", "flag", "boolean", "bigint"),
])  # fmt: skip
def test_item_8_an_incompatible_change_fails_the_stream_before_anything_is_written(synced, name, column, old, new):
    message = errors(synced["second"])[name]
    assert f"'{column}'" in message and old in message and new in message, message
    assert f"state reset --stream {name} --tables" in message
    assert folder_listing(synced["paths"][name]) == synced["after_first"][name]
    assert synced["seen"][name]["types"][column] == old  # still readable, as before


def test_item_8_dedup_tables_take_added_and_widened_columns(synced):
    assert synced["seen"]["dedup_added"].get("types", {}).get("score") == "double"
    assert table_rows(synced, "dedup_added", "id", "name", "score") == [(1, "a", None), (2, "b2", 9.5), (3, "c", 1.0)]
    assert synced["seen"]["dedup_widened"].get("types", {}).get("amount") == "double"
    assert table_rows(synced, "dedup_widened", "id", "amount") == [(1, 10.0), (2, 2.5)]


# -- item 17: append_dedup keys ---------------------------------------------------------------------


def test_item_17_rows_with_a_null_key_are_each_kept(synced):
    assert table_rows(synced, "null_keys", "id", "v") == [(1, 5), (None, 1), (None, 2), (None, 4)]


def test_item_17_a_nested_key_is_read_out_of_its_json_column(synced):
    rows = table_rows(synced, "nested_keys", "user", "v")
    assert sorted(v for _, v in rows) == [2, 3, 4]  # user 1 merged, user 2 kept, the row without an id kept
    assert {json.loads(user).get("id") for user, v in rows if v == 3} == {1}


def test_item_17_a_key_column_with_a_dot_in_its_name(synced):
    assert table_rows(synced, "dotted_keys", "a.b", "v") == [(1, 3), (2, 2)]


# -- the counts behind the end-of-run summary ---------------------------------------------------------


def test_item_8_the_sink_counts_undeclared_fields_for_the_summary(spark, tmp_path):
    destination = SparkDestination(str(tmp_path), default_namespace="counts", master="local[1]")
    target = StreamTarget("counted", None, {"properties": {"id": INTEGER}}, incremental=False)
    destination.reserve([(None, "counted")])
    try:
        sink = destination.open_stream(target)
        for record in ({"id": 1, "a": 1}, {"id": 2, "a": 2, "b": None}, {"id": 3}):
            sink.write(record)
        assert sink.finish({}).result(120).rows_through == 3
    finally:
        destination.close()
    not_kept = sink.values_not_kept()
    assert not_kept.undeclared_fields == {"a": 2, "b": 1}
    assert not_kept.records_with_undeclared_fields == 2


@pytest.mark.parametrize("table_format", ["delta", "parquet"])
@pytest.mark.parametrize("declared, older, newer", [
    ({"type": "integer"}, 9, 10),
    ({"type": "number"}, 9.5, 10.25),
    ({"type": "string", "format": "date-time"}, "2025-01-01T10:00:00+02:00", "2025-01-01T09:00:00Z"),
])
def test_append_dedup_keeps_the_latest_cursor_by_its_declared_type_also_inside_an_object(
        spark, tmp_path, declared, older, newer, table_format):
    """A cursor inside an object column (``["meta", "version"]``) was read out of its JSON as text,
    where 9 comes after 10 and 10:00+02:00 after 09:00Z: the merge kept the older record and dropped
    the newer one (found in review)."""
    from source_framework.destinations.base import APPEND_DEDUP
    from source_framework.destinations.checkpoint_record import ResumeNotes
    from source_framework.destinations.spark.committer import CommitJob
    from source_framework.destinations.spark.table_writer import TableWriter

    schema = {"properties": {"id": {"type": "integer"}, "meta": {"type": "object", "properties": {"version": declared}}}}
    target = StreamTarget("versions", None, schema, incremental=True, destination_sync_mode=APPEND_DEDUP,
                          primary_key=[["id"]], cursor_field=["meta", "version"])
    destination = SparkDestination(str(tmp_path), "x", table_format=table_format)  # (only asked for a new table)
    table = destination._table_at(str(tmp_path / "versions"), spark, arrow_writes=True)
    destination.close()
    table.recover()
    writer = TableWriter(table, target, arrow_schema(schema), recorded_schema=table.recorded_schema())

    def commit(version):
        batch = writer.to_arrow([{"id": 1, "meta": {"version": version}}], [1000])  # same extraction: the cursor decides
        writer.apply([CommitJob(writer, [batch], batch.num_rows, batch.nbytes, {"v": str(version)}, ResumeNotes(start_state={}))])

    commit(older)
    commit(newer)
    assert [json.loads(row["meta"])["version"] for row in table.read().collect()] == [newer]
