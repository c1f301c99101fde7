"""Fetching a slice's pages at once, where the stream allows it.

Most APIs say on the first page of a slice how many pages follow (page numbers with a total, an
offset with a total count). A stream built on ``IncrementalHttpStream`` that can name every
following page from the first one overrides ``page_tokens``; the runtime, reading with
``--concurrency`` above 1, then fetches those pages at once, with whatever of its fetch permits
no other slice uses, and still hands the records on in page order, so the cursor, the
checkpoints and the table are those of a sync that reads one page after another::

    class Orders(DateWindowStream):
        def next_page_token(self, response):
            body = page_json(response)
            return {"page": body["page"] + 1} if body["page"] < body["total_pages"] else None

        def page_tokens(self, response):            # every page after the first, at once
            body = page_json(response)
            return [{"page": n} for n in range(body["page"] + 1, body["total_pages"] + 1)]

``PageFetches`` is what the runtime gives a slice's reader for that; without one (airbyte-cdk's
own ``launch``, ``--concurrency 1``) the pages are fetched one after another.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from typing import Protocol, TypeVar

T = TypeVar("T")
R = TypeVar("R")


class PageFetches(Protocol):
    """Runs ``fetch`` over ``tokens``, several at once where it can, and yields the results in the
    tokens' order. A failure is raised where its page's result would have been yielded."""

    def map_in_order(self, fetch: Callable[[T], R], tokens: Iterable[T]) -> Iterator[R]: ...

