"""Checkpoints that come fast, held back by the runtime and committed together (``checkpoint_hold``):
when a hold ends, and that each STATE still leaves after the commit that covers it, with resume
notes that describe exactly that commit's records."""

from __future__ import annotations

import math
from typing import Any

import pytest

from source_framework.runtime import checkpoint_hold
from source_framework.runtime.checkpoint_hold import FAST_MS, HOLD_MS, CheckpointHold, HeldCheckpoint
from unit_tests.conftest import CursorStream, sync


class Clock:
    """Seconds, moved by hand (as ``time.monotonic``)."""

    def __init__(self) -> None:
        self.now = 1_000.0

    def monotonic(self) -> float:
        return self.now

    def step(self, ms: float) -> None:
        self.now += ms / 1000


def checkpoint(n: int) -> HeldCheckpoint:
    return HeldCheckpoint({"n": n}, None, count=1, handed=n)


def held_states(hold: CheckpointHold) -> list[int]:
    return [c.state["n"] for c in hold.take()]


# -- the hold alone ----------------------------------------------------------------------------


def test_fast_checkpoints_are_held_up_to_the_limit_and_the_first_never():
    clock = Clock()
    hold = CheckpointHold(3, clock.monotonic)
    assert not hold.holds(checkpoint(1))  # nothing came before it: its STATE leaves early
    assert held_states(hold) == [1]
    for n in (2, 3):
        clock.step(1)
        assert hold.holds(checkpoint(n))
    clock.step(1)
    assert not hold.holds(checkpoint(4))  # the third of one commit
    assert held_states(hold) == [2, 3, 4] and hold.held == []


def test_a_checkpoint_after_a_pause_ends_the_hold_and_the_streams_last_is_never_held():
    clock = Clock()
    hold = CheckpointHold(64, clock.monotonic)
    hold.holds(checkpoint(1))
    hold.take()
    clock.step(1)
    assert hold.holds(checkpoint(2))
    clock.step(FAST_MS + 1)
    assert not hold.holds(checkpoint(3))  # a slow API: it is not held, and takes the held ones along
    assert held_states(hold) == [2, 3]
    clock.step(1)
    assert not hold.holds(checkpoint(4), last=True)
    assert held_states(hold) == [4]


def test_a_hold_ends_at_the_first_checkpoint_once_its_first_is_hold_ms_old():
    """Where reading is slow, fast checkpoints (each within ``FAST_MS`` of the one before) join one
    hold for ``HOLD_MS``, longer than ``FAST_MS``: one commit for all, not one each ``FAST_MS``."""
    gap = 1000 * 2 ** math.floor(math.log2(FAST_MS / 2000))  # (ms, under FAST_MS, exact in binary seconds)
    clock = Clock()
    hold = CheckpointHold(1_000, clock.monotonic)
    hold.holds(checkpoint(0))
    hold.take()
    sizes, n = [], 0
    while len(sizes) < 3:
        n += 1
        clock.step(gap)
        if not hold.holds(checkpoint(n)):
            sizes.append(len(hold.take()))
    expected = math.ceil(HOLD_MS / gap) + 1  # the first held, and those up to HOLD_MS after it
    assert sizes == [expected] * 3 and expected * gap > FAST_MS


def test_a_sink_whose_commits_cover_one_checkpoint_never_has_one_held():
    clock = Clock()
    hold = CheckpointHold(1, clock.monotonic)
    for n in range(5):
        clock.step(1)
        assert not hold.holds(checkpoint(n))
        assert held_states(hold) == [n]


# -- the runtime -------------------------------------------------------------------------------


@pytest.fixture
def clock(monkeypatch) -> Clock:
    fake = Clock()
    monkeypatch.setattr(checkpoint_hold, "time", fake)
    return fake


class PausingStream(CursorStream):
    """A ``CursorStream`` whose reading takes ``step_ms`` on the hold's clock per record, and
    ``pause_ms`` more before each record whose value is in ``pauses``."""

    def __init__(self, *args: Any, clock: Clock, step_ms: float = 0, pause_ms: float = 0,
                 pauses: tuple[int, ...] = (), **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.clock, self.step_ms, self.pause_ms, self.pauses = clock, step_ms, pause_ms, pauses

    def read_records(self, *args: Any, **kwargs: Any):
        for record in super().read_records(*args, **kwargs):
            self.clock.step(self.step_ms + (self.pause_ms if record["n"] in self.pauses else 0))
            yield record


def commits(destination) -> list[tuple[list[int], int]]:
    """Per commit the sink was asked for: the held states it covered too, and its own."""
    sink = destination.sinks["numbers"]
    asked = [(state, earlier) for (kind, state, _), earlier in zip(
        [c for c in sink.calls if c[0] == "commit"], sink.earlier, strict=True)]
    return [([s["n"] for s in earlier], state["n"]) for state, earlier in asked]


def test_checkpoints_that_come_fast_share_one_commit_and_each_state_still_leaves_after_it(clock):
    result, out, destination = sync(PausingStream([list(range(1, 11))], interval=1, clock=clock, step_ms=1),
                                    per_commit=4)
    assert commits(destination) == [([], 1), ([2, 3, 4], 5), ([6, 7, 8], 9), ([], 10)]
    states = [s["stream"]["stream_state"]["n"] for s in out.states]
    assert states == list(range(1, 11)) and not result.failed
    assert [int(s["sourceStats"]["recordCount"]) for s in out.states] == [1] * 10
    # the barrier: each STATE after the commit that covers it (the one of a state at or past it)
    committed = 0
    for event, value in destination.events.log:
        if event == "commit" and value:
            committed = value["n"]
        elif event == "STATE":
            assert value["n"] <= committed
    assert [r["n"] for r in destination.sinks["numbers"].landed] == list(range(1, 11))


def test_a_commit_of_held_checkpoints_keeps_the_notes_of_its_last_one(clock):
    """The resume notes are computed once per commit, when it is asked for: they name the records
    at the cursor of its last checkpoint, none read after it (a resumed run skips what they name).
    Records after the last checkpoint that did not move the state (ties) go with the stream's end."""
    values = [1, 2, 3, 4, 5, 5, 5]
    result, out, destination = sync(PausingStream([values], interval=1, clock=clock, step_ms=1), per_commit=3)
    sink = destination.sinks["numbers"]
    asked = [(state["n"], notes) for kind, state, notes in sink.calls if kind == "commit"]
    assert [n for n, _ in asked] == [1, 4, 5]
    for n, notes in asked:
        (edge,) = notes.boundary.values()
        ids = sorted(key[0] for key, _ in edge["records"])
        assert edge["cursor"] == n and ids == [i for i, value in enumerate(values) if value == n]
    assert [s["stream"]["stream_state"]["n"] for s in out.states] == [1, 2, 3, 4, 5]
    assert len(sink.landed) == len(values) and not result.failed


def test_a_checkpoint_after_a_pause_is_committed_at_once_with_those_held_before_it(clock):
    stream = PausingStream([list(range(1, 7))], interval=1, clock=clock, step_ms=1, pause_ms=FAST_MS + 5, pauses=(4,))
    _, out, destination = sync(stream, per_commit=64)
    assert commits(destination) == [([], 1), ([2, 3], 4), ([5], 6)]
    assert [s["stream"]["stream_state"]["n"] for s in out.states] == list(range(1, 7))


def test_a_failed_commit_of_held_checkpoints_prints_none_of_their_states(clock):
    result, out, destination = sync(PausingStream([list(range(1, 11))], interval=1, clock=clock, step_ms=1),
                                    per_commit=4, fail_at=2)
    assert [s["stream"]["stream_state"]["n"] for s in out.states] == [1]
    assert result.failed and commits(destination)[:2] == [([], 1), ([2, 3, 4], 5)]


def test_a_stream_that_fails_leaves_its_held_checkpoints_unprinted_and_uncommitted(clock):
    """Held checkpoints are not committed when their stream fails: their records are read again by
    the next sync, and no STATE claims them."""

    class Failing(PausingStream):
        def read_records(self, *args: Any, **kwargs: Any):
            for record in super().read_records(*args, **kwargs):
                if record["n"] == 7:
                    raise RuntimeError("the API went away")
                yield record

    result, out, destination = sync(Failing([list(range(1, 11))], interval=1, clock=clock, step_ms=1), per_commit=64)
    assert result.failed
    assert [s["stream"]["stream_state"]["n"] for s in out.states] == [1]
    assert commits(destination) == [([], 1)]
