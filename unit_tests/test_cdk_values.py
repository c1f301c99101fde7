"""Python values a connector yields land as airbyte-cdk prints them (issue 49).

The reference is airbyte-cdk's own entrypoint: each value is put in a RECORD message and printed
with ``AirbyteEntrypoint.airbyte_message_to_string``; the printed JSON, parsed back, is what a
destination reading airbyte-cdk's stdout receives. Converting the Python value and converting
what the CDK printed must give the same column value and the same ``_sf_meta``, for every column
type. Values the CDK's serializer refuses (it fails the sync) stop the stream here too, with the
field named; a value that does not fit its column is counted per field.
"""

from __future__ import annotations

import dataclasses
import enum
import json
import uuid
from datetime import UTC, date, datetime, time, timedelta, timezone
from decimal import Decimal
from zoneinfo import ZoneInfo

import pyarrow as pa
import pytest
from airbyte_cdk.entrypoint import AirbyteEntrypoint
from airbyte_cdk.models import AirbyteMessage, AirbyteRecordMessage, Type

from source_framework.destinations.spark.arrow_columns import ValueNotSerializable
from source_framework.destinations.spark.arrow_conversion import (
    ConversionCounts,
    TypeMismatch,
    arrow_schema,
    records_to_arrow,
)


class Colour(enum.Enum):
    RED = "red"


class Level(enum.IntEnum):
    HIGH = 3


class Kind(str, enum.Enum):  # noqa: UP042  (the older spelling connectors use)
    BIG = "big"


@dataclasses.dataclass
class Point:
    x: int
    y: float


#: what Python connectors put in records (source-faker's datetimes, enums, ids, nested values)
PYTHON_VALUES = {
    "naive datetime": datetime(2012, 6, 17, 9, 37, 9, 623902),
    "utc datetime": datetime(2012, 6, 17, 9, 37, 9, tzinfo=UTC),
    "offset datetime": datetime(2012, 6, 17, 9, 37, 9, 5, tzinfo=timezone(timedelta(hours=2))),
    "zoneinfo datetime": datetime(2024, 3, 31, 1, 30, tzinfo=ZoneInfo("Europe/Paris")),
    "midnight datetime": datetime(2020, 1, 2),
    "date": date(2020, 1, 2),
    "time": time(1, 2, 3),
    "time with micros": time(1, 2, 3, 450),
    "enum": Colour.RED,
    "int enum": Level.HIGH,
    "str enum": Kind.BIG,
    "uuid": uuid.UUID(int=5),
    "dataclass": Point(1, 2.5),
    "tuple": (1, "a"),
    "nested datetime": {"at": [datetime(2020, 1, 1, 12), date(2021, 2, 3)]},
    "nan": float("nan"),
    "infinity": float("inf"),
    "bool": True,
    "int": 7,
    "float": 1.5,
    "iso text": "2012-06-17T09:37:09.623902",
}

COLUMNS = {
    "string": {"type": "string"},
    "date-time": {"type": "string", "format": "date-time"},
    "date": {"type": "string", "format": "date"},
    "integer": {"type": "integer"},
    "number": {"type": "number"},
    "boolean": {"type": "boolean"},
    "object": {"type": "object"},
    "array": {"type": "array"},
    "untyped": {},
}


def cdk_printed(data: dict) -> dict:
    """``data`` as a destination reads it from airbyte-cdk's stdout."""
    message = AirbyteMessage(type=Type.RECORD, record=AirbyteRecordMessage(stream="s", data=data, emitted_at=0))
    return json.loads(AirbyteEntrypoint.airbyte_message_to_string(message))["record"]["data"]


def converted(column: dict, records: list[dict], **kwargs) -> pa.Table:
    schema = arrow_schema({"properties": {"v": column}})
    return records_to_arrow(records, schema, extracted_at_ms=0, sync_id="s", checkpoint=1, **kwargs)


@pytest.mark.parametrize("column", list(COLUMNS), ids=list(COLUMNS))
@pytest.mark.parametrize("value", list(PYTHON_VALUES), ids=list(PYTHON_VALUES))
def test_a_python_value_lands_as_airbyte_cdk_prints_it(column: str, value: str) -> None:
    raw = {"v": PYTHON_VALUES[value]}
    printed = cdk_printed(raw)
    ours = converted(COLUMNS[column], [raw])
    theirs = converted(COLUMNS[column], [printed])
    assert ours.column("v").to_pylist() == theirs.column("v").to_pylist()
    assert ours.column("_sf_meta").to_pylist() == theirs.column("_sf_meta").to_pylist()


@pytest.mark.parametrize("column", list(COLUMNS), ids=list(COLUMNS))
def test_a_column_of_python_values_lands_as_airbyte_cdk_prints_it(column: str) -> None:
    """The same, a whole batch at once (the fast paths take a column, not a value)."""
    raws = [{"v": value} for value in PYTHON_VALUES.values()] + [{"v": None}, {}]
    ours = converted(COLUMNS[column], raws)
    theirs = converted(COLUMNS[column], [cdk_printed(raw) for raw in raws])
    assert ours.column("v").to_pylist() == theirs.column("v").to_pylist()
    assert ours.column("_sf_meta").to_pylist() == theirs.column("_sf_meta").to_pylist()


def test_datetimes_land_as_the_instants_airbyte_cdk_prints() -> None:
    """source-faker's purchases: ``created_at`` is a naive datetime; airbyte-cdk prints its ISO
    text, which a date-time column reads as UTC (as every naive date-time text)."""
    values = [datetime(2012, 6, 17, 9, 37, 9, 623902), datetime(2012, 6, 17, 9, 37, 9, tzinfo=timezone(timedelta(hours=2)))]
    table = converted(COLUMNS["date-time"], [{"v": value} for value in values])
    assert table.column("v").to_pylist() == [datetime(2012, 6, 17, 9, 37, 9, 623902, tzinfo=UTC),
                                             datetime(2012, 6, 17, 7, 37, 9, tzinfo=UTC)]
    assert table.column("_sf_meta").null_count == 2


def test_a_float_airbyte_cdk_prints_as_null_is_null() -> None:
    table = converted(COLUMNS["number"], [{"v": float("nan")}, {"v": float("-inf")}, {"v": 2.0}])
    assert table.column("v").to_pylist() == [None, None, 2.0]


@pytest.mark.parametrize("value", [Decimal("1.10"), b"abc", {1, 2}, timedelta(seconds=3), {"nested": Decimal("2")}],
                         ids=["decimal", "bytes", "set", "timedelta", "nested decimal"])
@pytest.mark.parametrize("column", list(COLUMNS), ids=list(COLUMNS))
def test_a_value_airbyte_cdk_cannot_print_stops_the_stream(value: object, column: str) -> None:
    """airbyte-cdk fails the sync on such a record ("failed to be serialized to JSON"): here the
    conversion refuses it, naming the field and the type, instead of storing null."""
    message = AirbyteMessage(type=Type.RECORD, record=AirbyteRecordMessage(stream="s", data={"v": value}, emitted_at=0))
    with pytest.raises(Exception, match="serialized to JSON"):
        AirbyteEntrypoint.airbyte_message_to_string(message)
    for batch in ([{"v": 1}, {"v": value}], [{"v": value}], [{"v": value}, {"v": value}]):
        with pytest.raises(ValueNotSerializable, match=r"field 'v'.*(Decimal|bytes|set|timedelta)"):
            converted(COLUMNS[column], batch)


def test_values_that_do_not_fit_are_counted_per_field() -> None:
    counts = ConversionCounts()
    schema = arrow_schema({"properties": {"n": {"type": "integer"}, "t": {"type": "string", "format": "date-time"}}})
    records = [{"n": True, "t": "yesterday"}, {"n": False, "t": "2024-01-01T00:00:00Z"}, {"n": 3, "t": None}]
    table = records_to_arrow(records, schema, extracted_at_ms=0, sync_id="s", checkpoint=1, counts=counts)
    assert table.column("n").to_pylist() == [None, None, 3]
    assert dict(counts.mismatched) == {"n": 2, "t": 1}
    assert counts.mismatch_reasons["n"] == "expected integer, got boolean true"


def test_on_type_mismatch_fail_refuses_the_batch() -> None:
    schema = arrow_schema({"properties": {"n": {"type": "integer"}}})
    with pytest.raises(TypeMismatch, match=r"field 'n'.*expected integer, got boolean true"):
        records_to_arrow([{"n": 1}, {"n": True}], schema, extracted_at_ms=0, sync_id="s", checkpoint=1,
                         counts=ConversionCounts(), on_type_mismatch="fail")
