"""The checkpoint record: what one commit covers, kept with the commit so a later run resumes exactly.

A STATE line can be lost after its commit and a state file can be older than the table, so every commit records the state
it covers and what ``runtime.resume`` needs to judge a state given later. Format 2 names files relative to the table folder."""

from __future__ import annotations

import hashlib
import json
import posixpath
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, fields
from datetime import UTC, datetime
from typing import Any
from urllib.parse import unquote, urlparse

import orjson

FORMAT_VERSION = 2


@dataclass(frozen=True)
class ResumeNotes:
    """What the read loop hands the destination with a commit; ``boundary_full``: False when ``boundary`` is a delta."""

    start_state: dict[str, Any] = field(default_factory=dict)
    boundary: dict[str, Any] = field(default_factory=dict)
    boundary_full: bool = True


#: A commit's notes, or how to build them: most checkpoints a destination groups into one commit never need theirs.
Notes = ResumeNotes | Callable[[], ResumeNotes]


def built(notes: Notes | None) -> ResumeNotes | None:
    return notes() if callable(notes) else notes


@dataclass(frozen=True)
class CheckpointRecord:
    seq: int
    batch_id: int
    state: dict[str, Any] | None
    files: tuple[str, ...] = ()
    rows: int = 0
    replace: bool = False
    committed_at: str = ""
    start_state: dict[str, Any] | None = None
    boundary: dict[str, Any] = field(default_factory=dict)
    #: False: ``boundary`` is a delta over the run's earlier records; older records read as True
    boundary_full: bool = True
    merged_states: tuple[dict[str, Any], ...] = ()
    #: a ``state reset`` this commit applied (the table was rebuilt from it), or superseded (``state set``)
    reset_id: str | None = None
    #: the table's schema after this commit (``destinations.spark.table_schema``)
    schema: dict[str, Any] | None = None
    #: data files this commit made invisible (a replace), deleted once no reader needs them
    replaced: tuple[str, ...] = ()
    format: int = FORMAT_VERSION

    def covers(self, state: Mapping[str, Any] | SameState) -> bool:
        """``state`` is this commit's, or one of the checkpoints merged into its write."""
        same = state if isinstance(state, SameState) else SameState(state)
        return same(self.state) or any(same(merged) for merged in self.merged_states)

    def started_from(self, state: Mapping[str, Any] | SameState) -> bool:
        same = state if isinstance(state, SameState) else SameState(state)
        return self.start_state is not None and same(self.start_state)

    def states_passed(self) -> list[dict[str, Any]]:
        """Every state a later run given it is to take for one this table passed (``runtime.resume``)."""
        states = [dict(self.state or {}), *(dict(s or {}) for s in self.merged_states)]
        return states + [dict(self.start_state)] if self.start_state is not None else states

    def to_json(self) -> bytes:
        # Not ``dataclasses.asdict``, which deep-copies every value; what orjson refuses (ints beyond 64 bits) json writes.
        content = {item.name: getattr(self, item.name) for item in fields(self)}
        try:
            return orjson.dumps(content, option=orjson.OPT_SORT_KEYS)
        except TypeError:
            return json.dumps(content, separators=(",", ":"), sort_keys=True).encode("utf-8")

    @classmethod
    def from_json(cls, raw: bytes | str | Mapping[str, Any]) -> CheckpointRecord:
        content = json.loads(raw) if isinstance(raw, (bytes, str)) else dict(raw)
        version = content.get("format", 1)
        if version > FORMAT_VERSION:
            raise ValueError(
                f"checkpoint record format {version} is newer than this source_framework reads ({FORMAT_VERSION}); "
                f"upgrade source_framework to use this table"
            )
        return cls(
            seq=int(content["seq"]),
            batch_id=int(content["batch_id"]),
            state=content.get("state"),
            files=tuple(file_name(path) for path in content.get("files") or ()),
            rows=int(content.get("rows") or 0),
            replace=bool(content.get("replace")),
            committed_at=content.get("committed_at") or "",
            start_state=content.get("start_state"),
            boundary=dict(content.get("boundary") or {}),
            boundary_full=bool(content.get("boundary_full", True)),
            merged_states=tuple(dict(s or {}) for s in content.get("merged_states") or ()),
            reset_id=content.get("reset_id"),
            schema=content.get("schema"),
            replaced=tuple(content.get("replaced") or ()),
        )


class SameState:
    """Whether a state says the same as ``given``: equal, or equal but for the order of its partitions (people reorder them)."""

    def __init__(self, given: Mapping[str, Any] | None) -> None:
        self.given = dict(given or {})
        self._canonical: Any = None

    def __call__(self, state: Mapping[str, Any] | None) -> bool:
        state = state or {}
        if state == self.given:
            return True
        if not (_partitioned(self.given) and _partitioned(state)):
            return False
        if len(self.given.get("states") or ()) != len(state.get("states") or ()):
            return False  # (the common way two such states differ: no need to order them)
        if self._canonical is None:
            self._canonical = canonical_state(self.given)
        return bool(canonical_state(state) == self._canonical)


def _partitioned(state: Mapping[str, Any]) -> bool:
    return isinstance(state.get("states"), list) or isinstance(state.get("parent_state"), Mapping)


def canonical_state(value: Any) -> Any:
    """``value`` with every list of partitions in one order, at any depth."""
    if isinstance(value, Mapping):
        canonical = {key: canonical_state(item) for key, item in value.items()}
        entries = canonical.get("states")
        if isinstance(entries, list) and all(isinstance(e, Mapping) and "partition" in e for e in entries):
            canonical["states"] = sorted(entries, key=lambda entry: _json_text(entry["partition"]))
        return canonical
    if isinstance(value, list):
        return [canonical_state(item) for item in value]
    return value


def state_digest(state: Mapping[str, Any] | None) -> bytes:
    """8 bytes that name ``state`` whatever the order of its keys and partitions (``spark/passed_states.py``)."""
    encoded = _json_text(canonical_state(dict(state or {}))).encode("utf-8")
    return hashlib.blake2b(encoded, digest_size=STATE_DIGEST_BYTES).digest()


STATE_DIGEST_BYTES = 8


def _json_text(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), default=str)


def file_name(path: str) -> str:
    """A data file's name in its table folder, from a name or an absolute ``file:`` URI."""
    if "://" in path or path.startswith("file:"):
        path = unquote(urlparse(path).path)
    return posixpath.basename(path)


COMMITTED_AT_FORMAT = "%Y-%m-%dT%H:%M:%S.%fZ"


def committed_at_now() -> str:
    return datetime.now(UTC).strftime(COMMITTED_AT_FORMAT)


def committed_at_seconds(text: str) -> float:
    """A ``committed_at`` as epoch seconds; an unreadable one is never old enough to delete anything."""
    try:
        return datetime.strptime(text, COMMITTED_AT_FORMAT).replace(tzinfo=UTC).timestamp()
    except ValueError:
        return float("inf")
