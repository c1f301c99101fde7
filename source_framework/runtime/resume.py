"""Where a stream's sync starts: the state given, or the table's newer checkpoint.

A run can die after Spark committed a checkpoint and before its STATE line reached whoever
saves states. The next run then gets an older state than the table holds, and reading from it
would write those records twice. Each commit records the state it covers and the state its run
started from, so we can tell:

- the given state is the newest commit's state: go on from it (the normal case);
- it is the state of an older commit (or of a checkpoint merged into a later commit), or the
  start state of a run that committed since: the table is ahead, resume from its newest
  checkpoint (and say so in the log);
- it matches nothing the table committed: the user edited it on purpose (partial re-sync);
  honour it as given.

In the first two cases the run also gets the boundary of the commit it resumes from (the
records it will read again, ``runtime.boundary``). A record may hold only the partitions that
changed since an earlier record of its run, so the boundary is rebuilt by walking the records
newest first back to one that holds a full boundary (``boundary_rebuilt``).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from source_framework.destinations.checkpoint_record import CheckpointRecord

AS_GIVEN, TABLE_AHEAD, EDITED = "as given", "table ahead", "edited"


@dataclass
class ResumePoint:
    state: Mapping[str, Any]
    boundary: Mapping[str, Any] | None
    reason: str
    seq: int | None = None


def choose_resume_point(given: Mapping[str, Any], committed: Iterable[CheckpointRecord]) -> ResumePoint:
    """``committed``: the table's committed checkpoint records, newest first."""
    given = dict(given or {})
    records = iter(committed)
    walk = _BoundaryWalk()
    newest: CheckpointRecord | None = None
    for record in records:
        walk.add(record)
        if newest is None:
            newest = record
            if (record.state or {}) == given:
                return ResumePoint(given, walk.finish(records), AS_GIVEN, record.seq)
        if record.covers(given) or record.started_from(given):
            return ResumePoint(dict(newest.state or {}), walk.finish(records), TABLE_AHEAD, newest.seq)
    if newest is None:
        return ResumePoint(given, None, AS_GIVEN)
    return ResumePoint(given, None, EDITED)


def boundary_rebuilt(committed: Iterable[CheckpointRecord]) -> dict[str, Any]:
    """The newest record's full boundary, from ``committed`` (newest first)."""
    return _BoundaryWalk().finish(iter(committed))


class _BoundaryWalk:
    """Gathers the newest record's boundary while ``choose_resume_point`` looks back.

    Per partition the newest entry wins; the walk stops at a record holding a full boundary.
    If the records end before one (old records removed), the partitions not found have no
    boundary: the resumed run skips nothing there, which can write a record again but never
    loses one.
    """

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
        """Read on through ``rest`` only as far as the boundary needs."""
        while not self.complete:
            record = next(rest, None)
            if record is None:
                break
            self.add(record)
        return self.boundary
