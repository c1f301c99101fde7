"""Waiting what the API asks: ``Retry-After`` on a 429 or a 503.

airbyte-cdk 7's ``HttpStream`` asks its ``get_backoff_strategy()`` how long to wait before a retry;
``None`` leaves the CDK's own exponential back-off. Without this, a stream waited 1, 2, 4 s
whatever ``Retry-After`` said: too soon for an API that asked for 30 s (each early retry is
another 429), too long for one that asked for 1 s. ``RetryAfterBackoff`` gives the framework's
bases (``RecordsAtPath``, so every stream built on them) that strategy. A connector's own
``backoff_time`` (airbyte-cdk's older hook) is used instead, wherever it sits in the class's bases;
it may call ``retry_after_wait`` for the header's wait. Why a strategy and not ``backoff_time``:
a stream with a ``backoff_time`` gets the CDK's deprecated adapter, and a DeprecationWarning in
every connector's test run.

airbyte-cdk sleeps one second more than the back-off it is given ("to cover fractions of a
second"): ``Retry-After: 5`` waits 6 s.
"""

from __future__ import annotations

import email.utils
import math
import time
from typing import Any

import requests
from airbyte_cdk.sources.streams.http.error_handlers import BackoffStrategy

#: Statuses whose ``Retry-After`` says when to come back (RFC 9110, section 10.2.3).
RETRY_AFTER_STATUSES = frozenset({429, 503})


class RetryAfterBackoff:
    """A stream mixin: retries wait what a 429's or 503's ``Retry-After`` says (seconds or an
    HTTP-date), at most ``max_retry_after`` seconds; otherwise airbyte-cdk's exponential back-off."""

    #: The longest wait a ``Retry-After`` gets: airbyte-cdk's own limit on a request's retries
    #: (``HttpClient``'s ``max_time``, 10 minutes); an API asking for a day is not waited for a day.
    max_retry_after: float = 600.0

    def get_backoff_strategy(self) -> BackoffStrategy:
        return RetryAfter(self)

    def retry_after_wait(self, response_or_exception: Any) -> float | None:
        """The seconds ``Retry-After`` asks for, capped; None where it asks nothing."""
        if not isinstance(response_or_exception, requests.Response):
            return None
        if response_or_exception.status_code not in RETRY_AFTER_STATUSES:
            return None
        seconds = retry_after_seconds(response_or_exception.headers.get("Retry-After"))
        if seconds is None:
            return None
        return min(seconds, self.max_retry_after)


class RetryAfter(BackoffStrategy):
    """The back-off airbyte-cdk's HTTP client asks: the connector's own ``backoff_time`` if it has
    one, else ``Retry-After``'s wait."""

    def __init__(self, stream: RetryAfterBackoff) -> None:
        self.stream = stream

    def backoff_time(self, response_or_exception: Any, attempt_count: int) -> float | None:
        own = getattr(self.stream, "backoff_time", None)
        if own is not None:
            return own(response_or_exception)
        return self.stream.retry_after_wait(response_or_exception)


def retry_after_seconds(value: str | None, now: float | None = None) -> float | None:
    """Seconds to wait from a ``Retry-After`` value: a number of seconds, or an HTTP-date (the
    time left until then). ``None`` for no value, one that cannot be read, or a date already
    past (the CDK's own back-off then applies)."""
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
