"""``read --state-file``: what one run writes, the next run reads back (issue 11: a 9.5 MB state
became a 16.7 MB indented file, which the next run refused as over the 10 MB limit).

The size limit is one rule on both sides: per stream, on the compact JSON of its state. The
output side is ``read``'s own check before a STATE line (``runtime.state_checks``), run here through
``read_streams`` over an in-memory stream (``unit_tests.conftest.sync``).
"""

from __future__ import annotations

import json
import re

import orjson
import pytest

from source_framework.runtime.inputs import MAX_STATE_BYTES, InputError, load_state
from source_framework.runtime.state_file import StateFile
from unit_tests.conftest import CursorStream, sync


def partitioned_state(partitions: int) -> dict:
    """A substream's state: one cursor per parent, the shape that grows most when indented."""
    return {"states": [{"partition": {"store_id": i}, "cursor": {"updatedAt": "2025-06-01T00:00:00Z"}} for i in range(partitions)]}


def test_a_large_state_written_by_one_run_is_read_by_the_next(tmp_path):
    """9.5 MB as a STATE line, over 10 MB once indented (as the file used to be written)."""
    state = {"updatedAt": "2025-06-01T00:00:00Z", "ids_at_cursor": list(range(1_000_000, 2_250_000))}
    assert 9.5 * 2**20 < len(orjson.dumps(state)) < MAX_STATE_BYTES < len(orjson.dumps(state, option=orjson.OPT_INDENT_2))
    path = str(tmp_path / "state.json")
    StateFile(path).update("users", None, state)
    assert StateFile(path).states == {"users": state}


def test_the_state_file_costs_no_more_than_the_compact_states(tmp_path):
    states = {"store_orders": partitioned_state(2_000), "users": {"updatedAt": "2025-06-01T00:00:00Z"}}
    path = tmp_path / "state.json"
    state_file = StateFile(str(path))
    for name, state in states.items():
        state_file.update(name, "shop", state)
    envelope = len(b'{"type":"STREAM","stream":{"stream_descriptor":{"name":"","namespace":"shop"},"stream_state":}},')
    compact = sum(len(orjson.dumps(state)) + len(name) + envelope for name, state in states.items())
    assert path.stat().st_size <= compact + len("[]\n")
    assert json.loads(path.read_text()) == [
        {"type": "STREAM", "stream": {"stream_descriptor": {"name": name, "namespace": "shop"}, "stream_state": states[name]}}
        for name in sorted(states)
    ]


def test_several_streams_each_under_the_limit_make_a_file_the_next_run_reads(tmp_path):
    path = str(tmp_path / "state.json")
    state_file = StateFile(path)
    big = {"updatedAt": "x" * (6 * 2**20)}
    state_file.update("users", None, big)
    state_file.update("orders", None, big)
    assert StateFile(path).states == {"users": big, "orders": big}


def state_of_size(compact_bytes: int) -> dict:
    """A state of ``compact_bytes`` as compact JSON: a string cursor ``CursorStream`` keeps whole."""
    return {"n": "x" * (compact_bytes - len('{"n":""}'))}


@pytest.mark.parametrize("size, accepted", [(MAX_STATE_BYTES, True), (MAX_STATE_BYTES + 1, False)])
def test_read_emits_exactly_the_states_the_next_run_accepts(tmp_path, size, accepted):
    state = state_of_size(size)
    result, out, _ = sync(CursorStream([[state["n"]]], name="texts"))
    emitted = [message["stream"]["stream_state"] for message in out.states]
    assert emitted == ([state] if accepted else [])

    path = str(tmp_path / "state.json")
    StateFile(path).update("texts", None, state)  # as --state-file does after each STATE (or a user's edit)
    if accepted:
        assert not result.failed
        assert load_state(path) == {"texts": state}
    else:
        assert "10 MB" in str(result.failed[0].error)
        refusal = f"state file '{path}': the state of stream 'texts' is 10.5 MB, over the 10 MB limit"
        with pytest.raises(InputError, match=re.escape(refusal)):
            load_state(path)


# -- issue 49, item 7: each STATE costs its own stream's state, not the whole file's ---------------------------


def test_a_state_is_saved_without_parsing_the_file_again(tmp_path, monkeypatch):
    """Every STATE used to parse the whole file back (10,000 times per million records at interval
    100), on top of writing it: with a large partitioned stream in the file, quadratic."""
    from source_framework.runtime import state_file as module

    path = str(tmp_path / "state.json")
    StateFile(path).update("store_orders", None, partitioned_state(2_000))
    state_file = StateFile(path)
    parses = []
    monkeypatch.setattr(module, "load_state", lambda *args: parses.append(args) or load_state(*args))
    for second in range(50):
        state_file.update("users", None, {"updatedAt": f"2025-06-01T00:00:{second:02d}Z"})
        assert load_state(path) == {"store_orders": partitioned_state(2_000), "users": {"updatedAt": f"2025-06-01T00:00:{second:02d}Z"}}
    assert parses == []


def test_another_commands_change_is_kept_by_the_next_save(tmp_path):
    """What the file held is remembered, not trusted: a file another command wrote since is read again."""
    path = str(tmp_path / "state.json")
    reading = StateFile(path)
    reading.update("users", None, {"updatedAt": "2025-06-01T00:00:00Z"})
    reading.update("orders", None, {"updatedAt": "2025-06-01T00:00:00Z"})
    operator = StateFile(path)  # a 'state reset --stream orders' meanwhile
    operator.remove("orders")
    operator.save()
    reading.update("users", None, {"updatedAt": "2025-06-02T00:00:00Z"})
    assert load_state(path) == {"users": {"updatedAt": "2025-06-02T00:00:00Z"}}
    reading.update("orders", None, {"updatedAt": "2025-06-03T00:00:00Z"})  # a later STATE of its own counts
    assert load_state(path)["orders"] == {"updatedAt": "2025-06-03T00:00:00Z"}
