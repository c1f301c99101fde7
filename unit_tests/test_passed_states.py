"""The states of reclaimed checkpoint records, kept as digests (issue 49, item 5)."""

from __future__ import annotations

import os

from source_framework.destinations.checkpoint_record import STATE_DIGEST_BYTES, CheckpointRecord, SameState, state_digest
from source_framework.destinations.spark.passed_states import PassedStates


def record(seq, state, start=None, merged=()):
    return CheckpointRecord(seq=seq, batch_id=seq, state=state, start_state=start, merged_states=tuple(merged))


def test_every_state_a_record_passed_is_held_once_added(tmp_path):
    passed = PassedStates(str(tmp_path))
    assert not passed.includes({})  # no file yet
    passed.add([record(2, {"t": 2}, {}, merged=[{"t": 1}]), record(3, {"t": 3}, {"t": 2})])
    assert all(passed.includes(state) for state in ({}, {"t": 1}, {"t": 2}, {"t": 3}))
    assert not passed.includes({"t": 4}) and not passed.includes({"t": "3"})
    assert os.path.getsize(passed.path) == 4 * STATE_DIGEST_BYTES  # each state once
    passed.add([])
    assert os.path.getsize(passed.path) == 4 * STATE_DIGEST_BYTES


def test_an_append_cut_short_is_ignored_then_cut_off(tmp_path):
    passed = PassedStates(str(tmp_path))
    passed.add([record(1, {"t": 1})])
    with open(passed.path, "ab") as handle:
        handle.write(state_digest({"t": 2})[:5])  # killed mid-write
    assert passed.includes({"t": 1}) and not passed.includes({"t": 2})
    passed.add([record(2, {"t": 2})])
    assert os.path.getsize(passed.path) == 2 * STATE_DIGEST_BYTES
    assert passed.includes({"t": 1}) and passed.includes({"t": 2})


def test_a_digest_found_across_two_entries_does_not_count(tmp_path, monkeypatch):
    from source_framework.destinations.spark import passed_states

    passed = PassedStates(str(tmp_path))
    passed.add([record(1, {"a": 1}), record(2, {"b": 2})])
    data = open(passed.path, "rb").read()
    straddling = data[3:3 + STATE_DIGEST_BYTES]
    monkeypatch.setattr(passed_states, "state_digest", lambda state: straddling if state == {"c": 3} else state_digest(state))
    assert not passed.includes({"c": 3}) and passed.includes({"b": 2})


def test_a_state_digest_and_comparison_ignore_the_order_of_keys_and_partitions():
    one = {"states": [{"partition": {"s": 1, "r": "x"}, "cursor": {"t": 1}}, {"partition": {"s": 2}, "cursor": {"t": 2}}],
           "parent_state": {"p": {"states": [{"partition": {"a": 1}, "cursor": {"t": 0}}, {"partition": {"a": 2}, "cursor": {"t": 0}}]}}}
    other = {"parent_state": {"p": {"states": list(reversed(one["parent_state"]["p"]["states"]))}},
             "states": [{"cursor": {"t": 2}, "partition": {"s": 2}}, {"partition": {"r": "x", "s": 1}, "cursor": {"t": 1}}]}
    assert state_digest(one) == state_digest(other) and SameState(one)(other)
    moved = {**other, "states": [other["states"][0], {"partition": {"r": "x", "s": 1}, "cursor": {"t": 9}}]}
    assert state_digest(one) != state_digest(moved) and not SameState(one)(moved)
    # a list that is not one of partitions keeps its order
    assert not SameState({"ids": [1, 2]})({"ids": [2, 1]}) and state_digest({"ids": [1, 2]}) != state_digest({"ids": [2, 1]})
