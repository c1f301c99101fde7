"""One traceback per distinct error on stderr, and a failure's reason in one line.

When an API keeps failing, every worker meets the same error and airbyte-cdk logs each with its traceback;
``RepeatedErrors`` lets the first through and counts the rest. The TRACE errors on stdout stay one per failure.
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
    """Shows an error's traceback the first time a log record carries it; later ones print as one counted line."""

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
        with self._lock:
            return dict(self._seen)


def _error_key(record: logging.LogRecord) -> tuple[str, str] | None:
    if not record.exc_info or record.exc_info[1] is None:
        return None
    error = record.exc_info[1]
    return type(error).__name__, str(error)


@contextmanager
def one_traceback_per_error(keep: bool = False) -> Iterator[RepeatedErrors]:
    """``RepeatedErrors`` on every root handler during the block; ``keep`` leaves it on after (a process about to
    exit), because a failed stream's other workers log the same error a moment later."""
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
    line = next((part.strip() for part in text.splitlines() if part.strip()), "")
    if limit is not None and len(line) > limit:
        line = line[: limit - 3].rstrip() + "..."
    return line


def failure_reason(error: BaseException, secrets: SecretFilter | None = None) -> str:
    """The error in one line of at most ``REASON_LIMIT`` characters, secrets masked before the cut; a wrapper too long to
    show gives its cause instead."""
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
