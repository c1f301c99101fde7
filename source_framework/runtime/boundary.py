"""Not writing twice the records that sit exactly on a resumed cursor.

APIs filter with ``updatedAt >= cursor``: a sync resumed from a state re-reads the records whose
cursor equals the state's value. The CDK, Singer and Fivetran accept those duplicates. We keep
the primary keys of the records at each partition's highest cursor value with every commit
(the "boundary"); a run that resumes from exactly that commit's state skips them.

A record is skipped only if the same key was committed *at the same cursor value*, so a record
updated since (new cursor value) is always written.
"""

from __future__ import annotations

from typing import Any, Dict, List, Mapping, Optional, Tuple

from source_framework.streams.cursor import CursorValueError, cursor_sort_key, partition_key


class Boundary:
    """Tracks, per partition, the highest cursor value and the keys of the records carrying it."""

    def __init__(
        self,
        cursor_field: List[str],
        primary_key: List[List[str]],
        resumed: Optional[Mapping[str, Any]] = None,
    ) -> None:
        self.enabled = len(cursor_field) == 1 and bool(primary_key)
        self._cursor = cursor_field[0] if cursor_field else ""
        self._key_paths = primary_key
        # partition -> [cursor value, sort key, set of record keys]
        self._entries: Dict[str, List[Any]] = {}
        self._skip: Dict[str, Tuple[Any, set]] = {}
        for partition, entry in (resumed or {}).items():
            keys = {_as_key(k) for k in entry.get("keys", [])}
            self._skip[partition] = (entry.get("cursor"), keys)
            self._entries[partition] = [entry.get("cursor"), _sort_key(entry.get("cursor")), set(keys)]
        self._partition = ""
        self._current: Optional[List[Any]] = None
        self._current_skip: Optional[Tuple[Any, set]] = None
        self.skipped = 0

    def start_slice(self, stream_slice: Optional[Mapping[str, Any]]) -> None:
        self.start_partition(partition_key(stream_slice))

    def start_partition(self, partition: str) -> None:
        """The records that follow belong to ``partition`` (see ``streams.cursor.partition_key``)."""
        self._partition = partition
        self._current = self._entries.get(self._partition)
        self._current_skip = self._skip.get(self._partition)

    def already_committed(self, record: Mapping[str, Any]) -> bool:
        """Track ``record``; True if it was committed before at this same cursor value."""
        if not self.enabled:
            return False
        value = record.get(self._cursor)
        if value is None:
            return False
        skip = self._current_skip
        if skip is not None and value == skip[0]:
            key = self._key(record)
            if key in skip[1]:
                skip[1].discard(key)
                self.skipped += 1
                return True
        entry = self._current
        if entry is not None and value == entry[0]:
            entry[2].add(self._key(record))
            return False
        sort_key = _sort_key(value)
        if entry is None or entry[1] is None or (sort_key is not None and sort_key > entry[1]):
            self._current = self._entries[self._partition] = [value, sort_key, {self._key(record)}]
        return False

    def snapshot(self) -> Dict[str, Any]:
        """JSON-able, to be stored with a commit."""
        return {
            partition: {"cursor": value, "keys": sorted((list(k) for k in keys), key=repr)}
            for partition, (value, _, keys) in self._entries.items()
            if keys
        }

    def _key(self, record: Mapping[str, Any]) -> Tuple[Any, ...]:
        values = []
        for path in self._key_paths:
            node: Any = record
            for part in path:
                node = node.get(part) if isinstance(node, Mapping) else None
            values.append(node)
        return tuple(values)


def _as_key(value: Any) -> Tuple[Any, ...]:
    return tuple(value) if isinstance(value, (list, tuple)) else (value,)


def _sort_key(value: Any) -> Any:
    try:
        return cursor_sort_key(value)
    except CursorValueError:
        return None
