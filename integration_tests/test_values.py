"""What a connector yields lands in the table as airbyte-cdk prints it, through both writers, and a
value that does not fit its column is never lost silently (issue 49).

A Python connector (source-faker's purchases) yields ``datetime``s, enums, ids and nested values;
airbyte-cdk prints them as JSON. Two streams of one source carry the same records: ``purchases``
as Python values, ``printed`` as airbyte-cdk's entrypoint printed them. Synced with the writer
this process runs (Arrow) and with Spark's, the two tables must hold the same values, row for row,
as a separate Spark reads them (the reference: a destination reading airbyte-cdk's stdout).
"""

from __future__ import annotations

import enum
import json
import logging
import os
import re
import uuid
from collections.abc import Iterable, Mapping
from datetime import date, datetime, time, timedelta, timezone
from decimal import Decimal
from typing import Any
from zoneinfo import ZoneInfo

import pytest
from airbyte_cdk.entrypoint import AirbyteEntrypoint
from airbyte_cdk.models import AirbyteMessage, AirbyteRecordMessage, ConnectorSpecification, SyncMode, Type
from airbyte_cdk.sources import AbstractSource
from airbyte_cdk.sources.streams import Stream

from integration_tests.conftest import read_table, run_in_process, write_json
from source_framework.demo.source import DemoSource
from source_framework.destinations.spark.layout import table_path


class Colour(enum.Enum):
    RED = "red"
    BLUE = "blue"


class Level(enum.IntEnum):
    LOW = 1
    HIGH = 3


SCHEMA = {
    "id": {"type": "integer"},
    "created_at": {"type": ["null", "string"], "format": "date-time"},
    "paid_at": {"type": "string", "format": "date-time"},
    "day": {"type": "string", "format": "date"},
    "opens": {"type": "string"},
    "colour": {"type": "string"},
    "level": {"type": "integer"},
    "ref": {"type": "string"},
    "items": {"type": "array"},
    "detail": {"type": "object"},
    "score": {"type": "number"},
    "vip": {"type": "integer"},  # the API sends booleans: they do not fit
}


def purchase(n: int) -> dict[str, Any]:
    """A record as a Python connector builds it (source-faker's purchases: naive datetimes)."""
    return {
        "id": n,
        "created_at": datetime(2012, 6, 17, 9, 37, 9, 623902) + timedelta(hours=n),
        "paid_at": datetime(2024, 3, 31, 1, 30, tzinfo=ZoneInfo("Europe/Paris")) + timedelta(minutes=n),
        "day": date(2020, 1, 2) + timedelta(days=n),
        "opens": time(8, n % 60),
        "colour": Colour.RED if n % 2 else Colour.BLUE,
        "level": Level.HIGH if n % 3 else Level.LOW,
        "ref": uuid.UUID(int=n),
        "items": (n, "x"),
        "detail": {"at": datetime(2020, 1, 1, tzinfo=timezone(timedelta(hours=-5))), "on": [date(2021, 2, 3)]},
        "score": float("nan") if n % 5 == 0 else n / 4,
        "vip": n % 2 == 0,
    }


def printed(record: dict[str, Any]) -> dict[str, Any]:
    message = AirbyteMessage(type=Type.RECORD, record=AirbyteRecordMessage(stream="s", data=record, emitted_at=0))
    return json.loads(AirbyteEntrypoint.airbyte_message_to_string(message))["record"]["data"]


RECORDS = 40


class Records(Stream):
    primary_key = "id"

    def __init__(self, name: str, records: list[dict[str, Any]]) -> None:
        self._name, self._records = name, records

    @property
    def name(self) -> str:
        return self._name

    def get_json_schema(self) -> Mapping[str, Any]:
        return {"type": "object", "properties": SCHEMA}

    def read_records(self, sync_mode, cursor_field=None, stream_slice=None, stream_state=None) -> Iterable[Mapping[str, Any]]:
        yield from self._records


class PythonValues(AbstractSource):
    def __init__(self, extra: dict[str, list[dict[str, Any]]] | None = None) -> None:
        records = [purchase(n) for n in range(RECORDS)]
        self.records = {"purchases": records, "printed": [printed(r) for r in records], **(extra or {})}

    def spec(self, logger: logging.Logger) -> ConnectorSpecification:
        return ConnectorSpecification(connectionSpecification={"type": "object", "properties": {}})

    def check_connection(self, logger, config):
        return True, None

    def streams(self, config: Mapping[str, Any]) -> list[Stream]:
        return [Records(name, records) for name, records in self.records.items()]


def catalog(*names: str) -> dict[str, Any]:
    return {"streams": [{"stream": {"name": name, "json_schema": {}, "supported_sync_modes": ["full_refresh"]},
                         "sync_mode": SyncMode.full_refresh.value, "destination_sync_mode": "overwrite"} for name in names]}


def sync(tmp_path, source, writer: str, names: tuple[str, ...], **destination: Any):
    warehouse = tmp_path / writer
    config = {"destination": {"type": "spark", "warehouse": str(warehouse), "spark_master": "local[1]", "writer": writer,
                              **destination}}
    run = run_in_process("read", "--config", write_json(tmp_path / f"{writer}-config.json", config),
                         "--catalog", write_json(tmp_path / f"{writer}-catalog.json", catalog(*names)), source=source)
    return run, os.path.realpath(warehouse)


@pytest.mark.parametrize("writer", ["arrow", "spark"])
def test_python_values_land_as_airbyte_cdk_prints_them(spark, tmp_path, writer):
    run, warehouse = sync(tmp_path, PythonValues(), writer, ("purchases", "printed"))
    assert run.returncode == 0, run.stderr
    tables = {name: read_table(spark, table_path(warehouse, "PythonValues", name)) for name in ("purchases", "printed")}
    columns = [*SCHEMA, "_sf_meta"]
    rows = {name: sorted(tuple(row) for row in frame.select(*columns).collect()) for name, frame in tables.items()}
    assert len(rows["purchases"]) == RECORDS
    assert rows["purchases"] == rows["printed"]
    # source-faker's case: every naive datetime is the instant airbyte-cdk's text names, none is null
    created = {row["id"]: row["created_at"] for row in tables["purchases"].collect()}
    assert created[3] == datetime(2012, 6, 17, 12, 37, 9, 623902)  # the test session reads in UTC
    assert None not in created.values()
    sample = tables["purchases"].where("id = 3").collect()[0]
    assert (sample["colour"], sample["level"], sample["ref"], sample["opens"]) == ("red", 1, str(uuid.UUID(int=3)), "08:03:00")
    assert json.loads(sample["items"]) == [3, "x"] and json.loads(sample["detail"])["at"] == "2020-01-01T00:00:00-05:00"


def test_values_that_do_not_fit_are_counted_logged_and_summed_up(spark, tmp_path):
    run, warehouse = sync(tmp_path, PythonValues(), "arrow", ("purchases",))
    assert run.returncode == 0, run.stderr
    frame = read_table(spark, table_path(warehouse, "PythonValues", "purchases"))
    assert frame.where("vip IS NULL").count() == RECORDS  # booleans in an integer column: null, but not silently
    assert "field 'vip' does not fit its column (expected integer, got boolean" in run.stderr
    summary = [line for line in run.stderr.splitlines() if line.startswith("purchases: ")]
    assert summary == [f"purchases: {RECORDS} values did not fit their column and were stored as null (vip: {RECORDS}, "
                       "expected integer, got boolean true); see _sf_meta, or set destination.on_type_mismatch: fail to "
                       "stop the stream instead"]


@pytest.mark.parametrize("writer", ["arrow", "spark"])
def test_on_type_mismatch_fail_stops_the_stream_before_its_rows_are_committed(spark, tmp_path, writer):
    run, warehouse = sync(tmp_path, PythonValues(), writer, ("purchases",), on_type_mismatch="fail")
    assert run.returncode != 0
    errors = [m["trace"]["error"] for m in run.of_type("TRACE") if m["trace"]["type"] == "ERROR"]
    assert len(errors) == 1 and "field 'vip'" in errors[0]["message"] and "expected integer, got boolean" in errors[0]["message"]
    assert not run.of_type("STATE")
    for log in ("_delta_log", "_spark_metadata"):  # no commit, in either table format
        assert not os.path.exists(os.path.join(table_path(warehouse, "PythonValues", "purchases"), log))


def test_a_value_airbyte_cdk_cannot_print_stops_its_stream_and_no_other(spark, tmp_path):
    """A ``Decimal``: airbyte-cdk's entrypoint fails on it ("failed to be serialized to JSON"); here
    its stream fails with the field named, and the sync's other streams complete."""
    broken = [{"id": 1, "score": 1.5}, {"id": 2, "score": Decimal("2.10")}]
    run, warehouse = sync(tmp_path, PythonValues({"broken": broken}), "arrow", ("broken", "printed"))
    assert run.returncode != 0
    errors = [m["trace"]["error"] for m in run.of_type("TRACE") if m["trace"]["type"] == "ERROR"]
    assert [e["stream_descriptor"]["name"] for e in errors] == ["broken"]
    assert "field 'score'" in errors[0]["message"] and "Decimal" in errors[0]["message"]
    statuses = {m["trace"]["stream_status"]["stream_descriptor"]["name"]: m["trace"]["stream_status"]["status"]
                for m in run.of_type("TRACE") if m["trace"]["type"] == "STREAM_STATUS"}
    assert statuses == {"broken": "INCOMPLETE", "printed": "COMPLETE"}


class MistypedUsers(DemoSource):
    """The demo connector with ``users.name`` declared an integer: the API sends text. Its records
    are taken from their pages' bytes by the page converter's process."""

    def streams(self, config: Mapping[str, Any]) -> list[Stream]:
        streams = super().streams(config)
        for stream in streams:
            if stream.name == "users":
                schema = dict(stream.get_json_schema())
                schema["properties"] = {**schema["properties"], "name": {"type": ["null", "integer"]}}
                stream.get_json_schema = lambda schema=schema: schema  # type: ignore[method-assign]
        return streams


@pytest.mark.parametrize("on_type_mismatch", ["null", "fail"])
def test_the_page_converter_counts_and_fails_as_this_process_does(spark, tmp_path, demo_api, on_type_mismatch):
    from integration_tests.conftest import API_KEY

    config = {"api_url": demo_api.url, "api_key": API_KEY, "start_date": "2025-01-01T00:00:00Z",
              "destination": {"type": "spark", "warehouse": str(tmp_path / "w"), "spark_master": "local[1]",
                              "on_type_mismatch": on_type_mismatch}}
    users = {"streams": [{"stream": {"name": "users", "json_schema": {}, "supported_sync_modes": ["incremental"]},
                          "sync_mode": "incremental", "destination_sync_mode": "append"}]}
    run = run_in_process("read", "--config", write_json(tmp_path / "c.json", config),
                         "--catalog", write_json(tmp_path / "k.json", users), source=MistypedUsers())
    frame_path = table_path(os.path.realpath(tmp_path / "w"), "demo", "users")
    if on_type_mismatch == "fail":
        assert run.returncode != 0
        assert not run.of_type("STATE")
        errors = [m["trace"]["error"] for m in run.of_type("TRACE") if m["trace"]["type"] == "ERROR"]
        assert errors and "field 'name'" in errors[0]["message"] + errors[0].get("internal_message", "")
        return
    assert run.returncode == 0, run.stderr
    rows = read_table(spark, frame_path).count()
    assert rows > 0 and read_table(spark, frame_path).where("name IS NOT NULL").count() == 0
    assert f"users: {rows:,} values did not fit their column" in run.stderr  # every name: text, not an integer
    assert "field 'name' does not fit its column (expected integer, got string" in run.stderr



def test_an_unknown_on_type_mismatch_is_refused_before_anything_is_read(tmp_path):
    run, warehouse = sync(tmp_path, PythonValues(), "arrow", ("purchases",), on_type_mismatch="drop")
    assert run.returncode == 2
    assert "config file" in run.stderr and "on_type_mismatch must be one of null, fail, not 'drop'" in run.stderr
    assert not run.of_type("RECORD") and not run.of_type("STATE") and not os.path.exists(warehouse)


def tables_command(source, config_path: str, *args: str) -> tuple[int, str, str]:
    """``main.py tables ...`` of ``source`` in this process: (exit code, stdout, stderr)."""
    import contextlib
    import io

    from source_framework.runtime.entrypoint import build_parser, run_command

    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = run_command(source, build_parser().parse_args(["tables", *args, "--config", config_path]))
    return code, out.getvalue(), err.getvalue()


@pytest.mark.parametrize("table_format", ["delta", "parquet"])
def test_tables_shows_per_field_the_values_stored_as_null_and_the_undeclared_fields(spark, tmp_path, table_format):
    """What the summary said at the end of the sync, ``tables`` says later from the table itself
    (each row's ``_sf_meta``), per field: a misfit is never only in a log that scrolled away."""
    extra = [{**purchase(n), "nickname": f"n{n}"} if n % 4 == 0 else purchase(n) for n in range(RECORDS)]
    source = PythonValues({"extras": extra})
    run, warehouse = sync(tmp_path, source, "arrow", ("purchases", "extras"), table_format=table_format)
    assert run.returncode == 0, run.stderr
    code, out, err = tables_command(source, str(tmp_path / "arrow-config.json"), "--json")
    assert code == 0, err
    tables = {table["stream"]: table for table in json.loads(out)["tables"]}
    assert tables["purchases"]["format"] == table_format
    vip = {"values": RECORDS, "first_reason": "expected integer, got boolean true"}
    assert tables["purchases"]["values_stored_as_null"] == {"vip": vip} and tables["purchases"]["undeclared_fields"] == {}
    frame = read_table(spark, table_path(warehouse, "PythonValues", "extras"))  # the reference: Spark's count
    nicknamed = frame.where("_sf_meta LIKE '%nickname%'").count()
    assert nicknamed == RECORDS // 4
    assert tables["extras"]["undeclared_fields"] == {"nickname": nicknamed}

    code, text, err = tables_command(source, str(tmp_path / "arrow-config.json"), "--stream", "extras")
    assert code == 0, err
    assert f"  misfits      vip: {RECORDS} values stored as null (expected integer, got boolean true)\n" in text
    assert f"               nickname: in {nicknamed} rows, not in the schema (no column)\n" in text


@pytest.mark.parametrize("table_format", ["delta", "parquet"])
def test_tables_show_prints_a_tables_first_rows_as_its_readers_see_them(spark, tmp_path, table_format):
    source = PythonValues()
    run, warehouse = sync(tmp_path, source, "arrow", ("purchases",), table_format=table_format)
    assert run.returncode == 0, run.stderr
    config_path = str(tmp_path / "arrow-config.json")
    code, out, err = tables_command(source, config_path, "show", "purchases", "--limit", "3", "--json")
    assert code == 0, err
    shown = [json.loads(line) for line in out.splitlines()]
    assert len(shown) == 3
    frame = read_table(spark, table_path(warehouse, "PythonValues", "purchases"))
    by_id = {row["id"]: row.asDict() for row in frame.collect()}
    for row in shown:  # each value as Spark reads it (timestamps as their text)
        expected = by_id[row["id"]]
        assert set(row) == set(expected)
        assert row["vip"] is None and row["colour"] == expected["colour"] and row["items"] == expected["items"]
        assert row["_sf_checkpoint"] == expected["_sf_checkpoint"] and row["_sf_meta"] == expected["_sf_meta"]

    code, text, err = tables_command(source, config_path, "show", "purchases", "--limit", "2")
    assert code == 0, err
    lines = text.splitlines()
    assert lines[0].split()[:3] == ["id", "created_at", "paid_at"] and len(lines) == 4
    assert lines[-1] == f"(2 of {RECORDS} rows)"
    assert all(len(cell) <= 40 for line in lines[1:3] for cell in re.split(r" {2,}", line.strip()))  # long values cut

    assert tables_command(source, config_path, "show", "nope")[0] == 2  # bad input: no such stream
    code, out, err = tables_command(source, config_path, "show", "purchases", "--limit", "0")
    assert (code, out) == (2, "") and "--limit must be 1 or more, got 0" in err
    code, out, err = tables_command(source, config_path, "look", "purchases")
    assert (code, out) == (2, "") and "tables takes 'show STREAM' or nothing" in err
