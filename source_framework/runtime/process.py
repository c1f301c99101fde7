"""What a command owns in its process: exit codes, the protocol stdout, logging, and settings while records stream.

Process-wide settings apply only when ``main.py read`` runs as its own process; a caller that imports the library keeps
its own. As its own process, descriptor 1 points at stderr so a stray ``print`` (or the JVM) cannot reach the protocol.
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
    """Writes to ``sys.stderr`` as it is now, so a caller that swaps and closes stderr leaves no handler on a closed file."""

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
    """The process-wide settings ``read`` runs fastest with, undone afterwards."""
    with gc_for_streaming(), threads_for_streaming(), bodies_read_whole(), proxies_looked_up_once():
        yield


#: The cyclic collector's thresholds while records stream through.
READING_GC_THRESHOLDS = (50_000, 20, 100)


@contextmanager
def gc_for_streaming() -> Iterator[None]:
    """Keep the cyclic collector from scanning what a sync holds: objects from before the sync are frozen out of its
    passes, which come less often; records are freed by reference counting anyway."""
    previous = gc.get_threshold()
    gc.collect(1)
    gc.freeze()
    gc.set_threshold(*READING_GC_THRESHOLDS)
    try:
        yield
    finally:
        gc.set_threshold(*previous)
        gc.unfreeze()


#: How long the reading thread may hold the interpreter while another thread waits for it.
READING_SWITCH_INTERVAL = 0.001


@contextmanager
def threads_for_streaming() -> Iterator[None]:
    """Let the committer and converter threads have the interpreter sooner while the reading thread keeps it busy."""
    previous = sys.getswitchinterval()
    sys.setswitchinterval(READING_SWITCH_INTERVAL)
    try:
        yield
    finally:
        sys.setswitchinterval(previous)


#: The size of the steps in which ``requests`` reads a response body it keeps whole.
READING_BODY_STEP = 1 << 20


@contextmanager
def bodies_read_whole() -> Iterator[None]:
    """Have ``requests`` read each response body in one step, not in 10 KB steps through four layers of Python."""
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
    """Have ``requests`` look up the proxy variables once per host instead of walking the environment before every
    request; syncs at once share one replacement, and the last to end puts requests' own back."""
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
