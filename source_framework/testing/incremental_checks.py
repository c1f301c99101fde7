"""The incremental checks of Airbyte's acceptance tests on parsed ``read`` outputs, free of pytest and subprocesses."""

from __future__ import annotations

import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from source_framework.testing.catalogs import StreamInfo
from source_framework.testing.connector_runs import ReadOutput, stream_of_state
from source_framework.testing.cursors import StateBound, StateShapeError
from source_framework.testing.record_checks import MAX_EXAMPLES, short_json


class UnboundedRecordsWarning(UserWarning):
    """Records of a partitioned stream could not be matched to partitions, so were not checked."""


class UncheckedStateWarning(UserWarning):
    """A stream's state holds no cursor the checks can find, so its records were not checked; ``cursor_paths`` says where."""


def _bound(stream: StreamInfo, state: Mapping[str, Any], cursor_paths: Mapping[str, Sequence[str]] | None) -> StateBound | None:
    try:
        return StateBound.from_state(stream, state["stream"]["stream_state"], (cursor_paths or {}).get(stream.name))
    except StateShapeError as error:
        warnings.warn(f"{error}; its records were not checked against it (give its cursor_paths)", UncheckedStateWarning, stacklevel=4)
        return None


def _state_problems(
    output: ReadOutput,
    states: Mapping[str, Mapping[str, Any]],
    streams: Mapping[str, StreamInfo],
    when: str,
    *,
    threshold_days: int = 0,
    cursor_paths: Mapping[str, Sequence[str]] | None = None,
    newer: bool = False,
) -> list[str]:
    problems = []
    for name, state in states.items():
        if name not in streams:
            continue
        bound = _bound(streams[name], state, cursor_paths)
        if bound is None:
            continue
        records = output.records(name)
        found = bound.out_of_bounds(records, newer=newer, threshold_days=threshold_days)
        if found:
            relation = "newer than its final state" if newer else "older than the state's cursor"
            examples = "; ".join(f"{cursor!r} vs {limit!r}: {short_json(r, 160)}" for cursor, limit, r in found[:MAX_EXAMPLES])
            problems.append(
                f"stream '{name}': {len(found)} of {len(records)} records {when} are {relation} "
                f"({bound.describe()}), e.g. {examples}"
            )
        if bound.partitioned and records and bound.partitions and not bound.partition_fields_in(records):
            warnings.warn(
                f"stream '{name}': no record has fields named like the partition keys of its state "
                f"({sorted(bound.partitions[0][0])}), so records {when} could not be checked against "
                "their partition's cursor",
                UnboundedRecordsWarning,
                stacklevel=3,
            )
    return problems


def check_two_sequential_reads(
    first: ReadOutput,
    second: ReadOutput,
    streams: Mapping[str, StreamInfo],
    *,
    threshold_days: int = 0,
    cursor_paths: Mapping[str, Sequence[str]] | None = None,
) -> None:
    """The first read's final STATEs cover its records; the second read returns none older than them (less ``threshold_days``)."""
    assert any(first.records(name) for name in streams), (
        f"the first incremental read returned no records for {sorted(streams)}: nothing to test "
        f"({first.describe()})"
    )
    final = first.final_states()
    missing = [name for name in streams if name not in final]
    assert not missing, f"the first incremental read emitted no STATE for {missing} ({first.describe()})"
    problems = _state_problems(first, final, streams, "of the first read", cursor_paths=cursor_paths, newer=True)
    problems += _state_problems(
        second, final, streams, "of the second read", threshold_days=threshold_days, cursor_paths=cursor_paths
    )
    assert not problems, "second read from the first read's final state:\n" + "\n".join(problems)


@dataclass
class Checkpoint:
    """A STATE message of a read, and what a read started from it must return."""

    position: int
    stream: str
    state: list[dict[str, Any]]  # the latest STATE of each stream up to here: the --state to use
    records_after: dict[str, list[dict[str, Any]]]  # per stream: records after its latest STATE

    def describe(self) -> str:
        return f"STATE #{self.position} of the first read (stream '{self.stream}')"


def checkpoint_at(read: ReadOutput, position: int, streams: Mapping[str, StreamInfo]) -> Checkpoint:
    latest: dict[str, dict[str, Any]] = {}
    latest_position: dict[str, int] = {}
    for index, message in enumerate(read.messages[: position + 1]):
        if message.get("type") == "STATE":
            name = stream_of_state(message["state"])
            latest[name], latest_position[name] = message["state"], index
    records_after: dict[str, list[dict[str, Any]]] = {name: [] for name in streams}
    for index, message in enumerate(read.messages):
        if message.get("type") != "RECORD":
            continue
        name = message["record"]["stream"]
        if name in streams and index > latest_position.get(name, -1):
            records_after[name].append(message["record"]["data"])
    stream = stream_of_state(read.messages[position]["state"])
    return Checkpoint(position, stream, list(latest.values()), records_after)


def pick_checkpoints(read: ReadOutput, streams: Mapping[str, StreamInfo], how_many: int) -> list[Checkpoint]:
    """Up to ``how_many`` intermediate STATEs (not a stream's last), spread over the streams."""
    last = {stream_of_state(read.messages[position]["state"]): position for position in read.state_positions()}
    final_positions = set(last.values())
    candidates = [
        p
        for p in read.state_positions()
        if p not in final_positions and stream_of_state(read.messages[p]["state"]) in streams
    ]
    by_stream: dict[str, list[int]] = {}
    for position in candidates:
        by_stream.setdefault(stream_of_state(read.messages[position]["state"]), []).append(position)
    picked = [positions[len(positions) // 2] for positions in by_stream.values()]
    if len(picked) > how_many:
        picked = _spread(sorted(picked), how_many)
    rest = [p for p in candidates if p not in picked]
    if len(picked) < how_many and rest:
        picked += _spread(rest, how_many - len(picked))
    return [checkpoint_at(read, position, streams) for position in sorted(picked)]


def _spread(items: Sequence[int], count: int) -> list[int]:
    if count <= 0 or not items:
        return []
    if count >= len(items):
        return list(items)
    step = len(items) / count
    return [items[int(step * k + step / 2)] for k in range(count)]


def check_read_from_checkpoint(
    checkpoint: Checkpoint,
    output: ReadOutput,
    streams: Mapping[str, StreamInfo],
    *,
    threshold_days: int = 0,
    cursor_paths: Mapping[str, Sequence[str]] | None = None,
) -> None:
    problems = []
    for name, expected in checkpoint.records_after.items():
        got = {streams[name].identity(record) for record in output.records(name)}
        lost = [record for record in expected if streams[name].identity(record) not in got]
        if lost:
            problems.append(
                f"stream '{name}': {len(lost)} of the {len(expected)} records the first read returned after "
                f"this state are missing, e.g. {'; '.join(short_json(r, 160) for r in lost[:MAX_EXAMPLES])}"
            )
    states = {stream_of_state(state): state for state in checkpoint.state}
    problems += _state_problems(
        output, states, streams, "read from this state", threshold_days=threshold_days, cursor_paths=cursor_paths
    )
    assert not problems, f"read from {checkpoint.describe()}:\n" + "\n".join(problems)


def check_future_state_covers_streams(
    future_state: Sequence[Mapping[str, Any]],
    streams: Mapping[str, StreamInfo],
    missing_streams: Sequence[str],
    *,
    high_strictness: bool = True,
) -> None:
    """Every incremental stream has a future state unless in ``missing_streams`` (only at ``high``, as in Airbyte)."""
    if not high_strictness:
        return
    covered = {_state_stream(state) for state in future_state}
    uncovered = sorted(set(streams) - covered - set(missing_streams))
    assert not uncovered, (
        f"the future state file has no state for the incremental stream(s) {uncovered}; add one "
        "(or list them under future_state.missing_streams with a bypass_reason)"
    )


def check_future_state_read(
    output: ReadOutput, future_state: Sequence[Mapping[str, Any]], streams: Mapping[str, StreamInfo]
) -> None:
    covered = {_state_stream(state) for state in future_state}
    problems = []
    for name in sorted(covered & set(streams)):
        records = output.records(name)
        if records:
            problems.append(
                f"stream '{name}': {len(records)} records from a state in the future, e.g. "
                + "; ".join(short_json(r, 160) for r in records[:MAX_EXAMPLES])
            )
    if not output.states():
        problems.append("no STATE message at all (a read must end with a state, even when nothing is new)")
    assert not problems, f"read from the future state ({output.describe()}):\n" + "\n".join(problems)


def _state_stream(state: Mapping[str, Any]) -> str:
    if state.get("type") == "STATE" and "state" in state:
        state = state["state"]
    return stream_of_state(state)


def per_stream_states(raw: Any) -> list[dict[str, Any]]:
    """A state file as per-stream ``state`` objects: Airbyte's list, or the legacy ``{"stream": {...}}`` dict."""
    if isinstance(raw, dict) and not {"type", "stream"} & set(raw):
        return [
            {"type": "STREAM", "stream": {"stream_descriptor": {"name": name}, "stream_state": value}}
            for name, value in raw.items()
        ]
    items = raw if isinstance(raw, list) else [raw]
    states = []
    for item in items:
        if isinstance(item, dict) and item.get("type") == "STATE" and "state" in item:
            item = item["state"]
        if not isinstance(item, dict) or "stream" not in item:
            raise AssertionError(f"state entry {item!r} is not a per-stream state")
        states.append(item)
    return states
