"""What a command owns in its process: exit codes, the protocol stdout, the logging set-up, the
garbage collector's pace and the HTTP client's settings while records stream through.

The process-wide settings (``tuned_for_streaming``) are applied by ``main.py read`` run as its own
process only: a notebook or an orchestrator that imports the library and calls it keeps its
collector, thread switch interval and ``requests`` as they are. They change speed, not results.

stdout carries Airbyte protocol messages and nothing else. When ``main.py read`` runs as its own
process, descriptor 1 is pointed at stderr (so a stray ``print``, or the JVM's own output,
cannot reach the protocol stream) and protocol lines go to a private copy of the original
stdout. Run in-process (tests, ``source_framework.testing.read``), nothing of the process is
touched: the caller hands in the stream the protocol lines go to.
"""

from __future__ import annotations

import gc
import logging
import os
import sys
import threading
import urllib.parse
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, BinaryIO

EXIT_OK, EXIT_FAILED, EXIT_BAD_INPUT, EXIT_INTERRUPTED = 0, 1, 2, 130

LOG_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"

#: Loggers that are noisy at INFO and say nothing a user of ``read`` needs.
QUIET_LOGGERS = ("py4j", "urllib3", "pyspark")


def private_stdout() -> BinaryIO:
    """A binary file on the real stdout, after pointing descriptor 1 at stderr."""
    sys.stdout.flush()
    protocol_fd = os.dup(1)
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    return os.fdopen(protocol_fd, "wb", buffering=1 << 16)


class _StderrHandler(logging.StreamHandler):
    """Writes to ``sys.stderr`` as it is when a line is logged, not as it was when the handler was
    made: a caller that swaps stderr (a test's capture, a notebook) and closes the old one leaves
    no handler writing to a closed file (py4j logs from its own thread, long after)."""

    @property
    def stream(self) -> object:
        return sys.stderr

    @stream.setter
    def stream(self, _: object) -> None:
        pass


def log_to_stderr(debug: bool = False) -> None:
    """One handler on the root logger, writing to stderr; ``debug`` (``--debug``) lowers the level."""
    root = logging.getLogger()
    for handler in list(root.handlers):
        root.removeHandler(handler)
    handler = _StderrHandler()
    handler.setFormatter(logging.Formatter(LOG_FORMAT))
    root.addHandler(handler)
    level = logging.DEBUG if debug else logging.INFO
    root.setLevel(level)
    # airbyte-cdk's entrypoint sets its own loggers' level from --debug; ours follow the root.
    for name in ("airbyte", "source_framework"):
        logging.getLogger(name).setLevel(level)
    for noisy in QUIET_LOGGERS:
        logging.getLogger(noisy).setLevel(logging.WARNING)


@contextmanager
def tuned_for_streaming() -> Iterator[None]:
    """The process-wide settings ``read`` runs fastest with, undone afterwards (see each one)."""
    with gc_for_streaming(), threads_for_streaming(), bodies_read_whole(), proxies_looked_up_once():
        yield


#: The cyclic collector's thresholds while records stream through (Python's default: 700, 10, 10).
READING_GC_THRESHOLDS = (50_000, 20, 100)


@contextmanager
def gc_for_streaming() -> Iterator[None]:
    """Keep the cyclic garbage collector from scanning what a sync holds while it reads.

    Why: a page is thousands of fresh dicts, and the collector's default pace made it the largest
    single cost of ``read``. Objects that exist before the sync are frozen out of its passes, and
    passes come less often; records are freed by reference counting anyway, and cycles are still
    collected. Only the young generations are collected before the freeze (a full pass walks every
    object of the process); older garbage is collected after the sync, when it is unfrozen.
    """
    previous = gc.get_threshold()
    gc.collect(1)
    gc.freeze()
    gc.set_threshold(*READING_GC_THRESHOLDS)
    try:
        yield
    finally:
        gc.set_threshold(*previous)
        gc.unfreeze()


#: How long the reading thread may hold the interpreter while another thread waits for it
#: (Python's default: 5 ms), while records stream through.
READING_SWITCH_INTERVAL = 0.001


@contextmanager
def threads_for_streaming() -> Iterator[None]:
    """Let the sync's other threads have the interpreter sooner while the reading thread keeps it busy.

    Why: the committer and the page converter's sender each need the interpreter for a moment
    between their waits, several times a commit; at Python's 5 ms the commits set the sync's pace.
    """
    previous = sys.getswitchinterval()
    sys.setswitchinterval(READING_SWITCH_INTERVAL)
    try:
        yield
    finally:
        sys.setswitchinterval(previous)


#: The size of the steps in which ``requests`` reads a response body it keeps whole (its default: 10 KB).
READING_BODY_STEP = 1 << 20


@contextmanager
def bodies_read_whole() -> Iterator[None]:
    """Have ``requests`` read each response body in one step (as far as the socket has it), not in
    10 KB steps, while streams read.

    Why: each step goes through four layers of Python (requests, urllib3, http.client, the socket's
    file). A step never asks for more than the body's announced length.
    """
    import requests.models

    previous = requests.models.CONTENT_CHUNK_SIZE
    requests.models.CONTENT_CHUNK_SIZE = READING_BODY_STEP
    try:
        yield
    finally:
        requests.models.CONTENT_CHUNK_SIZE = previous


_proxy_lookups_lock = threading.Lock()
_proxy_lookups_users = 0
_proxy_lookup: Any = None  # requests' own, while a sync has it replaced


@contextmanager
def proxies_looked_up_once() -> Iterator[None]:
    """Have ``requests`` look up the proxy environment variables once per host while streams read,
    not before every request.

    Why: airbyte-cdk's ``HttpClient`` merges the environment's settings into every request, and
    requests then walks the whole environment to find the ``*_proxy`` variables. The answer depends
    on the URL's scheme and host and on the environment, which a sync reads once: a variable changed
    while streams read applies from the next sync. Syncs running at once in one process share one
    replacement; the last one to end puts requests' own back.
    """
    global _proxy_lookups_users, _proxy_lookup
    import requests.sessions

    with _proxy_lookups_lock:
        if _proxy_lookups_users == 0:
            _proxy_lookup = requests.sessions.get_environ_proxies
            requests.sessions.get_environ_proxies = _once_per_host(_proxy_lookup)
        _proxy_lookups_users += 1
    try:
        yield
    finally:
        with _proxy_lookups_lock:
            _proxy_lookups_users -= 1
            if _proxy_lookups_users == 0:
                requests.sessions.get_environ_proxies = _proxy_lookup
                _proxy_lookup = None


def _once_per_host(lookup: Any) -> Any:
    answers: dict[tuple[str, str, str | None], dict[str, str]] = {}

    def get_environ_proxies(url: str, no_proxy: str | None = None) -> dict[str, str]:
        parts = urllib.parse.urlsplit(url)
        key = (parts.scheme, parts.netloc, no_proxy)
        answer = answers.get(key)
        if answer is None:
            answer = answers[key] = lookup(url, no_proxy=no_proxy)
        return dict(answer)  # (the caller's to change)

    return get_environ_proxies
