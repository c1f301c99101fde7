"""Whatever an airbyte-cdk stream yields is handled: records land, messages go out, nothing drops.

The first test is the reported defect: a connector whose ``read_records`` yields
``AirbyteMessage`` records ended "ok" with an empty table and a STATE past every record.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable, Mapping, MutableMapping
from typing import Any

import pytest
from airbyte_cdk.models import (
    AirbyteErrorTraceMessage,
    AirbyteEstimateTraceMessage,
    AirbyteLogMessage,
    AirbyteMessage,
    AirbyteRecordMessage,
    AirbyteStateBlob,
    AirbyteStateMessage,
    AirbyteStateType,
    AirbyteStreamState,
    AirbyteTraceMessage,
    EstimateType,
    FailureType,
    Level,
    StreamDescriptor,
    TraceType,
    Type,
)
from airbyte_cdk.sources.streams import CheckpointMixin, IncrementalMixin, Stream
from airbyte_cdk.sources.types import Record
from airbyte_cdk.sources.utils.transform import TransformConfig, TypeTransformer

from unit_tests.conftest import sync

SCHEMA = {"type": "object", "properties": {"id": {"type": "integer"}, "n": {"type": "integer"}}}


def record_message(stream: str, data: Mapping[str, Any]) -> AirbyteMessage:
    return AirbyteMessage(type=Type.RECORD, record=AirbyteRecordMessage(stream=stream, data=dict(data), emitted_at=0))


class Numbers(Stream, IncrementalMixin):
    """A published-connector style stream: IncrementalMixin, state updated in read_records.
    ``items(value)`` says what to yield for each value; slices are lists of values."""

    primary_key = "id"
    cursor_field = "n"

    def __init__(self, slices: list[list[int]], items=None, name: str = "numbers") -> None:
        self._slices, self._items, self._name, self._n = slices, items or (lambda v: [{"id": v, "n": v}]), name, None

    @property
    def name(self) -> str:
        return self._name

    @property
    def state(self) -> MutableMapping[str, Any]:
        return {"n": self._n} if self._n is not None else {}

    @state.setter
    def state(self, value: Mapping[str, Any]) -> None:
        self._n = value.get("n")

    def get_json_schema(self) -> Mapping[str, Any]:
        return SCHEMA

    def stream_slices(self, **kwargs: Any) -> Iterable[Mapping[str, Any] | None]:
        return [{"index": i} for i in range(len(self._slices))]

    def read_records(self, sync_mode, cursor_field=None, stream_slice=None, stream_state=None):
        for value in self._slices[stream_slice["index"]]:
            self._n = max(self._n or 0, value)
            yield from self._items(value)


def landed(destination, name="numbers"):
    return [r["id"] for r in destination.sinks[name].landed]


def test_airbyte_message_records_land_in_the_table():
    stream = Numbers([[1, 2], [3]], items=lambda v: [record_message("numbers", {"id": v, "n": v})])
    result, out, destination = sync(stream)
    assert not result.failed
    assert landed(destination) == [1, 2, 3]
    assert result.streams[0].records == result.streams[0].committed == 3
    assert [s["stream"]["stream_state"] for s in out.states] == [{"n": 2}, {"n": 3}]


def test_cdk_record_objects_land_with_their_data():
    stream = Numbers([[1, 2]], items=lambda v: [Record({"id": v, "n": v}, "numbers")])
    result, _, destination = sync(stream)
    assert landed(destination) == [1, 2] and not result.failed
    assert all(type(r) is dict for r in destination.sinks["numbers"].landed)


def test_logs_and_trace_estimates_go_out_as_protocol_messages():
    def items(v):
        yield AirbyteMessage(type=Type.LOG, log=AirbyteLogMessage(level=Level.INFO, message=f"page {v}"))
        yield AirbyteTraceMessage(type=TraceType.ESTIMATE, emitted_at=1.0, estimate=AirbyteEstimateTraceMessage(
            name="numbers", type=EstimateType.STREAM, row_estimate=10))
        yield AirbyteLogMessage(level=Level.WARN, message="bare log")
        yield {"id": v, "n": v}

    result, out, destination = sync(Numbers([[1, 2]], items=items))
    assert landed(destination) == [1, 2] and not result.failed
    assert [m["log"]["message"] for m in out.of_type("LOG")] == ["page 1", "bare log", "page 2", "bare log"]
    estimates = out.of_type("TRACE", "ESTIMATE")
    assert len(estimates) == 2 and estimates[0]["trace"]["estimate"]["row_estimate"] == 10


def test_a_trace_error_fails_the_stream_with_its_message_and_type():
    def items(v):
        yield {"id": v, "n": v}
        if v == 2:
            yield AirbyteMessage(type=Type.TRACE, trace=AirbyteTraceMessage(
                type=TraceType.ERROR, emitted_at=1.0,
                error=AirbyteErrorTraceMessage(message="token expired", failure_type=FailureType.config_error)))

    result, out, _ = sync(Numbers([[1], [2], [3]], items=items))
    assert result.failed
    (error,) = out.of_type("TRACE", "ERROR")
    assert error["trace"]["error"]["message"] == "token expired"
    assert error["trace"]["error"]["failure_type"] == "config_error"
    assert [s["stream"]["stream_state"] for s in out.states] == [{"n": 1}]  # nothing after the error


def test_a_state_the_stream_yields_is_a_checkpoint_printed_after_its_commit():
    def items(v):
        yield {"id": v, "n": v}
        if v == 2:
            yield AirbyteMessage(type=Type.STATE, state=AirbyteStateMessage(
                type=AirbyteStateType.STREAM,
                stream=AirbyteStreamState(stream_descriptor=StreamDescriptor(name="numbers"),
                                          stream_state=AirbyteStateBlob({"n": 2, "page": "p2"}))))

    result, out, destination = sync(Numbers([[1, 2, 3]], items=items))
    states = [s["stream"]["stream_state"] for s in out.states]
    assert states == [{"n": 2, "page": "p2"}, {"n": 3}]
    log = destination.events.log
    assert log.index(("commit", {"n": 2, "page": "p2"})) < log.index(("STATE", {"n": 2, "page": "p2"}))


class OwnStateOnly(Numbers):
    """Keeps its state only in the STATE messages it yields (its state property never moves)."""

    @property
    def state(self) -> MutableMapping[str, Any]:
        return {}

    @state.setter
    def state(self, value: Mapping[str, Any]) -> None:
        pass

    def read_records(self, sync_mode, cursor_field=None, stream_slice=None, stream_state=None):
        for value in self._slices[stream_slice["index"]]:
            yield {"id": value, "n": value}
        yield AirbyteMessage(type=Type.STATE, state=AirbyteStateMessage(
            type=AirbyteStateType.STREAM,
            stream=AirbyteStreamState(stream_descriptor=StreamDescriptor(name="numbers"),
                                      stream_state=AirbyteStateBlob({"n": value}))))


def test_a_stream_that_keeps_its_state_in_yielded_states_never_goes_back():
    result, out, _ = sync(OwnStateOnly([[1, 2], [3]]))
    assert not result.failed
    assert [s["stream"]["stream_state"] for s in out.states] == [{"n": 2}, {"n": 3}]


@pytest.mark.parametrize(
    "item, words",
    [
        (42, "builtins.int"),
        (object(), "builtins.object"),
        (AirbyteRecordMessage(stream="numbers", data={"id": 9}, emitted_at=0), "AirbyteRecordMessage"),
        (record_message("other", {"id": 9}), "for stream 'other'"),
    ],
    ids=["int", "object", "bare-record-message", "other-stream"],
)
def test_an_item_the_runtime_does_not_know_stops_the_stream(item, words):
    def items(v):
        yield {"id": v, "n": v}
        if v == 2:
            yield item

    result, out, destination = sync(Numbers([[1], [2, 3]], items=items))
    assert result.failed and words in str(result.failed[0].error)
    assert landed(destination) == [1]  # committed before; the failed slice's records are not
    assert [s["stream"]["stream_state"] for s in out.states] == [{"n": 1}]
    assert out.of_type("TRACE", "ERROR")


def test_a_destination_that_loses_records_fails_the_stream_and_prints_no_state_for_them():
    result, out, destination = sync(Numbers([[1, 2, 3, 4]]), drop=3)  # the sink drops every 3rd record
    (stream,) = result.failed
    assert "4 records were handed" in str(stream.error) and "3 rows" in str(stream.error)
    assert out.states == []
    assert out.of_type("TRACE", "STREAM_STATUS")[-1]["trace"]["stream_status"]["status"] == "INCOMPLETE"


class Legacy(Stream):
    """The deprecated get_updated_state style: no state property, the CDK tracks the state."""

    primary_key = "id"
    cursor_field = "n"
    name = "numbers"

    def get_json_schema(self):
        return SCHEMA

    def get_updated_state(self, current_stream_state, latest_record):
        return {"n": max(current_stream_state.get("n", 0), latest_record["n"])}

    def stream_slices(self, **kwargs):
        return [{"values": [1, 5]}, {"values": [3, 7]}]

    def read_records(self, sync_mode, cursor_field=None, stream_slice=None, stream_state=None):
        for v in stream_slice["values"]:
            if v > (stream_state or {}).get("n", 0):
                yield {"id": v, "n": v}


def test_a_legacy_get_updated_state_stream_checkpoints_its_tracked_state():
    result, out, destination = sync(Legacy())
    assert landed(destination) == [1, 5, 3, 7]
    assert [s["stream"]["stream_state"] for s in out.states] == [{"n": 5}, {"n": 7}]
    result, out, destination = sync(Legacy(), input_state={"n": 5})
    assert landed(destination) == [7]


class Normalized(Numbers):
    transformer = TypeTransformer(TransformConfig.DefaultSchemaNormalization)


def test_the_streams_type_transformer_applies_as_in_airbyte_cdk():
    stream = Normalized([[1]], items=lambda v: [{"id": str(v), "n": v}])
    result, _, destination = sync(stream)
    assert destination.sinks["numbers"].landed == [{"id": 1, "n": 1}]


class OddState(Numbers):
    """A state holding a set (nothing serialises it) or a datetime (airbyte-cdk writes ISO text)."""

    value: Any = None

    @property
    def state(self) -> MutableMapping[str, Any]:
        return {"n": self.value} if self._n else {}

    @state.setter
    def state(self, value):
        pass


def test_a_state_that_is_not_json_gets_a_clear_error():
    stream = OddState([[1]])
    stream.value = {1, 2}
    result, out, _ = sync(stream)
    error = str(result.failed[0].error)
    assert "not JSON-serialisable" in error and "state.n is a builtins.set" in error
    assert out.states == []


def test_a_datetime_in_a_state_is_printed_as_airbyte_cdk_prints_it():
    stream = OddState([[1]])
    stream.value = dt.datetime(2025, 1, 2, tzinfo=dt.UTC)
    result, out, _ = sync(stream)
    assert not result.failed
    assert [s["stream"]["stream_state"] for s in out.states] == [{"n": "2025-01-02T00:00:00+00:00"}]


class Checkpointed(Stream, CheckpointMixin):
    primary_key = "id"
    cursor_field = "n"
    name = "numbers"
    state_checkpoint_interval = 2

    def __init__(self):
        self._state: dict = {}

    @property
    def state(self):
        return self._state

    @state.setter
    def state(self, value):
        self._state = dict(value)

    def get_json_schema(self):
        return SCHEMA

    def read_records(self, sync_mode, cursor_field=None, stream_slice=None, stream_state=None):
        for v in range(1, 6):
            yield {"id": v, "n": v}
            self._state = {"n": v}  # after the yield: the state lags one record, as in some connectors


def test_a_state_that_lags_its_records_is_not_checkpointed_until_it_covers_them():
    result, out, destination = sync(Checkpointed())
    assert landed(destination) == [1, 2, 3, 4, 5]
    # At records 2 and 4 the state still says 1 and 3: committing records 2 and 4 under it would
    # have a resumed run read them again. They wait for the first state that covers them.
    assert [s["stream"]["stream_state"] for s in out.states] == [{"n": 5}]
    assert {state["n"] for kind, state in destination.events.log if kind == "commit"} == {5}  # no commit under a lagging state


class Caught(Checkpointed):
    """The same stream, its state set before each yield: every interval checkpoint is taken."""

    def read_records(self, sync_mode, cursor_field=None, stream_slice=None, stream_state=None):
        for v in range(1, 6):
            self._state = {"n": v}
            yield {"id": v, "n": v}


def test_checkpoint_mixin_with_the_default_single_slice_and_an_interval():
    result, out, destination = sync(Caught())
    assert landed(destination) == [1, 2, 3, 4, 5]
    assert [s["stream"]["stream_state"] for s in out.states] == [{"n": 2}, {"n": 4}, {"n": 5}]


class NoSchema(Numbers):
    def get_json_schema(self):
        raise OSError("Cannot find file schemas/broken.json")


def test_a_stream_that_cannot_start_fails_alone_and_the_next_stream_runs():
    from source_framework.runtime.output import ProtocolOutput
    from source_framework.runtime.read import read_streams
    from source_framework.runtime.stream_adapters import adapt
    from unit_tests.conftest import EventOutput, RecordingDestination, catalog_of, configured

    broken, fine = NoSchema([[1]], name="broken"), Numbers([[1, 2]], name="fine")
    catalog = catalog_of(configured("broken"), configured("fine"))
    adapters = {s.name: adapt(s, entry) for s, entry in zip((broken, fine), catalog.streams, strict=True)}
    destination = RecordingDestination()
    out = EventOutput(destination.events)
    result = read_streams(adapters, catalog, {}, destination, ProtocolOutput(out))
    assert [s.name for s in result.failed] == ["broken"]
    assert "has no JSON schema" in str(result.failed[0].error) and "get_json_schema()" in str(result.failed[0].error)
    assert landed(destination, "fine") == [1, 2]
    statuses = [(m["trace"]["stream_status"]["stream_descriptor"]["name"], m["trace"]["stream_status"]["status"])
                for m in out.of_type("TRACE", "STREAM_STATUS")]
    assert ("broken", "INCOMPLETE") in statuses and ("fine", "COMPLETE") in statuses
