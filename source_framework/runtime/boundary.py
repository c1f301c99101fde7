"""Not writing twice the records that sit exactly on a resumed cursor.

APIs filter with ``updatedAt >= cursor``, so a resumed sync re-reads the records at the state's cursor. Each commit keeps
every partition's highest cursor and its records' keys and hashes; a re-read record is skipped only when key AND hash
match, so an update at the same cursor is always written. Anything else read again is for the table to tell.
"""

from __future__ import annotations

import hashlib
import logging
import uuid
from collections import deque
from collections.abc import Collection, Mapping, Set
from typing import Any

import orjson

from source_framework.streams.cursor import CursorValueError, cursor_sort_key

logger = logging.getLogger("source_framework.read")

MAX_KEYS = 10_000
#: A full snapshot at least every this many checkpoints, so a resume's walk back stays within the rows a table keeps.
FULL_EVERY = 100

#: Marks kept unbuilt, and their record hashes in all, before the oldest are built (stdout never asks for them).
MAX_UNBUILT_MARKS = 256
MAX_UNBUILT_RECORDS = MAX_KEYS

_HASH_BYTES = 8  # 64 bits: a changed record matching its committed hash has odds of 2**-64


def record_hash(record: Mapping[str, Any], declared: Set[str] | None = None) -> str | None:
    """A short hash of ``record``'s declared fields (the only ones with a column); None if it has no JSON form, never skipped."""
    if declared is not None and not record.keys() <= declared:
        record = {name: value for name, value in record.items() if name in declared}
    try:
        encoded = orjson.dumps(record if isinstance(record, dict) else dict(record), option=orjson.OPT_SORT_KEYS)
    except (TypeError, ValueError):
        return None
    return hashlib.blake2b(encoded, digest_size=_HASH_BYTES).hexdigest()


class _Entry:
    __slots__ = ("cursor", "sort_key", "records", "overflow")

    def __init__(self, cursor: Any, sort_key: Any, records: dict[tuple[Any, ...], Any], overflow: bool = False) -> None:
        self.cursor = cursor
        self.sort_key = sort_key
        self.records = records
        self.overflow = overflow


class Boundary:
    """Tracks, per partition, the highest cursor value and the records carrying it."""

    def __init__(
        self,
        cursor_field: list[str],
        primary_key: list[list[str]],
        resumed: Mapping[str, Any] | None = None,
        stream: str = "",
        declared: Collection[str] | None = None,
    ) -> None:
        self.enabled = len(cursor_field) == 1
        self._keyless = not primary_key
        self.stream = stream
        self._declared = frozenset(declared) if declared is not None else None  # see record_hash
        self.cursor_field = self._cursor = cursor_field[0] if cursor_field else ""
        self._key_paths = primary_key
        self._key_field = primary_key[0][0] if len(primary_key) == 1 and len(primary_key[0]) == 1 else None
        self._entries: dict[str, _Entry] = {}
        # What the resumed commit holds, by cursor value then key -> hash: skipped once each.
        self._skip: dict[Any, dict[tuple[Any, ...], str]] = {}
        self._run = uuid.uuid4().hex[:6]  # names this run's slots for slices without a partition
        self._slots = 0
        self._carried: list[str] = []  # slots of earlier runs, dropped once this run read every slice
        self._force_full = False
        self._kept = 0
        self._json: dict[str, dict[str, Any]] = {}
        self._left_out: dict[str, dict[str, Any]] = {}
        self._changed: dict[str, int] = {}
        self._dirty: set[str] = set()
        self._dropped: list[str] = []
        self._marks: deque[tuple[int, list[tuple[str, _Entry | None]], bool]] = deque()
        self._unbuilt_records = 0
        self._next_mark = 0
        self._built = -1
        self._last_full = 0
        self._delta_since_full = 0
        self._warned = False
        self._partition = ""
        self._current: _Entry | None = None
        #: the sort key each resumed partition had reached ("#": the highest of the slots)
        self._reached: dict[str, Any] = {}
        self._reached_here: Any = None
        self.skipped = 0
        self.highest: Any = None
        self._resumed = resumed is not None
        self._load(resumed or {})

    def start_partition(self, partition: str) -> None:
        if not partition:
            partition = f"#{self._run}:{self._slots}"
            self._slots += 1
            self._reached_here = self._reached.get("#")
        else:
            self._reached_here = self._reached.get(partition)
        self._partition = partition
        self._current = self._entries.get(partition)

    def finish(self) -> None:
        for slot in self._carried:
            entry = self._entries.pop(slot, None)
            if entry is not None:
                self._kept -= len(entry.records)
            self._dropped.append(slot)
        self._carried = []

    def already_committed(self, record: Mapping[str, Any]) -> bool | None:
        """Track ``record``; True if the resumed commit holds exactly it, None if only the table can tell."""
        if not self.enabled:
            return False
        value = record.get(self._cursor)
        if value is None:
            return None if self._resumed else False
        # Written out rather than calling ``_add``/``_replace``: this runs for nearly every record.
        entry = self._current
        if entry is not None and value == entry.cursor:
            self._add(entry, record)
            sort_key = entry.sort_key
        else:
            try:
                sort_key = cursor_sort_key(value)
            except CursorValueError:
                sort_key = None
            if entry is None or entry.sort_key is None or (sort_key is not None and sort_key > entry.sort_key):
                self._replace(value, sort_key, record)
        skip = self._skip.get(value) if self._skip else None
        if skip is not None and self._take_committed(skip, record):
            self.skipped += 1
            return True
        if self._reached and sort_key is not None:
            top = self._reached_here
            if top is not None and sort_key[0] == top[0] and sort_key <= top:
                return None
        return False

    def _take_committed(self, skip: dict[tuple[Any, ...], str], record: Mapping[str, Any]) -> bool:
        key = self._key(record)
        committed = skip.get(key)
        if committed is None or committed != record_hash(record, self._declared):
            return False
        del skip[key]
        return True

    def _add(self, entry: _Entry, record: Mapping[str, Any]) -> None:
        if entry.overflow or self._keyless:
            return
        key = self._key(record)
        if key not in entry.records:
            if self._kept >= MAX_KEYS:
                self._overflow(entry)
                return
            self._kept += 1
        entry.records[key] = record  # the latest version of a key is the one a resume may skip
        self._mark()

    def _replace(self, value: Any, sort_key: Any, record: Mapping[str, Any]) -> None:
        highest = self.highest
        if sort_key is not None and (highest is None or (sort_key[0] == highest[0] and sort_key > highest)):
            self.highest = sort_key
        entry = self._current
        if entry is not None:
            self._kept -= len(entry.records)
            entry.cursor, entry.sort_key, entry.overflow = value, sort_key, False
            entry.records = {}
        else:
            entry = self._current = self._entries[self._partition] = _Entry(value, sort_key, {})
        self._dirty.add(self._partition)
        if self._keyless:
            return
        if self._kept >= MAX_KEYS:
            self._overflow(entry)
            return
        key_field = self._key_field
        entry.records[(record.get(key_field),) if key_field is not None else self._key(record)] = record
        self._kept += 1

    def _overflow(self, entry: _Entry) -> None:
        at_cursor = len(entry.records) + 1
        self._kept -= len(entry.records)
        entry.records, entry.overflow = {}, True
        self._mark()
        if not self._warned:
            self._warned = True
            logger.warning(
                "stream %s: more than %d records sit at the highest cursor values of its partitions, more than a "
                "checkpoint keeps: partition %s keeps none at cursor %r. A sync that starts from that cursor (the next "
                "one, or one resumed after a crash) reads the records there again and they are written again: in an "
                "append table the %d record(s) read at that cursor so far, and any more that share it, will be there "
                "twice; append_dedup tables keep one row per key",
                self.stream, MAX_KEYS, self._partition or '""', entry.cursor, at_cursor,
            )

    def _mark(self) -> None:
        self._dirty.add(self._partition)

    def mark(self) -> int:
        """A checkpoint: hash the partitions changed since the last mark now, so the records are not kept alive until ``notes``."""
        number = self._next_mark
        self._next_mark += 1
        if self._dirty or self._dropped:
            entries, declared = self._entries, self._declared
            taken: list[tuple[str, _Entry | None]] = [
                (p, _Entry(e.cursor, e.sort_key, dict(_hashed(e, declared).records), e.overflow))
                for p in self._dirty for e in (entries[p],)
            ]
            taken += [(slot, None) for slot in self._dropped]
            self._marks.append((number, taken, bool(self._dropped)))
            self._unbuilt_records += sum(len(entry.records) for _, entry in taken if entry is not None)
            self._dirty.clear()
            self._dropped = []
            marks = self._marks
            while len(marks) > 2 and (len(marks) > MAX_UNBUILT_MARKS or self._unbuilt_records > MAX_UNBUILT_RECORDS):
                self._build(marks[0][0])
        return number

    def notes(self, mark: int, unconfirmed: int) -> tuple[dict[str, Any], bool]:
        """The boundary to keep with the commit of checkpoint ``mark``, and whether it is full (else a delta).

        The delta covers every change since the newest confirmed commit, not just the previous mark, because a
        destination may merge queued checkpoints into one write that keeps only the last one's notes.
        """
        if mark < self._built:
            raise RuntimeError(f"stream {self.stream}: the notes of checkpoint {mark} were asked for after those of {self._built}")
        base = mark - unconfirmed - 1  # the newest mark known committed, -1: none
        self._build(mark)
        delta = self._changed_since(base) if base >= 0 else None
        if delta is None or self._full_due(mark, len(delta)):
            self._last_full, self._delta_since_full = mark, 0
            return dict(self._json), True
        self._delta_since_full += len(delta)
        boundary = {p: self._json.get(p) or self._left_out[p] for p in delta}
        return boundary, False

    def _full_due(self, mark: int, delta_size: int) -> bool:
        if self._force_full:
            self._force_full = False
            return True
        return mark - self._last_full >= FULL_EVERY or self._delta_since_full + delta_size >= len(self._json)

    def _changed_since(self, base: int) -> list[str]:
        changed = []
        for partition, mark in reversed(self._changed.items()):
            if mark <= base:
                break
            changed.append(partition)
        return changed

    def _build(self, upto: int) -> None:
        self._built = max(self._built, upto)
        marks: list[tuple[int, list[tuple[str, _Entry | None]], bool]] = []
        while self._marks and self._marks[0][0] <= upto:
            marks.append(self._marks.popleft())
        newest: dict[str, tuple[int, _Entry | None]] = {}
        for number, taken, force_full in reversed(marks):
            self._force_full = self._force_full or force_full
            for partition, entry in taken:
                if entry is not None:
                    self._unbuilt_records -= len(entry.records)
                newest.setdefault(partition, (number, entry))
        for partition, (number, entry) in sorted(newest.items(), key=lambda item: item[1][0]):
            self._json.pop(partition, None)
            self._left_out.pop(partition, None)
            self._changed.pop(partition, None)
            if entry is None:
                continue
            self._changed[partition] = number
            if entry.records or self._keyless:
                self._json[partition] = _entry_json(entry, self._keyless)
            else:
                self._left_out[partition] = _entry_json(entry)

    def _load(self, resumed: Mapping[str, Any]) -> None:
        unhashed = 0
        for partition, raw in resumed.items():
            if partition.startswith("#"):
                self._carried.append(partition)
            cursor = raw.get("cursor")
            reached = _sort_key(cursor)
            if reached is not None:
                slot = "#" if partition.startswith("#") else partition
                known = self._reached.get(slot)
                if known is None or (known[0] == reached[0] and reached > known):
                    self._reached[slot] = reached
            if self._keyless:
                self._entries[partition] = _Entry(cursor, _sort_key(cursor), {})
                self._json[partition] = _entry_json(self._entries[partition], keyless=True)
                continue
            if raw.get("overflow"):
                self._entries[partition] = _Entry(cursor, _sort_key(cursor), {}, overflow=True)
                continue
            pairs = raw.get("records")
            if pairs is None:  # written before record hashes: skip nothing here
                unhashed += len(raw.get("keys") or ())
                self._entries[partition] = _Entry(cursor, _sort_key(cursor), {})
                continue
            records = {_as_key(key): digest for key, digest in pairs if isinstance(digest, str)}
            self._entries[partition] = _Entry(cursor, _sort_key(cursor), dict(records))
            if _hashable(cursor):
                self._skip.setdefault(cursor, {}).update(records)
            self._kept += len(records)
            if records:
                self._json[partition] = _entry_json(self._entries[partition])
        if unhashed:
            logger.warning(
                "stream %s: the table's checkpoint was written before record hashes were kept; the %d record(s) at "
                "its cursor are read again and written, since an update made at the same cursor could not be told "
                "from the committed record (append_dedup tables keep one row per key)", self.stream, unhashed,
            )

    def _key(self, record: Mapping[str, Any]) -> tuple[Any, ...]:
        if self._key_field is not None:
            return (record.get(self._key_field),)
        values = []
        for path in self._key_paths:
            node: Any = record
            for part in path:
                node = node.get(part) if isinstance(node, Mapping) else None
            values.append(node)
        return tuple(values)


def _hashed(entry: _Entry, declared: frozenset[str] | None) -> _Entry:
    records = entry.records
    for key, value in records.items():
        if value is not None and type(value) is not str:
            records[key] = record_hash(value, declared)
    return entry


def _entry_json(entry: _Entry, keyless: bool = False) -> dict[str, Any]:
    if keyless:
        return {"cursor": entry.cursor}
    if entry.overflow:
        return {"cursor": entry.cursor, "overflow": True}
    return {"cursor": entry.cursor, "records": [[list(key), digest] for key, digest in entry.records.items() if digest]}


def _hashable(value: Any) -> bool:
    try:
        hash(value)
    except TypeError:
        return False
    return True


def _as_key(value: Any) -> tuple[Any, ...]:
    return tuple(value) if isinstance(value, (list, tuple)) else (value,)


def _sort_key(value: Any) -> Any:
    try:
        return cursor_sort_key(value)
    except CursorValueError:
        return None
