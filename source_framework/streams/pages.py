"""Fetching a slice's pages at once (``page_tokens``, with ``--concurrency`` above 1), records still in page order."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from typing import Protocol, TypeVar

T = TypeVar("T")
R = TypeVar("R")


class PageFetches(Protocol):
    """Runs ``fetch`` over ``tokens``, several at once, yielding results in order; a failure is raised in its page's place."""

    def map_in_order(self, fetch: Callable[[T], R], tokens: Iterable[T]) -> Iterator[R]: ...

