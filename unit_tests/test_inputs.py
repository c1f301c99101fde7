"""Reading config, catalog and state files: the accepted shapes and the errors for bad ones."""

from __future__ import annotations

import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from source_framework.runtime.inputs import (
    MAX_STATE_BYTES,
    InputError,
    compact_state_size,
    load_catalog,
    load_config,
    load_state,
)
from source_framework.runtime.state_file import StateFile


def write(tmp_path, name, content):
    path = tmp_path / name
    path.write_text(content if isinstance(content, str) else json.dumps(content))
    return str(path)


def test_per_stream_state_list_as_printed_by_read(tmp_path):
    state = [
        {"type": "STREAM", "stream": {"stream_descriptor": {"name": "users"}, "stream_state": {"updatedAt": "2025-01-01T00:00:00Z"}}},
        {"type": "STATE", "state": {"type": "STREAM",
                                    "stream": {"stream_descriptor": {"name": "orders"}, "stream_state": {"updatedAt": "x"}}}},
    ]
    assert load_state(write(tmp_path, "s.json", state)) == {
        "users": {"updatedAt": "2025-01-01T00:00:00Z"},
        "orders": {"updatedAt": "x"},
    }


def test_legacy_dict_state(tmp_path):
    assert load_state(write(tmp_path, "s.json", {"users": {"updatedAt": "a"}})) == {"users": {"updatedAt": "a"}}


def test_singer_bookmarks_with_and_without_partitions(tmp_path):
    singer = {
        "bookmarks": {
            "users": {"replication_key": "updatedAt", "replication_key_value": "2025-02-01T00:00:00Z"},
            "store_orders": {
                "partitions": [
                    {"context": {"store_id": 1}, "replication_key": "updatedAt", "replication_key_value": "2025-03-01T00:00:00Z"}
                ]
            },
        }
    }
    assert load_state(write(tmp_path, "s.json", singer)) == {
        "users": {"updatedAt": "2025-02-01T00:00:00Z"},
        "store_orders": {"states": [{"partition": {"store_id": 1}, "cursor": {"updatedAt": "2025-03-01T00:00:00Z"}}]},
    }


def test_empty_state_files_mean_no_state(tmp_path):
    assert load_state(None) == {}
    assert load_state(write(tmp_path, "a.json", [])) == {}
    assert load_state(write(tmp_path, "b.json", {})) == {}


@pytest.mark.parametrize(
    "content, message",
    [
        ("{not json", "is not valid JSON"),
        ('"a string"', "must hold a list"),
        ('{"users": 5}', "state of stream 'users' must be a JSON object"),
        ('[{"type": "STREAM", "stream": {}}]', "stream_descriptor"),
        ('{"bookmarks": {"users": {"partitions": [{"replication_key": "u"}]}}}', "context"),
        # Valid JSON of a wrong shape inside a known form: each names the file, none is a traceback.
        ('{"type": "GLOBAL", "global": {"stream_states": [1]}}', "stream_states"),
        ('{"type": "GLOBAL", "global": {"stream_states": 5}}', "stream_states"),
        ('{"type": "GLOBAL", "global": []}', "global"),
        ('[{"type": "GLOBAL", "global": {"stream_states": [{"stream_descriptor": "users"}]}}]', "stream_descriptor"),
        ('[{"type": "GLOBAL", "global": {"stream_states": [{"stream_descriptor": {"name": "u"}, "stream_state": 3}]}}]',
         "stream_state of 'u' must be an object"),
        ('{"type": "LEGACY", "data": {"users": 5}}', "state of stream 'users' must be a JSON object"),
        ('{"bookmarks": {"users": {"partitions": 5}}}', "partitions of stream 'users' must be a list"),
        ('{"bookmarks": {"users": {"replication_key": ["a"], "replication_key_value": 1}}}', "replication_key"),
        ('{"bookmarks": {"s": {"partitions": [{"context": {}, "replication_key": {}, "replication_key_value": 1}]}}}',
         "replication_key"),
    ],
)
def test_bad_state_files_name_the_file_and_the_problem(tmp_path, content, message):
    path = write(tmp_path, "state.json", content)
    with pytest.raises(InputError, match=message) as error:
        load_state(path)
    assert path in str(error.value)


any_json = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=3),
    lambda children: st.lists(children, max_size=2) | st.dictionaries(st.text(max_size=3), children, max_size=2),
    max_leaves=6,
)


def _shaped(**fields):
    """An object with these fields, or, as often, anything at all in its place."""
    return any_json | st.fixed_dictionaries(fields)


_descriptor = _shaped(name=any_json | st.text(max_size=3))
_stream_entry = _shaped(stream_descriptor=_descriptor, stream_state=any_json)
_message = (
    st.fixed_dictionaries({"type": st.just("GLOBAL"), "global": _shaped(stream_states=any_json | st.lists(_stream_entry, max_size=2))})
    | st.fixed_dictionaries({"type": st.just("STREAM"), "stream": _stream_entry})
    | st.fixed_dictionaries({"type": st.just("LEGACY"), "data": any_json | st.dictionaries(st.text(max_size=3), any_json, max_size=2)})
)
_partition = _shaped(context=any_json, replication_key=any_json, replication_key_value=any_json)
_bookmark = _shaped(partitions=any_json | st.lists(_partition, max_size=2)) | _shaped(
    replication_key=any_json, replication_key_value=any_json
)
state_files = (
    any_json
    | _message
    | st.lists(_message | st.fixed_dictionaries({"type": st.just("STATE"), "state": _message}), max_size=3)
    | st.fixed_dictionaries({"bookmarks": any_json | st.dictionaries(st.text(max_size=3), _bookmark, max_size=2)})
    | st.dictionaries(st.text(max_size=3), any_json, max_size=3)
)


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(content=state_files)
def test_any_json_state_file_is_read_or_refused_naming_the_file(tmp_path, content):
    """Whatever JSON a state file holds, ``load_state`` gives ``{stream: object}`` or an
    ``InputError`` naming the file: never a traceback."""
    path = write(tmp_path, "state.json", content)
    try:
        states = load_state(path)
    except InputError as error:
        assert path in str(error)
        return
    assert all(isinstance(name, str) and isinstance(state, dict) for name, state in states.items())


def test_state_over_the_size_limit_is_refused(tmp_path):
    path = tmp_path / "big.json"
    path.write_text(json.dumps({"users": {"updatedAt": "x" * (11 * 1024 * 1024)}}))
    with pytest.raises(InputError, match="over the 10 MB limit"):
        load_state(str(path))


def test_missing_and_malformed_config(tmp_path):
    with pytest.raises(InputError, match="does not exist"):
        load_config(str(tmp_path / "nope.json"))
    with pytest.raises(InputError, match="is not valid JSON"):
        load_config(write(tmp_path, "c.json", "{'single': 'quotes'}"))
    with pytest.raises(InputError, match="JSON object"):
        load_config(write(tmp_path, "c2.json", "[1, 2]"))


def test_catalog_shapes(tmp_path):
    good = {
        "streams": [
            {
                "stream": {"name": "users", "json_schema": {}, "supported_sync_modes": ["incremental"]},
                "sync_mode": "incremental",
                "destination_sync_mode": "append",
            }
        ]
    }
    assert load_catalog(write(tmp_path, "k.json", good)).streams[0].stream.name == "users"
    with pytest.raises(InputError, match="'streams' list"):
        load_catalog(write(tmp_path, "k1.json", {"stream": []}))
    with pytest.raises(InputError, match="no 'destination_sync_mode'"):
        load_catalog(write(tmp_path, "k2.json", {"streams": [{"stream": {"name": "u"}, "sync_mode": "incremental"}]}))
    bad_mode = json.loads(json.dumps(good))
    bad_mode["streams"][0]["sync_mode"] = "sometimes"
    with pytest.raises(InputError, match="not a valid configured catalog"):
        load_catalog(write(tmp_path, "k3.json", bad_mode))
    twice = {"streams": [good["streams"][0], {**good["streams"][0], "destination_sync_mode": "overwrite"}]}
    with pytest.raises(InputError, match=r"k4.json': stream 'users' is selected twice \(streams\[0\] and streams\[1\]\)"):
        load_catalog(write(tmp_path, "k4.json", twice))


def test_discovers_output_given_as_the_catalog_says_what_read_takes_instead(tmp_path):
    """Fed discover's output, read said "streams[0] must be an object with a 'stream' object" and
    nothing more (issue 51)."""
    discovered = {"streams": [{"name": "users", "json_schema": {}, "supported_sync_modes": ["incremental"]}]}
    with pytest.raises(InputError, match=r"looks like discover's output.*configured catalog.*\"sync_mode\""):
        load_catalog(write(tmp_path, "d.json", discovered))
    with pytest.raises(InputError, match=r"holds a CATALOG message; this looks like discover's output"):
        load_catalog(write(tmp_path, "m.json", {"type": "CATALOG", "catalog": discovered}))
    with pytest.raises(InputError, match=r"'stream' object$"):  # not discover's shape: no hint
        load_catalog(write(tmp_path, "o.json", {"streams": [{"nom": "users"}]}))


# -- the size limit: per stream, on the compact JSON of its state (issue 11) --------------------


def cursor_state(compact_bytes):
    """``{"n": "xx..."}`` whose compact JSON (what a STATE line carries) is exactly ``compact_bytes`` long."""
    state = {"n": "x" * (compact_bytes - len('{"n":""}'))}
    assert len(json.dumps(state, separators=(",", ":"))) == compact_bytes
    return state


def in_each_form(states):
    """The same ``{stream: state}`` as a per-stream list, a legacy dict and Singer bookmarks."""
    per_stream = [{"type": "STREAM", "stream": {"stream_descriptor": {"name": n}, "stream_state": s}} for n, s in states.items()]
    return {"per-stream": per_stream, "legacy": dict(states), "singer": {"bookmarks": dict(states)}}


@pytest.mark.parametrize("form", ["per-stream", "legacy", "singer"])
def test_a_state_file_over_10_mb_is_fine_when_each_stream_is_under_it(tmp_path, form):
    states = {"users": cursor_state(6 * 2**20), "orders": cursor_state(6 * 2**20)}
    path = write(tmp_path, "state.json", in_each_form(states)[form])
    assert (tmp_path / "state.json").stat().st_size > MAX_STATE_BYTES
    assert load_state(path) == states


@pytest.mark.parametrize("form", ["per-stream", "legacy", "singer"])
def test_one_stream_over_the_limit_is_refused_naming_the_file_and_the_stream(tmp_path, form):
    states = {"users": cursor_state(100), "orders": cursor_state(MAX_STATE_BYTES + 1)}
    path = write(tmp_path, "state.json", in_each_form(states)[form])
    with pytest.raises(InputError) as error:
        load_state(path)
    assert str(error.value) == f"state file '{path}': the state of stream 'orders' is 10.5 MB, over the 10 MB limit"


def test_the_limit_is_measured_on_the_compact_state_not_on_the_file(tmp_path):
    at_the_limit = {"users": cursor_state(MAX_STATE_BYTES)}
    path = tmp_path / "indented.json"
    path.write_text(json.dumps(at_the_limit, indent=8, ensure_ascii=True) + "\n" * 100)
    assert load_state(str(path)) == at_the_limit
    one_byte_more = {"users": cursor_state(MAX_STATE_BYTES + 1)}
    compact = write(tmp_path, "compact.json", json.dumps(one_byte_more, separators=(",", ":")))
    with pytest.raises(InputError, match="stream 'users' is 10.5 MB, over the 10 MB limit"):
        load_state(compact)


def test_non_ascii_state_is_measured_in_utf8_bytes_as_the_state_line_is(tmp_path):
    """"é" is 2 bytes in a STATE line (UTF-8) and 6 in an ASCII-escaped file ("\\u00e9"): the line decides."""
    state = {"users": {"n": "é" * ((MAX_STATE_BYTES - len('{"n":""}')) // 2)}}
    path = write(tmp_path, "state.json", json.dumps(state, ensure_ascii=True))
    assert (tmp_path / "state.json").stat().st_size > 2 * MAX_STATE_BYTES
    assert load_state(path) == state


# -- a lone surrogate: valid JSON ("\ud800"), not valid Unicode text (issue 11, item 14) -----------


LONE = {"n": "abc", "note": "\ud800 half of a pair", "tag": "é\udfff"}


def test_a_state_with_a_lone_surrogate_is_measured_as_its_state_line_carries_it():
    from source_framework.runtime.output import to_json

    assert compact_state_size(LONE) == len(to_json(LONE))


def test_a_state_with_a_lone_surrogate_is_saved_and_read_back_whole(tmp_path):
    path = str(tmp_path / "state.json")
    StateFile(path).update("texts", None, LONE)  # what --state-file does after the STATE line
    assert load_state(path) == {"texts": LONE}
    assert StateFile(path).states == {"texts": LONE}
    json.loads((tmp_path / "state.json").read_bytes().decode("utf-8"))  # a valid UTF-8 JSON file
