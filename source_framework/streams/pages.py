"""Fetching a slice's pages at once, where the stream allows it.

A stream that can name every following page from the first one overrides ``page_tokens``; with
``--concurrency`` above 1 the runtime fetches them at once and still hands records on in page order.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from typing import Protocol, TypeVar

T = TypeVar("T")
R = TypeVar("R")


class PageFetches(Protocol):
    """Runs ``fetch`` over ``tokens``, several at once, yielding results in order; a failure is raised in its page's place."""

    def map_in_order(self, fetch: Callable[[T], R], tokens: Iterable[T]) -> Iterator[R]: ...

