"""The pages a ``RecordsAtPath`` stream parsed, kept for a destination that makes rows from their bytes."""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class RawPage:
    body: bytes
    items: list[Any]
    extracted_at_ms: int


class RawPages:
    """Pages parsed lately, off until a destination turns it on; unclaimed ones fall out oldest first and convert as usual."""

    def __init__(self, path: Sequence[str], keep: int = 256, keep_bytes: int = 64 << 20) -> None:
        self.path = tuple(path)
        self.enabled = False
        #: pages added so far: a failed claim need not be retried until it grows
        self.added = 0
        self._recent: deque[RawPage] = deque()
        self._bytes = 0
        self._keep, self._keep_bytes = keep, keep_bytes
        self._lock = threading.Lock()

    def add(self, body: bytes, items: list[Any]) -> None:
        if self.enabled and items:
            with self._lock:
                self._recent.append(RawPage(body, items, int(time.time() * 1000)))
                self._bytes += len(body)
                self.added += 1
                while len(self._recent) > self._keep or (self._bytes > self._keep_bytes and len(self._recent) > 1):
                    self._bytes -= len(self._recent.popleft().body)

    def claim(self, record: Any) -> tuple[RawPage, int] | None:
        """The page whose items hold ``record`` itself (not an equal copy), and its index; None where none does. The page is given away."""
        with self._lock:
            pages = list(self._recent)
        for page in pages:
            if page.items[0] is record:
                return self._take(page, 0)
        for page in pages:  # a page whose first records were not written (skipped on resume)
            for index, item in enumerate(page.items):
                if item is record:
                    return self._take(page, index)
        return None

    def _take(self, page: RawPage, index: int) -> tuple[RawPage, int]:
        with self._lock:
            try:
                self._recent.remove(page)
            except ValueError:
                pass  # fell out meanwhile: it is the claimer's all the same
            else:
                self._bytes -= len(page.body)
        return page, index
