"""Whatever an airbyte-cdk stream yields is handled: records land, messages go out, nothing drops.

The first test is the reported defect: a connector whose ``read_records`` yields
``AirbyteMessage`` records ended "ok" with an empty table and a STATE past every record.
"""

from __future__ import annotations

import datetime as dt
import logging
import pickle
from collections.abc import Iterable, Mapping, MutableMapping
from typing import Any

import orjson
import pytest
from airbyte_cdk.models import (
    AirbyteErrorTraceMessage,
    AirbyteEstimateTraceMessage,
    AirbyteLogMessage,
    AirbyteMessage,
    AirbyteMessageSerializer,
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
from airbyte_cdk.sources.concurrent_source.concurrent_source import ConcurrentSource
from airbyte_cdk.sources.concurrent_source.concurrent_source_adapter import ConcurrentSourceAdapter
from airbyte_cdk.sources.connector_state_manager import ConnectorStateManager
from airbyte_cdk.sources.message import InMemoryMessageRepository
from airbyte_cdk.sources.streams import CheckpointMixin, IncrementalMixin, Stream
from airbyte_cdk.sources.streams.concurrent.adapters import StreamFacade
from airbyte_cdk.sources.streams.concurrent.cursor import ConcurrentCursor, CursorField
from airbyte_cdk.sources.streams.concurrent.state_converters.incrementing_count_stream_state_converter import (
    IncrementingCountStreamStateConverter,
)
from airbyte_cdk.sources.types import Record, StreamSlice
from airbyte_cdk.sources.utils.transform import TransformConfig, TypeTransformer
from hypothesis import given
from hypothesis import strategies as st

from source_framework.runtime.output import ProtocolOutput, to_json
from source_framework.runtime.read import read_streams
from source_framework.runtime.state_checks import json_problem, json_state
from source_framework.runtime.stream_adapter_base import StateNotApplicable
from source_framework.runtime.stream_adapters import MessageDrain, adapt
from unit_tests.conftest import EventOutput, RecordingDestination, catalog_of, configured, sync, threads_switching_often

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


STATE_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**70), 2**70) | st.floats() | st.text(max_size=4)
    | st.datetimes(timezones=st.just(dt.UTC)),
    lambda children: st.lists(children, max_size=3) | st.dictionaries(st.text(max_size=3), children, max_size=3),
    max_leaves=8,
)


@given(st.dictionaries(st.text(max_size=4), STATE_VALUES, max_size=4))
def test_a_states_json_is_written_once_and_is_what_its_copy_prints(state):
    """The runtime checks and measures a state by the JSON its copy was made through, instead of
    walking and writing the copy again: that JSON must be the copy's STATE line text, and the copy
    must hold nothing JSON cannot carry."""
    copied, encoded = json_state(state)
    if encoded is None:  # orjson refused it (an integer beyond 64 bits): checked the slow way
        return
    assert to_json(copied) == encoded and json_problem(copied) is None


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


# -- records placed by the message, not by the stream --------------------------------------------


class Shop(Numbers):
    namespace = "shop"


def namespaced_record(namespace, value):
    message = record_message("numbers", {"id": value, "n": value})
    message.record.namespace = namespace
    return message


@pytest.mark.parametrize(
    "stream_class, namespace",
    [(Numbers, "shop"), (Shop, "other")],
    ids=["stream-without-namespace", "stream-in-another-namespace"],
)
def test_a_record_message_naming_another_namespace_is_refused(stream_class, namespace):
    def items(v):
        yield {"id": v, "n": v}
        if v == 2:
            yield namespaced_record(namespace, 9)

    result, out, destination = sync(stream_class([[1], [2, 3]], items=items))
    error = str(result.failed[0].error)
    assert "yielded a RECORD message for stream 'numbers' in namespace" in error and f"'{namespace}'" in error
    assert ("(namespace 'shop')" if stream_class is Shop else "(no namespace)") in error
    assert landed(destination) == [1]
    assert out.of_type("TRACE", "ERROR")


def test_a_record_message_with_the_streams_namespace_or_none_lands():
    result, _, destination = sync(Shop([[1, 2]], items=lambda v: [namespaced_record("shop" if v == 1 else None, v)]))
    assert not result.failed and landed(destination) == [1, 2]


# -- the cached-JSON messages of source-faker --------------------------------------------------------


class AirbyteMessageWithCachedJSON(AirbyteMessage):
    """In the style of source-faker's class of that name (not in airbyte-cdk itself): the message
    renders its JSON once, where it is built (a pool worker), and hands that out afterwards."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._json = orjson.dumps(AirbyteMessageSerializer.dump(self)).decode()

    def to_json(self) -> str:
        return self._json


def test_cached_json_record_and_log_messages_are_handled_as_their_base_class():
    def items(v):
        # built in a worker process and sent back: pickled on the way
        yield pickle.loads(pickle.dumps(AirbyteMessageWithCachedJSON(
            type=Type.LOG, log=AirbyteLogMessage(level=Level.INFO, message=f"built {v}"))))
        yield pickle.loads(pickle.dumps(AirbyteMessageWithCachedJSON(
            type=Type.RECORD, record=AirbyteRecordMessage(stream="numbers", data={"id": v, "n": v}, emitted_at=0))))

    result, out, destination = sync(Numbers([[1, 2], [3]], items=items))
    assert not result.failed
    assert landed(destination) == [1, 2, 3]
    assert [m["log"]["message"] for m in out.of_type("LOG")] == ["built 1", "built 2", "built 3"]
    assert [s["stream"]["stream_state"] for s in out.states] == [{"n": 2}, {"n": 3}]


# -- a cursor field the records lack -------------------------------------------------------------


class UsesCursorKey(Numbers):
    """An IncrementalMixin stream whose read_records reads record[cursor_field], as the CDK's
    tutorial does: it dies with KeyError on a record without the field."""

    def read_records(self, sync_mode, cursor_field=None, stream_slice=None, stream_state=None):
        for value in self._slices[stream_slice["index"]]:
            record = {"id": value} if value == 3 else {"id": value, "n": value}
            self._n = max(self._n or 0, record[self.cursor_field])
            yield record


class LegacyWithoutCursor(Legacy):
    def read_records(self, sync_mode, cursor_field=None, stream_slice=None, stream_state=None):
        for v in stream_slice["values"]:
            yield {"id": v} if v == 3 else {"id": v, "n": v}


class StrictSetter(Numbers):
    @property
    def state(self) -> MutableMapping[str, Any]:
        return {"n": self._n}

    @state.setter
    def state(self, value: Mapping[str, Any]) -> None:
        self._n = value["n"]


@pytest.mark.parametrize(
    "stream, where, lacking",
    [
        (UsesCursorKey([[1, 2], [3]]), "read_records()", "the records lack the declared cursor field 'n'"),
        (LegacyWithoutCursor(), "get_updated_state()", "the records lack the declared cursor field 'n'"),
        (StrictSetter([[1]]), "state setter", "lacks the declared cursor field 'n'"),
    ],
    ids=["read_records", "get_updated_state", "state-setter"],
)
def test_a_key_error_of_the_cursor_field_says_the_field_is_missing(stream, where, lacking):
    result, out, _ = sync(stream)
    (failed,) = result.failed
    error = failed.error
    assert where in str(error) and lacking in str(error) and "KeyError('n')" in str(error)
    assert isinstance(error.__cause__, KeyError)  # the original is kept
    (trace,) = out.of_type("TRACE", "ERROR")
    assert lacking in trace["trace"]["error"]["message"]
    assert "KeyError: 'n'" in trace["trace"]["error"]["stack_trace"]


def test_records_without_any_cursor_value_complete_with_one_warning(caplog):
    stream = Numbers([[1, 2], [3], [4]], items=lambda v: [{"id": v}] if v < 4 else [{"id": v, "n": v}])
    with caplog.at_level("WARNING", logger="source_framework.read"):
        result, _, destination = sync(stream)
    assert not result.failed  # airbyte-cdk completes such a sync: so do we
    assert landed(destination) == [1, 2, 3, 4]
    warnings = [r.getMessage() for r in caplog.records if "cursor field" in r.getMessage()]
    assert len(warnings) == 1
    assert "cursor field 'n'" in warnings[0] and "none of the 2 records" in warnings[0]


def test_records_with_a_cursor_value_give_no_warning(caplog):
    with caplog.at_level("WARNING", logger="source_framework.read"):
        result, _, _ = sync(Numbers([[1, 2], [3]], items=lambda v: [{"id": v}] if v == 2 else [{"id": v, "n": v}]))
    assert not result.failed
    assert not [r for r in caplog.records if "cursor field" in r.getMessage()]


# -- a ConcurrentSourceAdapter source: StreamFacades over DefaultStreams -------------------------


class Windows(Stream):
    """Numbers 1..9 in windows of three (``start``/``end`` slice keys) from the state's ``n`` on."""

    primary_key = "id"
    cursor_field = "n"
    name = "numbers"

    def get_json_schema(self) -> Mapping[str, Any]:
        return SCHEMA

    def stream_slices(self, sync_mode=None, cursor_field=None, stream_state=None):
        for low in range((stream_state or {}).get("n", 0), 9, 3):
            yield StreamSlice(partition={}, cursor_slice={"start": low, "end": min(low + 3, 9)})

    def read_records(self, sync_mode, cursor_field=None, stream_slice=None, stream_state=None):
        for value in range(stream_slice["start"] + 1, stream_slice["end"] + 1):
            yield {"id": value, "n": value}


class NumbersBySlices(ConcurrentSourceAdapter):
    """The style of source-stripe: built with the state, its streams() builds a state manager from
    it and wraps the stream in a StreamFacade with a ConcurrentCursor. ``asks_manager=False``: a
    source that reads the stream's state from what it was given instead."""

    def __init__(self, state: list[AirbyteStateMessage] | None, asks_manager: bool = True) -> None:
        self._repository = InMemoryMessageRepository()
        super().__init__(ConcurrentSource.create(1, 1, logging.getLogger("test"), self._slice_logger, self._repository))
        self._state, self._asks_manager = state, asks_manager

    @property
    def message_repository(self) -> InMemoryMessageRepository:
        return self._repository

    def check_connection(self, logger, config):
        return True, None

    def streams(self, config):
        manager = ConnectorStateManager(state=self._state)
        stream = Windows()
        given = {s.stream.stream_descriptor.name: s.stream.stream_state.__dict__ for s in self._state or []}
        state = manager.get_stream_state("numbers", None) if self._asks_manager else dict(given.get("numbers", {}))
        converter = IncrementingCountStreamStateConverter()
        cursor = ConcurrentCursor("numbers", None, state, self._repository, manager, converter, CursorField("n"),
                                  ("start", "end"), 0, converter.get_end_provider())
        return [StreamFacade.create_from_stream(stream, self, logging.getLogger("test"), state, cursor)]


def state_message(value: Mapping[str, Any]) -> AirbyteStateMessage:
    return AirbyteStateMessage(type=AirbyteStateType.STREAM, stream=AirbyteStreamState(
        stream_descriptor=StreamDescriptor(name="numbers"), stream_state=AirbyteStateBlob(dict(value))))


def facade_sync(source: NumbersBySlices, start: Mapping[str, Any]):
    from source_framework.runtime.cdk_stream_state import state_setter

    (facade,) = source.streams({})
    set_state = state_setter(source, {})
    adapter = adapt(facade, configured("numbers"), lambda state: set_state("numbers", None, state), built_with=start)
    destination = RecordingDestination()
    out = EventOutput(destination.events)
    output = ProtocolOutput(out)
    result = read_streams({"numbers": adapter}, catalog_of(configured("numbers")), {"numbers": dict(start)} if start else {},
                          destination, output, side_messages=MessageDrain(source))
    return result, out, destination


def test_a_stream_facade_is_read_through_its_default_stream_and_its_concurrent_cursor():
    result, out, destination = facade_sync(NumbersBySlices(None), {})
    assert not result.failed
    assert landed(destination) == list(range(1, 10))
    assert [s["stream"]["stream_state"] for s in out.states] == [{"n": 3}, {"n": 6}, {"n": 9}]


def test_a_stream_facade_takes_the_state_the_sync_starts_from_through_its_state_manager():
    from source_framework.runtime.cdk_stream_state import state_setter

    source = NumbersBySlices([state_message({"n": 3})])  # built with one state, as its run.py does
    stream = state_setter(source, {})("numbers", None, {"n": 6})  # the runtime starts from another
    assert [p.to_slice()["start"] for p in stream.generate_partitions()] == [6]
    result, _, destination = facade_sync(NumbersBySlices([state_message({"n": 6})]), {"n": 6})
    assert landed(destination) == [7, 8, 9] and not result.failed


def test_a_facade_source_that_does_not_ask_its_state_manager_runs_only_from_the_state_it_was_built_with():
    from source_framework.runtime.cdk_stream_state import state_setter

    source = NumbersBySlices([state_message({"n": 3})], asks_manager=False)
    with pytest.raises(StateNotApplicable, match="did not ask a ConnectorStateManager"):
        state_setter(source, {})("numbers", None, {"n": 6})
    result, _, destination = facade_sync(source, {"n": 3})  # the state it was built with: it runs
    assert landed(destination) == [4, 5, 6, 7, 8, 9] and not result.failed


def test_streams_synced_at_once_drain_side_messages_together_without_a_race():
    """Streams synced at once each drain the source's message repository from their own thread;
    airbyte-cdk's in-memory repository pops ``while deque: deque.popleft()``, so two drains raced
    and one stream failed with "pop from an empty deque" (found in review; an interpreter switching
    threads every microsecond makes the race show within a second)."""
    import threading
    import time

    from airbyte_cdk.models import AirbyteLogMessage, Level
    from airbyte_cdk.sources.message import InMemoryMessageRepository

    class Source:
        message_repository = InMemoryMessageRepository()

    drain = MessageDrain(Source())
    message = AirbyteMessage(type=Type.LOG, log=AirbyteLogMessage(level=Level.INFO, message="x"))
    emitted, drained, errors = [0], [0, 0], []
    stop = threading.Event()

    def emit():
        while not stop.is_set():
            Source.message_repository.emit_message(message)
            emitted[0] += 1

    def take(slot):
        while not stop.is_set():
            try:
                drained[slot] += sum(1 for _ in drain())
            except Exception as error:
                errors.append(error)
                stop.set()

    with threads_switching_often():
        threads = [threading.Thread(target=emit), threading.Thread(target=take, args=(0,)), threading.Thread(target=take, args=(1,))]
        for thread in threads:
            thread.start()
        time.sleep(2)
        stop.set()
        for thread in threads:
            thread.join()
    assert errors == []
    assert sum(drained) + sum(1 for _ in drain()) == emitted[0]  # each message taken once


class RepositorySource:
    """What ``MessageDrain`` looks at: a source's message repository (airbyte-cdk components emit
    into it outside the records a stream yields)."""

    def __init__(self) -> None:
        self.message_repository = InMemoryMessageRepository()


def side_trace_error(text: str) -> AirbyteMessage:
    return AirbyteMessage(type=Type.TRACE, trace=AirbyteTraceMessage(
        type=TraceType.ERROR, emitted_at=0, error=AirbyteErrorTraceMessage(message=text, failure_type=FailureType.system_error)))


def test_a_trace_error_a_component_emits_is_passed_on_as_airbyte_cdk_does_and_fails_no_stream():
    """airbyte-cdk prints a TRACE ERROR a component puts in the message repository and reads on
    (its job orchestrator reports a failed job this way, then retries it). Taken as the failure of
    whichever stream drained it, it failed a healthy stream synced at the same time (found in
    review: store_orders ended INCOMPLETE with another stream's error)."""
    source = RepositorySource()

    def items(value):
        if value == 2:
            source.message_repository.emit_message(side_trace_error("job 7 failed; retrying"))
        yield {"id": value, "n": value}

    result, out, destination = sync(Numbers([[1, 2], [3]], items=items), source=source)
    assert not result.failed
    assert landed(destination) == [1, 2, 3]
    assert [t["trace"]["error"]["message"] for t in out.of_type("TRACE", "ERROR")] == ["job 7 failed; retrying"]


def test_what_components_emit_just_before_the_last_stream_fails_is_still_printed():
    """Nothing drained the repository after a stream failed, so a component's last words (a LOG
    saying why) were never printed, where airbyte-cdk prints them (found in review)."""
    source = RepositorySource()

    def items(value):
        source.message_repository.emit_message(
            AirbyteMessage(type=Type.LOG, log=AirbyteLogMessage(level=Level.WARN, message="quota exhausted for today")))
        raise RuntimeError("429")
        yield  # a generator

    result, out, _ = sync(Numbers([[1]], items=items), source=source)
    assert result.failed
    assert "quota exhausted for today" in [m["log"]["message"] for m in out.of_type("LOG")]
