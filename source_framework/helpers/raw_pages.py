"""The pages a stream parsed, kept for a destination that makes rows from their bytes.

A stream whose records are the items of its pages, unchanged (``streams.responses.RecordsAtPath``),
adds each page here as it parses it; the destination's sink, handed a record, claims the page that
holds that very object, and from then on expects the page's next items::

    pages = RawPages(path=("data",))
    pages.enabled = True                      # the destination wants them
    pages.add(body, items)                    # the stream, for each page (any thread)
    page, index = pages.claim(record)         # the sink: the page holding ``record``, and where
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class RawPage:
    """One page as the API sent it (``body``, the bytes orjson parsed) and the list of records
    the stream yields from it (``items``, the very objects), read at ``extracted_at_ms``."""

    body: bytes
    items: list[Any]
    extracted_at_ms: int


class RawPages:
    """The pages a stream parsed lately, for a destination that takes its records from the pages'
    bytes (``RecordsAtPath``). Off until a destination turns it on, so nothing is kept for others.

    Pages are added as they are parsed (by worker threads too, when slices are read at once) and
    claimed by the record the destination was handed: ``claim(record)`` finds the page that holds
    that very object, and gives it away. Pages nobody claims (every record skipped on resume, or
    read too far ahead) fall out oldest first beyond ``keep`` pages or ``keep_bytes`` of bodies:
    their records are then converted where they are written, as any stream's. Pages are claimed in
    order, so those kept are the ones read ahead of the sink: slices read at once parse hundreds of
    pages ahead (with 64 kept, 7% of 1,000 pages fell out at concurrency 4; none with 256).
    """

    def __init__(self, path: Sequence[str], keep: int = 256, keep_bytes: int = 64 << 20) -> None:
        self.path = tuple(path)
        self.enabled = False
        #: pages added so far: a claim that failed need not be tried again until it grows
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
        """The page whose items hold ``record`` itself (not an equal copy), and its index there;
        None where no page kept here does. The page is no longer kept. Costs a look at each item
        of each page kept where ``record`` is not a page's first item."""
        with self._lock:
            pages = list(self._recent)
        for page in pages:  # oldest first: records are handed on in page order
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
