"""Not writing twice the records that sit exactly on a resumed cursor.

APIs filter with ``updatedAt >= cursor``: a sync resumed from a state re-reads the records whose
cursor equals the state's value. The CDK, Singer and Fivetran accept those duplicates. We keep,
with every commit, each partition's highest cursor value and, for the records carrying it, their
primary key and a hash of their data (the fields the schema declares: only they get a column;
the "boundary"); a run that resumes from exactly that
commit's state skips a re-read record only when key AND hash match: it is byte for byte a record
the table holds. A record updated since, at a new cursor value or at the same one (timestamps
with second granularity), is always written.

Below the boundary. A record read again with a cursor under the one its partition had reached
in the resumed commit (``"#"``: under the highest of the slots) cannot be told from a new one
by the boundary: ``already_committed`` answers None and the read loop asks the table
(``EarlierCommits.already_in_table``), which compares it row for row with what it holds under its key. So
does a record without a cursor value in a run that resumes from a commit: no state passes it,
so every sync reads it again.

Without a primary key, the boundary keeps each partition's cursor only (``{"cursor": ...}``),
and every record read again at or under it is for the table to tell: ``already_in_table`` counts the rows
of earlier syncs with exactly that data, each answering for one record read again, so two
identical events committed are skipped twice and a third one like them is written. Only the
table can count so: the same data may sit in several partitions, which a boundary per partition
would count once each. (A row written before a date-time column became text holds the rewrite's
text, which the table also looks for; other widenings keep what a record converts to, but for
rare number texts: see ``TableWriter.already_in_table``.)

Which partition a record belongs to: its slice's partition (``streams.cursor.partition_key``:
a parent record, a store), where the slice names one. Slices that name none (date windows, a
substream's plain ``{"store_id": 1, "since": ...}`` dicts) each get a slot of their own for this
run (``#<run>:<n>``): such slices change from run to run (their start moves with the state), so
their slots are not matched across runs. Skipping does not need them to be: a re-read record is
looked up by its cursor value and key among everything the resumed commit kept, whatever its
partition. The slots of an earlier run are carried until this run has read the stream to its
end, then dropped (a full snapshot follows).

Per partition, as JSON (``snapshot``, ``checkpoint``)::

    {"cursor": "2025-01-01T00:00:00Z", "records": [[[7], "47e1fef8832747b9"], ...]}   # [key, hash]
    {"cursor": "2025-01-01T00:00:00Z", "overflow": true}   # too many records there: skip nothing
    {"cursor": "2025-01-01T00:00:00Z"}                     # without a primary key

Older records (before hashes) hold ``{"cursor": ..., "keys": [[7], ...]}``: a resume from one
skips nothing there (a key cannot tell the committed record from an update at the same cursor;
writing a record again is recoverable, dropping an update is not). The log says so once.

Cost. A partitioned stream checkpoints after every partition, so ``checkpoint`` hands out only
the partitions that changed since the newest commit known to be done (a delta), and a full
snapshot when none is known yet in this run, every ``FULL_EVERY`` checkpoints, or when the
deltas since the last full one add up to its size; each partition's JSON is rebuilt only when
it changes. ``runtime.resume`` rebuilds the boundary by walking the records newest first back
to a full one. The size is bounded: past ``MAX_KEYS`` records in all, the partition that
overflows keeps no boundary (one warning per stream); on resume its records at that cursor are
read and written again. So a checkpoint costs the partitions that changed plus, amortised, at
most ``MAX_KEYS / FULL_EVERY`` entries of a full snapshot, whatever the number of partitions.

Two steps, because most checkpoints' notes are never kept: ``mark`` (at the checkpoint) only
hashes the records new at the partitions that changed since the last mark and copies those
partitions, without JSON; ``notes`` (when the destination writes that checkpoint's commit) turns
the marks up to it into the JSON above.
A destination that takes several fast checkpoints as one commit (``spark/buffer.py``) keeps
only the last one's notes, so the others' are never built. Notes are asked for in the order of
their marks; marks passed over are folded into the next one asked for::

    first = boundary.mark()            # a checkpoint: the records so far
    ...                                # more records
    second = boundary.mark()
    boundary.notes(second, unconfirmed=0)   # (delta or full, is it full): as of ``second``
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

#: Boundary records kept per stream, all partitions together (~30 bytes each as JSON).
MAX_KEYS = 10_000
#: A full snapshot at least every this many checkpoints: a resume walks back at most about as
#: many records, well within the newest records a table keeps (``spark/table.py``, 1,000).
FULL_EVERY = 100

#: Marks kept unbuilt, and the record hashes their copies hold in all: past either, the oldest are
#: built (a destination that keeps no notes, stdout, never asks for them); the newest two never
#: are (the Spark buffer asks for the last mark it holds, at the latest when the next one comes).
MAX_UNBUILT_MARKS = 256
MAX_UNBUILT_RECORDS = MAX_KEYS

_HASH_BYTES = 8  # 64 bits: a changed record matching its committed hash has odds of 2**-64


def record_hash(record: Mapping[str, Any], declared: Set[str] | None = None) -> str | None:
    """A short hash of ``record``'s data as handed to the destination, or None if it has no
    canonical JSON form (such a record is never skipped). ``declared``: the schema's top-level
    fields, the only ones that get a column; the others (a read time a connector adds) do not make
    the row another one.

    Why orjson with sorted keys and blake2b: the same data gives the same bytes whatever the
    key order, quickly; 8 bytes of blake2b keep each boundary record's hash at 16 characters.
    """
    if declared is not None and not record.keys() <= declared:  # (most records carry only declared fields)
        record = {name: value for name, value in record.items() if name in declared}
    try:
        encoded = orjson.dumps(record if isinstance(record, dict) else dict(record), option=orjson.OPT_SORT_KEYS)
    except (TypeError, ValueError):
        return None
    return hashlib.blake2b(encoded, digest_size=_HASH_BYTES).hexdigest()


class _Entry:
    """One partition's highest cursor value and its records there: key -> hash, or -> the
    record itself until the next checkpoint (most records are displaced by a higher cursor
    before then; only those still in the boundary are hashed)."""

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
        # Without a primary key every record read again is known by its data, in the table (``already_in_table``).
        self._keyless = not primary_key
        self.stream = stream
        self._declared = frozenset(declared) if declared is not None else None  # see record_hash
        self.cursor_field = self._cursor = cursor_field[0] if cursor_field else ""
        self._key_paths = primary_key
        # Most keys are one top-level field: read it without walking a path (a call per record).
        self._key_field = primary_key[0][0] if len(primary_key) == 1 and len(primary_key[0]) == 1 else None
        self._entries: dict[str, _Entry] = {}
        # What the resumed commit holds, by cursor value then key -> hash: skipped once each.
        self._skip: dict[Any, dict[tuple[Any, ...], str]] = {}
        self._run = uuid.uuid4().hex[:6]  # names this run's slots for slices without a partition
        self._slots = 0
        self._carried: list[str] = []  # slots of earlier runs, dropped once this run read every slice
        self._force_full = False
        self._kept = 0  # records in all entries, against MAX_KEYS
        # As of the last mark notes were built for: each kept partition as JSON (rebuilt when it
        # changes), the JSON of those a full boundary leaves out (overflowed: nothing to skip), and
        # the mark each last changed at.
        self._json: dict[str, dict[str, Any]] = {}
        self._left_out: dict[str, dict[str, Any]] = {}
        self._changed: dict[str, int] = {}  # (oldest change first)
        self._dirty: set[str] = set()  # partitions changed since the last mark
        self._dropped: list[str] = []  # slots ``finish`` dropped since the last mark
        # Marks whose notes are not built yet: (mark, its partitions as they were (None: dropped),
        # whether its notes must be full)
        self._marks: deque[tuple[int, list[tuple[str, _Entry | None]], bool]] = deque()
        self._unbuilt_records = 0
        self._next_mark = 0
        self._built = -1  # the newest mark the JSON was brought up to
        self._last_full = 0
        self._delta_since_full = 0
        self._warned = False
        self._partition = ""
        self._current: _Entry | None = None
        #: the sort key of the cursor each partition of the resumed commit had reached ("#": the
        #: highest of the slots of slices without a partition), and the current partition's
        self._reached: dict[str, Any] = {}
        self._reached_here: Any = None
        self.skipped = 0
        #: the sort key of the highest cursor value of this run's records (``cursor_sort_key``)
        self.highest: Any = None
        self._resumed = resumed is not None  # from a commit: records without a cursor value may be in the table
        self._load(resumed or {})

    # -- reading ------------------------------------------------------------------------

    def start_partition(self, partition: str) -> None:
        """The records that follow belong to ``partition`` (see ``streams.cursor.partition_key``);
        ``""``: a slice that names no partition, which gets a slot of its own for this run."""
        if not partition:
            partition = f"#{self._run}:{self._slots}"
            self._slots += 1
            # Slots are not matched across runs: compare with the highest cursor of any of them.
            self._reached_here = self._reached.get("#")
        else:
            self._reached_here = self._reached.get(partition)
        self._partition = partition
        self._current = self._entries.get(partition)

    def finish(self) -> None:
        """Every slice was read: the slots of earlier runs are superseded by this run's."""
        for slot in self._carried:
            entry = self._entries.pop(slot, None)
            if entry is not None:
                self._kept -= len(entry.records)
            self._dropped.append(slot)  # gone from the notes of the next mark on
        self._carried = []

    def already_committed(self, record: Mapping[str, Any]) -> bool | None:
        """Track ``record``; True if the resumed commit holds exactly this record at this cursor.
        None: it lies below where the resumed commit's partition had got (a lookback window, a
        parent read again from the start), or, without a primary key, at or below it, or it has no
        cursor value and the run resumes from a commit, so the table may hold it: ask the table
        (``already_in_table``)."""
        if not self.enabled:
            return False
        value = record.get(self._cursor)
        if value is None:
            return None if self._resumed else False
        # Skipped or not, the record is at this partition's edge in the table: noted there. (Written
        # out, as are ``_replace``'s steps: this runs for nearly every record, and a call is ~5% of it.)
        entry = self._current
        if entry is not None and value == entry.cursor:
            self._add(entry, record)
            sort_key = entry.sort_key
        else:
            try:
                sort_key = cursor_sort_key(value)
            except CursorValueError:
                sort_key = None  # (not comparable)
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
        """The resumed commit holds this very record (key and hash): skip it, once."""
        key = self._key(record)
        committed = skip.get(key)
        if committed is None or committed != record_hash(record, self._declared):
            return False
        del skip[key]
        return True

    def _add(self, entry: _Entry, record: Mapping[str, Any]) -> None:
        """Another record at the partition's highest cursor."""
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
        """A new highest cursor value for the partition: its records start over."""
        highest = self.highest
        if sort_key is not None and (highest is None or (sort_key[0] == highest[0] and sort_key > highest)):
            self.highest = sort_key
        entry = self._current
        if entry is not None:
            # Most records of a sorted stream raise the cursor: the entry is reused, not rebuilt.
            self._kept -= len(entry.records)
            entry.cursor, entry.sort_key, entry.overflow = value, sort_key, False
            entry.records = {}
        else:
            entry = self._current = self._entries[self._partition] = _Entry(value, sort_key, {})
        self._dirty.add(self._partition)  # (``_mark``)
        if self._keyless:  # the cursor alone
            return
        if self._kept >= MAX_KEYS:
            self._overflow(entry)
            return
        key_field = self._key_field  # (``_key``)
        entry.records[(record.get(key_field),) if key_field is not None else self._key(record)] = record
        self._kept += 1

    def _overflow(self, entry: _Entry) -> None:
        """Stop keeping the partition's boundary at this cursor value (it would exceed MAX_KEYS)."""
        at_cursor = len(entry.records) + 1  # with the record that overflowed it
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
        """The current partition changed for the next mark."""
        self._dirty.add(self._partition)

    # -- checkpoints ----------------------------------------------------------------------

    def mark(self) -> int:
        """A checkpoint: note the partitions changed since the last mark as they are now (a copy
        of each one's records' hashes); its notes are built by ``notes``, if ever asked for.

        Why hash here, not when the notes are built: a copy of the records kept them alive, and
        all they hold, until then (up to ``MAX_UNBUILT_MARKS`` checkpoints where nobody asks, as
        with stdout), which slowed the whole read loop. A record is hashed once."""
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
        """The boundary to keep with the commit of checkpoint ``mark``, and whether it is full
        (else a delta). Asked for in the order of the marks, each at most once.

        ``unconfirmed``: how many of the marks before it belong to commits not known to be done
        (counted when it was marked). The delta covers every change since the newest confirmed
        one, not just since the previous mark, because a destination may merge queued
        checkpoints into one write that keeps only the last one's notes (``spark/committer.py``).
        """
        if mark < self._built:  # the JSON is past it: its notes would name records it does not cover
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
        """Full once the deltas since the last full one add up to its size (so it costs no more
        than they did), every ``FULL_EVERY`` checkpoints (so the walk back on resume is short), and
        after ``finish`` dropped slots (a delta cannot say that a partition is gone)."""
        if self._force_full:
            self._force_full = False
            return True
        return mark - self._last_full >= FULL_EVERY or self._delta_since_full + delta_size >= len(self._json)

    def _changed_since(self, base: int) -> list[str]:
        """Partitions changed after mark ``base``, newest change first."""
        changed = []
        for partition, mark in reversed(self._changed.items()):
            if mark <= base:
                break
            changed.append(partition)
        return changed

    def _build(self, upto: int) -> None:
        """Bring the JSON up to mark ``upto``: rebuild the JSON of the partitions the marks up to
        it took (their records hashed by ``mark``). A partition taken by several of them is built once, as
        the newest took it (a sorted stream's one partition changes at every mark)."""
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
        for partition, (number, entry) in sorted(newest.items(), key=lambda item: item[1][0]):  # (oldest change first)
            self._json.pop(partition, None)
            self._left_out.pop(partition, None)
            self._changed.pop(partition, None)
            if entry is None:  # a slot ``finish`` dropped
                continue
            self._changed[partition] = number
            if entry.records or self._keyless:
                self._json[partition] = _entry_json(entry, self._keyless)
            else:
                self._left_out[partition] = _entry_json(entry)

    # -- resuming -------------------------------------------------------------------------

    def _load(self, resumed: Mapping[str, Any]) -> None:
        """Start from the resumed commit's boundary: what to skip, and what this run's first
        full snapshot carries over for partitions it does not read again."""
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
            if self._keyless:  # the cursor is all it needs (records kept by earlier versions are not)
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
    """``entry`` with its records replaced by their hashes, in place: none is hashed twice."""
    records = entry.records
    for key, value in records.items():
        if value is not None and type(value) is not str:  # a record not hashed yet (``_Entry``)
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
