"""``Retry-After`` on a 429 or 503, as a back-off strategy (``backoff_time`` gets the CDK's deprecated adapter)."""

from __future__ import annotations

import email.utils
import math
import time
from typing import Any

import requests
from airbyte_cdk.sources.streams.http.error_handlers import BackoffStrategy

RETRY_AFTER_STATUSES = frozenset({429, 503})


class RetryAfterBackoff:
    """A stream mixin: retries wait what ``Retry-After`` says, at most ``max_retry_after`` s; else airbyte-cdk's back-off."""

    #: airbyte-cdk's own limit on a request's retries: an API asking for a day is not waited for a day.
    max_retry_after: float = 600.0

    def get_backoff_strategy(self) -> BackoffStrategy:
        return RetryAfter(self)

    def retry_after_wait(self, response_or_exception: Any) -> float | None:
        if not isinstance(response_or_exception, requests.Response):
            return None
        if response_or_exception.status_code not in RETRY_AFTER_STATUSES:
            return None
        seconds = retry_after_seconds(response_or_exception.headers.get("Retry-After"))
        if seconds is None:
            return None
        return min(seconds, self.max_retry_after)


class RetryAfter(BackoffStrategy):
    """The connector's own ``backoff_time`` if it has one, else ``Retry-After``'s wait."""

    def __init__(self, stream: RetryAfterBackoff) -> None:
        self.stream = stream

    def backoff_time(self, response_or_exception: Any, attempt_count: int) -> float | None:
        own = getattr(self.stream, "backoff_time", None)
        if own is not None:
            return own(response_or_exception)
        return self.stream.retry_after_wait(response_or_exception)


def retry_after_seconds(value: str | None, now: float | None = None) -> float | None:
    """Seconds from a ``Retry-After`` value (seconds or HTTP-date); None if absent, unreadable or already past."""
    if value is None or not value.strip():
        return None
    text = value.strip()
    try:
        seconds = float(text)
    except ValueError:
        try:
            when = email.utils.parsedate_to_datetime(text)
        except (TypeError, ValueError, IndexError):
            return None
        if when.tzinfo is None:  # an HTTP-date is GMT even when it does not say so
            return None
        seconds = when.timestamp() - (time.time() if now is None else now)
    if not math.isfinite(seconds) or seconds <= 0:
        return None
    return seconds
