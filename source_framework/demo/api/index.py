"""Positional index over one ordered lane of demo records, so every request costs O(page), not O(records)."""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from collections.abc import Iterable


class Lane:
    """Ids of one progression, ordered by (time, id), with moved ids kept in an overlay."""

    def __init__(self, first: int, stride: int, count: int, t0: int, step: int) -> None:
        if first < 1 or stride < 1 or count < 0 or step < 1:
            raise ValueError("lane needs first >= 1, stride >= 1, count >= 0, step >= 1")
        self.first = first
        self.stride = stride
        self.count = count
        self.t0 = t0
        self.step = step
        # Sorted ids that no longer sit at their base position (a set alongside for O(1) lookups).
        self._holes: list[int] = []
        self._hole_set: set[int] = set()
        self._overlay: list[tuple[int, int]] = []
        self._overlay_ids: set[int] = set()

    def __len__(self) -> int:
        return self.count

    def base_time(self, record_id: int) -> int:
        return self.t0 + (record_id - 1) * self.step

    @property
    def last_time(self) -> int:
        """Latest time currently in the lane; a move must stamp something later than this."""
        if self._overlay:
            return self._overlay[-1][0]
        if self.count == 0:
            return self.t0 - 1
        return self.base_time(self.first + (self.count - 1) * self.stride)

    def rank(self, time: int, record_id: int) -> int:
        """Number of members whose (time, id) key sorts strictly before (time, record_id)."""
        # Base times increase with the id, so the members before the key are the ids <= some bound.
        offset = time - self.t0
        below = -(-offset // self.step) if offset > 0 else 0
        bound = below
        if offset >= 0 and offset % self.step == 0 and offset // self.step + 1 < record_id:
            bound = offset // self.step + 1  # the id exactly at ``time`` sorts before the key too
        members = 0 if bound < self.first else min(self.count, (bound - self.first) // self.stride + 1)
        base_before = members - bisect_right(self._holes, bound)
        return base_before + bisect_left(self._overlay, (time, record_id))

    def ids(self, start: int, stop: int) -> list[int]:
        start = max(start, 0)
        stop = min(stop, self.count)
        if start >= stop:
            return []
        live_base = self.count - len(self._holes)
        result = self._base_ids(start, min(stop, live_base)) if start < live_base else []
        if stop > live_base:
            window = self._overlay[max(start - live_base, 0) : stop - live_base]
            result.extend(record_id for _, record_id in window)
        return result

    def move(self, moves: Iterable[tuple[int, int]]) -> None:
        """Re-stamp members (``(id, new_time)`` in increasing time, later than all in the lane): that keeps the overlay an append."""
        moves = list(moves)
        if not moves:
            return
        floor = self.last_time
        for record_id, new_time in moves:
            if new_time <= floor:
                raise ValueError("moves must stamp strictly increasing times after the lane's latest")
            if not self._is_member(record_id):
                raise ValueError(f"id {record_id} is not in this lane")
            floor = new_time
        moved = {record_id for record_id, _ in moves}
        if len(moved) != len(moves):
            raise ValueError("an id may be moved only once per call")
        again = moved & self._overlay_ids
        if again:
            self._overlay = [entry for entry in self._overlay if entry[1] not in again]
        self._overlay.extend((new_time, record_id) for record_id, new_time in moves)
        self._overlay_ids |= moved
        fresh = moved - self._hole_set
        if fresh:
            self._hole_set |= fresh
            self._holes = sorted(self._hole_set)

    def _is_member(self, record_id: int) -> bool:
        index, remainder = divmod(record_id - self.first, self.stride)
        return remainder == 0 and 0 <= index < self.count

    def _base_index(self, position: int) -> int:
        holes = self._holes
        low, high = position, min(self.count - 1, position + len(holes))
        while low < high:  # smallest index with at least position + 1 live members up to it
            mid = (low + high) // 2
            live = mid + 1 - bisect_right(holes, self.first + mid * self.stride)
            if live >= position + 1:
                high = mid
            else:
                low = mid + 1
        return low

    def _base_ids(self, start: int, stop: int) -> list[int]:
        holes = self._holes
        index = self._base_index(start)
        record_id = self.first + index * self.stride
        hole = bisect_left(holes, record_id)
        result: list[int] = []
        wanted = stop - start
        while len(result) < wanted:
            if hole < len(holes) and holes[hole] == record_id:
                hole += 1
            else:
                result.append(record_id)
            record_id += self.stride
        return result
