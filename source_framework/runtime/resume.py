"""Where a stream's sync starts: the state given, or the table's newer checkpoint.

A run can die after a commit and before its STATE line was saved; reading from the older state then would write those
records twice. Each commit records the state it covers and the one its run started from, so a given state that an
older commit covers resumes from the table's newest checkpoint, one matching nothing but ahead of the table is
refused (``STATE_AHEAD``: records would be skipped), and any other is an edit honoured as given.
"""

from __future__ import annotations

import copy
import json
import logging
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from source_framework.destinations.checkpoint_record import CheckpointRecord, SameState
from source_framework.streams.cursor import CursorValueError, cursor_sort_key, partition_identity

if TYPE_CHECKING:
    from source_framework.destinations.base import EarlierCommits

logger = logging.getLogger("source_framework.read")

AS_GIVEN, TABLE_AHEAD, EDITED, STATE_AHEAD = "as given", "table ahead", "edited", "state ahead"


@dataclass
class ResumePoint:
    state: Mapping[str, Any]
    boundary: Mapping[str, Any] | None
    reason: str
    seq: int | None = None
    #: ``STATE_AHEAD``: where the given state is ahead of the table's newest checkpoint
    ahead: list[str] = field(default_factory=list)


def plan_start(
    stream: str, given: dict[str, Any], earlier: EarlierCommits, checkpoints: bool, state_as_given: bool, cursor_field: str | None,
) -> tuple[dict[str, Any], Mapping[str, Any] | None]:
    """The state a stream's sync starts from, and the boundary of the records it will read again (None: nothing to skip)."""
    if not apply_pending_reset(stream, given, earlier) or not checkpoints:
        return given, None
    if state_as_given:
        logger.info("stream %s: reading from the given state %s as given (--from-state-as-given)", stream, brief(given))
        return given, None
    point = resume_from_table(stream, given, earlier, cursor_field)
    if point.reason == TABLE_AHEAD:
        return copy.deepcopy(dict(point.state)), point.boundary
    return given, point.boundary


def apply_pending_reset(stream: str, given: Mapping[str, Any], earlier: EarlierCommits) -> bool:
    """A ``state reset`` marker applies only to a sync from an empty state, else it is dropped; False when this sync
    starts over."""
    reset_id = earlier.pending_reset()
    if reset_id is None:
        return True
    if not given:
        logger.info("stream %s: its state was reset; this sync reads it from the start and replaces its table", stream)
        earlier.apply_reset(reset_id)
        return False
    logger.warning(
        "stream %s: a state reset was left unfinished (or a later 'state set' replaced it) and this sync was "
        "given a state, %s; the reset is dropped and the state read as given", stream, brief(given),
    )
    earlier.discard_reset(reset_id)
    return True


def resume_from_table(stream: str, given: Mapping[str, Any], earlier: EarlierCommits, cursor_field: str | None) -> ResumePoint:
    """``choose_resume_point`` for a stream's table, logging which case it is; raises ``StateAhead``."""
    point = choose_resume_point(given, earlier.committed(), earlier.passed_before, cursor_field)
    if point.reason == STATE_AHEAD:
        refused = StateAhead(stream, point)
        logger.warning("%s", refused)
        raise refused
    if point.reason == TABLE_AHEAD:
        logger.warning(
            "stream %s: the given state %s is older than the table's checkpoint %s (a run died after its "
            "commit, before its STATE was saved); resuming from the table's state %s. To read from the given "
            "state anyway, pass --from-state-as-given",
            stream, brief(given), point.seq, brief(point.state),
        )
    elif point.reason == EDITED:
        logger.info(
            "stream %s: the given state %s matches no checkpoint of the table; reading from it as given "
            "(a partial re-sync)", stream, brief(given),
        )
    elif point.seq is not None:
        logger.info("stream %s: going on from the table's checkpoint %s", stream, point.seq)
    return point


def brief(state: Any, limit: int = 160) -> str:
    text = json.dumps(state, sort_keys=True, default=str)
    return text if len(text) <= limit else text[:limit] + "..."


def choose_resume_point(
    given: Mapping[str, Any],
    committed: Iterable[CheckpointRecord],
    passed: Callable[[Mapping[str, Any]], bool] = lambda state: False,
    cursor_field: str | None = None,
) -> ResumePoint:
    """Pick the resume point from ``committed`` (newest first); ``passed`` tells whether a record no longer kept passed a state."""
    given = dict(given or {})
    same = SameState(given)
    records = iter(committed)
    walk = _BoundaryWalk()
    newest: CheckpointRecord | None = None
    for record in records:
        walk.add(record)
        if newest is None:
            newest = record
            if same(record.state):
                return ResumePoint(given, walk.finish(records), AS_GIVEN, record.seq)
        if record.covers(same) or record.started_from(same):
            return ResumePoint(dict(newest.state or {}), walk.finish(records), TABLE_AHEAD, newest.seq)
    if newest is None:
        return ResumePoint(given, None, AS_GIVEN)
    if passed(given):
        return ResumePoint(dict(newest.state or {}), walk.finish(records), TABLE_AHEAD, newest.seq)
    ahead = state_ahead(given, newest.state or {}, cursor_field) if cursor_field else []
    if ahead:
        return ResumePoint(given, None, STATE_AHEAD, newest.seq, ahead)
    return ResumePoint(given, None, EDITED)


def state_ahead(given: Mapping[str, Any], committed: Mapping[str, Any], cursor_field: str) -> list[str]:
    """Where ``given`` is ahead of ``committed`` by cursor; a partition the table's state lacks counts as ahead."""
    found = []
    ours = _cursors(committed, cursor_field)
    for place, value in _cursors(given, cursor_field).items():
        if place not in ours:
            if place.startswith("partition ") and isinstance(committed.get("states"), list):
                found.append(f"{place}: {value!r}, a partition the table's state does not name")
            continue
        try:
            mine, theirs = cursor_sort_key(value), cursor_sort_key(ours[place])
        except CursorValueError:
            continue
        if mine[0] == theirs[0] and mine > theirs:
            found.append(f"{place}: {value!r} > {ours[place]!r}")
    return found


def _cursors(state: Mapping[str, Any], cursor_field: str) -> dict[str, Any]:
    found: dict[str, Any] = {}
    if cursor_field in state:
        found[cursor_field] = state[cursor_field]
    entries = state.get("states")
    if isinstance(entries, list):
        for entry in entries:
            partition, cursor = (entry.get("partition"), entry.get("cursor")) if isinstance(entry, Mapping) else (None, None)
            if isinstance(partition, Mapping) and isinstance(cursor, Mapping) and cursor_field in cursor:
                found[f"partition {partition_identity(partition)}"] = cursor[cursor_field]
    global_state = state.get("state")
    if isinstance(global_state, Mapping) and cursor_field in global_state:
        found["global"] = global_state[cursor_field]
    return found


class _BoundaryWalk:
    """Gathers the newest record's boundary while looking back to one with a full boundary; partitions not found get
    none, so a resumed run may write a record again but never loses one."""

    def __init__(self) -> None:
        self.boundary: dict[str, Any] = {}
        self.complete = False

    def add(self, record: CheckpointRecord) -> None:
        if self.complete:
            return
        for partition, entry in (record.boundary or {}).items():
            self.boundary.setdefault(partition, entry)
        self.complete = record.boundary_full

    def finish(self, rest: Iterator[CheckpointRecord]) -> dict[str, Any]:
        while not self.complete:
            record = next(rest, None)
            if record is None:
                break
            self.add(record)
        return self.boundary


class StateAhead(Exception):
    """The given state is ahead of the table's newest checkpoint and matches none it passed."""

    def __init__(self, stream: str, point: ResumePoint) -> None:
        self.ahead = point.ahead
        where = "; ".join(point.ahead[:3]) + ("; ..." if len(point.ahead) > 3 else "")
        super().__init__(
            f"stream '{stream}': the given state is ahead of the table's newest checkpoint {point.seq} ({where}), "
            f"and no checkpoint of the table passed it: the table lacks the records before it (a warehouse restored "
            f"from a backup? a state from another run?), and reading from it would never write them. Nothing was "
            f"written. Give the state the table's last sync ended with; to read from this one anyway, pass "
            f"--from-state-as-given; to move the table's cursor forward on purpose, use 'state set'"
        )
