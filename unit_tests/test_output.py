"""Protocol lines for values orjson refuses (issue 18: ``--destination stdout`` crashed on a record
nested deeper than 254 levels): such a record is still printed, exactly, never dropped."""

from __future__ import annotations

import io
import json
import logging
from collections.abc import Iterable, Mapping
from datetime import UTC, datetime
from typing import Any

import orjson
import pytest
from airbyte_cdk.models import ConnectorSpecification
from airbyte_cdk.sources import AbstractSource
from airbyte_cdk.sources.streams import Stream
from airbyte_cdk.test.catalog_builder import CatalogBuilder

from source_framework.runtime.entrypoint import EXIT_OK
from source_framework.runtime.output import ProtocolOutput
from source_framework.runtime.secrets import SecretFilter
from source_framework.testing import read
from unit_tests.conftest import stream_builder


def nested(depth: int, leaf: Any = 1) -> Any:
    """``{"a": {"a": ... leaf}}`` ``depth`` objects deep, built without recursion."""
    value = leaf
    for _ in range(depth):
        value = {"a": value}
    return value


def nested_json(depth: int, leaf: str = "1") -> bytes:
    return ('{"a":' * depth + leaf + "}" * depth).encode()


def record_line(data: Any) -> bytes:
    buffer = io.BytesIO()
    ProtocolOutput(buffer).record("deep", None, data, 7)
    return buffer.getvalue()


@pytest.mark.parametrize("depth", [255, 1_000, 50_000])
def test_a_record_deeper_than_orjson_allows_is_printed_exactly(depth):
    assert record_line(nested(depth)) == b'{"type":"RECORD","record":{"stream":"deep","data":' + nested_json(depth) + b',"emitted_at":7}}\n'


@pytest.mark.parametrize(
    "data, printed",
    [
        ({"id": 2**70, "big": [-(2**64)]}, b'{"id":1180591620717411303424,"big":[-18446744073709551616]}'),
        ({1: "one", 2.5: "x", None: "n", False: "f"}, b'{"1":"one","2.5":"x","null":"n","false":"f"}'),
        ({"bad": "a\udc80b", "ok": "é"}, b'{"bad":"a\\udc80b","ok":"\xc3\xa9"}'),
    ],
    ids=["integers beyond 64 bits", "non-string keys (as the standard library writes them)", "a lone surrogate"],
)
def test_other_values_orjson_refuses_are_printed_as_json(data, printed):
    line = record_line(data)
    assert line == b'{"type":"RECORD","record":{"stream":"deep","data":' + printed + b',"emitted_at":7}}\n'
    json.loads(line)


def test_the_fallback_writes_what_orjson_writes_for_everything_it_can_write():
    leaves = {"s": "é\n\"", "i": -3, "f": 1.5, "nan": float("nan"), "t": True, "n": None, "d": datetime(2025, 1, 2, tzinfo=UTC)}
    deep = nested(300, [leaves, (1, 2)])
    inner = orjson.dumps([leaves, (1, 2)])
    expected = b'{"type":"RECORD","record":{"stream":"deep","data":' + nested_json(300, inner.decode()) + b',"emitted_at":7}}\n'
    assert record_line(deep) == expected


def circular() -> dict:
    """300 levels deep, then back to the top."""
    bottom: dict = {}
    top = nested(300, bottom)
    bottom["a"] = top
    return top


@pytest.mark.parametrize(
    "make_data, error",
    [(lambda: {"tags": {1, 2}, "deep": nested(300)}, TypeError), (circular, ValueError)],
    ids=["a value JSON has no form for", "a circular reference"],
)
def test_a_value_that_is_not_json_stops_with_an_error_and_writes_nothing(make_data, error):
    buffer = io.BytesIO()
    with pytest.raises(error):
        ProtocolOutput(buffer).record("deep", None, make_data(), 7)
    assert buffer.getvalue() == b""


def test_a_deep_trace_or_control_message_is_passed_on_with_its_secrets_masked():
    buffer = io.BytesIO()
    output = ProtocolOutput(buffer, SecretFilter(["s3cr3t-key-0f9a7c"]))
    config = nested(400, "s3cr3t-key-0f9a7c")
    message = {"type": "CONTROL", "control": {"type": "CONNECTOR_CONFIG", "emitted_at": 1.0, "connectorConfig": {"config": config}}}
    output.message(message)
    prefix = b'{"type":"CONTROL","control":{"type":"CONNECTOR_CONFIG","emitted_at":1.0,"connectorConfig":{"config":'
    assert buffer.getvalue() == prefix + nested_json(400, '"****"') + b"}}}\n"


class DeepRecords(Stream):
    """Full refresh: a record nested 300 levels deep between two flat ones."""

    primary_key = "id"

    @property
    def name(self) -> str:
        return "deep"

    def get_json_schema(self) -> Mapping[str, Any]:
        return {"type": "object", "properties": {"id": {"type": "integer"}, "tree": {}}}

    def read_records(self, sync_mode, cursor_field=None, stream_slice=None, stream_state=None) -> Iterable[Mapping[str, Any]]:
        yield {"id": 1, "tree": None}
        yield {"id": 2, "tree": nested(300)}
        yield {"id": 3, "tree": None}


class DeepSource(AbstractSource):
    def spec(self, logger: logging.Logger) -> ConnectorSpecification:
        return ConnectorSpecification(connectionSpecification={"type": "object", "properties": {}})

    def check_connection(self, logger, config):
        return True, None

    def streams(self, config: Mapping[str, Any]) -> list[Stream]:
        return [DeepRecords()]


def test_destination_stdout_prints_a_deep_record_and_the_sync_succeeds():
    catalog = CatalogBuilder().with_stream(stream_builder("deep", "full_refresh", "overwrite")).build()
    output = read(DeepSource(), {}, catalog, args=["--destination", "stdout", "--quiet"])
    assert output.returncode == EXIT_OK
    # (a null top-level field is left out, as airbyte-cdk prints records)
    assert output.records("deep") == [{"id": 1}, {"id": 2, "tree": nested(300)}, {"id": 3}]


def test_a_record_is_printed_as_airbyte_cdk_prints_it_top_level_nulls_left_out():
    """airbyte-cdk's serializer leaves out a record's top-level null fields (nested nulls stay):
    airbyte-source-hardcoded-records' customers, under our ``--destination stdout``, printed three
    fields airbyte-cdk's own ``read`` does not (found comparing the two)."""
    from airbyte_cdk.models import AirbyteMessage, AirbyteMessageSerializer, AirbyteRecordMessage, Type

    data = {"id": 1, "gone": None, "nested": {"kept": None}, "list": [None], "empty": "", "zero": 0, "no": False}
    cdk = AirbyteMessageSerializer.dump(AirbyteMessage(type=Type.RECORD, record=AirbyteRecordMessage(
        stream="deep", data=data, emitted_at=7)))
    assert json.loads(record_line(data)) == cdk
    assert record_line({"id": 1}) == b'{"type":"RECORD","record":{"stream":"deep","data":{"id":1},"emitted_at":7}}\n'
