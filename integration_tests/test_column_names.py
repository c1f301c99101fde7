"""Column names that differ only by case are refused before anything is written (issue 49, item 10).

Spark's (and Delta's) column names are case-insensitive: a table holding ``Name`` and ``name`` makes
every plain reader fail (``COLUMN_ALREADY_EXISTS``), the rows of earlier syncs included. Before,
such a sync exited 0 and left that table behind.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterable, Mapping
from typing import Any

from airbyte_cdk.models import ConnectorSpecification
from airbyte_cdk.sources import AbstractSource
from airbyte_cdk.sources.streams import Stream

from integration_tests.conftest import read_table, run_in_process, write_json
from source_framework.destinations.spark.layout import table_path


class Rows(Stream):
    primary_key = None

    def __init__(self, name: str, properties: Mapping[str, Any], records: list[dict]) -> None:
        self._name, self._properties, self._records = name, properties, records

    @property
    def name(self) -> str:
        return self._name

    def get_json_schema(self) -> Mapping[str, Any]:
        return {"type": "object", "properties": dict(self._properties)}

    def read_records(self, sync_mode, cursor_field=None, stream_slice=None, stream_state=None) -> Iterable[Mapping[str, Any]]:
        yield from self._records


class Names(AbstractSource):
    def __init__(self, streams: dict[str, tuple[dict, list[dict]]]) -> None:
        self._streams = streams

    def spec(self, logger: logging.Logger) -> ConnectorSpecification:
        return ConnectorSpecification(connectionSpecification={"type": "object", "properties": {}})

    def check_connection(self, logger, config):
        return True, None

    def streams(self, config: Mapping[str, Any]) -> list[Stream]:
        return [Rows(name, properties, records) for name, (properties, records) in self._streams.items()]


STRING = {"type": ["null", "string"]}


def sync(tmp_path, streams: dict[str, tuple[dict, list[dict]]]):
    config = {"destination": {"type": "spark", "warehouse": str(tmp_path / "w"), "spark_master": "local[1]"}}
    catalog = {"streams": [{"stream": {"name": name, "json_schema": {}, "supported_sync_modes": ["full_refresh"]},
                            "sync_mode": "full_refresh", "destination_sync_mode": "append"} for name in streams]}
    return run_in_process("read", "--config", write_json(tmp_path / "c.json", config),
                          "--catalog", write_json(tmp_path / "k.json", catalog), source=Names(streams))


def outcome(run) -> tuple[dict[str, str], dict[str, str]]:
    statuses = {m["trace"]["stream_status"]["stream_descriptor"]["name"]: m["trace"]["stream_status"]["status"]
                for m in run.of_type("TRACE") if m["trace"]["type"] == "STREAM_STATUS"}
    errors = {m["trace"]["error"]["stream_descriptor"]["name"]: m["trace"]["error"]["message"]
              for m in run.of_type("TRACE") if m["trace"]["type"] == "ERROR"}
    return statuses, errors


def test_properties_differing_only_by_case_stop_their_stream_before_it_writes(spark, tmp_path):
    run = sync(tmp_path, {
        "cased": ({"Name": STRING, "name": STRING}, [{"Name": "A", "name": "a"}]),
        "shouting_meta": ({"id": {"type": "integer"}, "_SF_META": STRING}, [{"id": 1, "_SF_META": "x"}]),
        "fine": ({"id": {"type": "integer"}}, [{"id": 1}]),
    })
    assert run.returncode != 0
    statuses, errors = outcome(run)
    assert statuses == {"cased": "INCOMPLETE", "shouting_meta": "INCOMPLETE", "fine": "COMPLETE"}
    assert "'Name' and 'name' differ only by case" in errors["cased"]
    assert "'_SF_META' and '_sf_meta' differ only by case" in errors["shouting_meta"]
    warehouse = os.path.realpath(tmp_path / "w")
    for name in ("cased", "shouting_meta"):
        for log in ("_delta_log", "_spark_metadata"):  # no commit, in either table format
            assert not os.path.exists(os.path.join(table_path(warehouse, "Names", name), log)), name
    assert read_table(spark, table_path(warehouse, "Names", "fine")).count() == 1


def test_a_column_added_with_the_case_of_an_existing_one_is_refused_and_the_table_stays_readable(spark, tmp_path):
    first = sync(tmp_path, {"people": ({"id": {"type": "integer"}, "name": STRING}, [{"id": 1, "name": "a"}])})
    assert first.returncode == 0, first.stderr
    second = sync(tmp_path, {"people": ({"id": {"type": "integer"}, "name": STRING, "NAME": STRING},
                                        [{"id": 2, "name": "b", "NAME": "B"}])})
    assert second.returncode != 0
    _, errors = outcome(second)
    assert "'name' and 'NAME' differ only by case" in errors["people"]
    third = sync(tmp_path, {"people": ({"id": {"type": "integer"}, "NAME": STRING}, [{"id": 3, "NAME": "C"}])})
    assert third.returncode != 0
    _, errors = outcome(third)
    assert "adds column 'NAME', which differs only by case from the table's column 'name'" in errors["people"]
    assert "nothing was written" in errors["people"]
    table = read_table(spark, table_path(os.path.realpath(tmp_path / "w"), "Names", "people"))
    assert [tuple(row) for row in table.select("id", "name").collect()] == [(1, "a")]
