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
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterable, Mapping, Optional

AS_GIVEN, TABLE_AHEAD, EDITED = "as given", "table ahead", "edited"


@dataclass
class ResumePoint:
    state: Mapping[str, Any]
    boundary: Optional[Mapping[str, Any]]
    reason: str
    seq: Optional[int] = None


def choose_resume_point(given: Mapping[str, Any], committed: Iterable[Mapping[str, Any]]) -> ResumePoint:
    """``committed``: the table's committed checkpoint records, newest first."""
    given = dict(given or {})
    newest: Optional[Mapping[str, Any]] = None
    for record in committed:
        if newest is None:
            newest = record
            if (record.get("state") or {}) == given:
                return ResumePoint(given, record.get("boundary"), AS_GIVEN, record.get("seq"))
        covered = [record.get("state") or {}] + list(record.get("merged_states") or [])
        if given in covered or ("start_state" in record and (record.get("start_state") or {}) == given):
            return ResumePoint(dict(newest.get("state") or {}), newest.get("boundary"), TABLE_AHEAD, newest.get("seq"))
    if newest is None:
        return ResumePoint(given, None, AS_GIVEN)
    return ResumePoint(given, None, EDITED)
