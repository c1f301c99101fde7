"""One traceback per distinct error on stderr, and a failure's reason in one line.

When an API keeps failing, every worker reading a slice of the stream meets the same error, and
airbyte-cdk logs each with its traceback ("Retries exhausted with backoff exception."): with 4
workers that was about 150 lines of stderr saying one thing. ``RepeatedErrors`` is a logging
filter that lets the first log line carrying a given error (its type and message) through with
its traceback; a later one prints as its one line, counted: ``... (UserDefinedBackoffException:
the same error 3 more times; its traceback is above)``. Only stderr's logging is filtered: the
TRACE error messages on stdout stay one per failure, as the protocol has them.

``failure_reason`` is the summary's reason for a failed stream: its error in one short line,
with the config's secrets masked.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterator
from contextlib import contextmanager

from source_framework.runtime.secrets import SecretFilter

#: The longest reason the summary gives a failed stream, in characters.
REASON_LIMIT = 100

_JUDGED = "_source_framework_judged"  # set on a record once judged, so every handler prints it alike


class RepeatedErrors(logging.Filter):
    """Shows the traceback of an error (its type and message) the first time a log record carries
    it; a later record carrying the same error prints as one line, counted, without it."""

    def __init__(self) -> None:
        super().__init__()
        self._lock = threading.Lock()
        self._seen: dict[tuple[str, str], int] = {}  # error -> how many more times it was logged

    def filter(self, record: logging.LogRecord) -> bool:
        if getattr(record, _JUDGED, False):  # a second handler: the record is as the first left it
            return True
        setattr(record, _JUDGED, True)
        key = _error_key(record)
        if key is None:
            return True
        with self._lock:
            repeats = self._seen.get(key)
            self._seen[key] = 0 if repeats is None else repeats + 1
        if repeats is None:
            return True
        more = repeats + 1
        record.msg = f"{record.getMessage()} ({key[0]}: the same error {more} more time{'s' if more > 1 else ''}; " \
                     "its traceback is above)"
        record.args, record.exc_info, record.exc_text = (), None, None
        return True

    def repeats(self) -> dict[tuple[str, str], int]:
        """How many more times each error was logged after its first, by (type, message)."""
        with self._lock:
            return dict(self._seen)


def _error_key(record: logging.LogRecord) -> tuple[str, str] | None:
    """The error a record carries a traceback of, as (type, message); None for a plain line."""
    if not record.exc_info or record.exc_info[1] is None:
        return None
    error = record.exc_info[1]
    return type(error).__name__, str(error)


@contextmanager
def one_traceback_per_error(keep: bool = False) -> Iterator[RepeatedErrors]:
    """``RepeatedErrors`` on every handler of the root logger while the block runs. ``keep``: it
    stays on them after the block (a process of its own, about to exit), because a stream that
    failed does not wait for its other workers, and those log the same error a moment later."""
    repeats = RepeatedErrors()
    handlers = list(logging.getLogger().handlers)
    for handler in handlers:
        handler.addFilter(repeats)
    try:
        yield repeats
    finally:
        if not keep:
            for handler in handlers:
                handler.removeFilter(repeats)


def one_line(text: str, limit: int | None = None) -> str:
    """The first non-empty line of ``text``, cut to ``limit`` characters with ``...``."""
    line = next((part.strip() for part in text.splitlines() if part.strip()), "")
    if limit is not None and len(line) > limit:
        line = line[: limit - 3].rstrip() + "..."
    return line


def failure_reason(error: BaseException, secrets: SecretFilter | None = None) -> str:
    """The error in one line of at most ``REASON_LIMIT`` characters, secrets masked (before the
    cut, so a secret is never left half-shown). An airbyte-cdk error whose message wraps its
    cause ("Exhausted available request attempts. Please see logs ... Exception: HTTP Status
    Code: 500 ...") too long to show whole gives its cause instead: that is the part that says what happened."""
    mask = secrets.mask if secrets is not None else (lambda text: text)
    message = getattr(error, "message", None)  # airbyte-cdk's message for people: as it is
    if not isinstance(message, str) or not message:
        # the type says what a bare message does not ('id' is a KeyError's whole text)
        message = f"{type(error).__name__}: {error}" if str(error) else type(error).__name__
    text = one_line(mask(message))
    # airbyte-cdk's AirbyteTracedException keeps its cause as _exception; others chain it
    cause = getattr(error, "_exception", None) or error.__cause__ or error.__context__
    if len(text) > REASON_LIMIT and isinstance(cause, BaseException):
        cause_text = one_line(mask(str(cause)))
        if cause_text and cause_text in text:
            text = f"{type(cause).__name__}: {cause_text}"
    return one_line(text, REASON_LIMIT)
