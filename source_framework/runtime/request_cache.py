"""The folder airbyte-cdk's HTTP cache (streams with ``use_cache``) writes to, one per command.

The cache holds API responses, so it must not outlive the command; a command killed with SIGKILL cannot remove its
folder, so each command first removes those whose ``.in-use`` ``flock`` nobody holds any more.
"""

from __future__ import annotations

import fcntl
import logging
import os
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager, suppress

from airbyte_cdk.utils.constants import ENV_REQUEST_CACHE_PATH

PREFIX = "source-framework-cache-"
IN_USE = ".in-use"
logger = logging.getLogger("source_framework")


@contextmanager
def request_cache_folder() -> Iterator[str]:
    remove_abandoned(tempfile.gettempdir())
    previous = os.environ.get(ENV_REQUEST_CACHE_PATH)
    with tempfile.TemporaryDirectory(prefix=PREFIX, ignore_cleanup_errors=True) as folder:
        # Locked before it takes its name, so a sweep never sees an unlocked .in-use of a live command.
        starting = os.path.join(folder, ".starting")
        lock = os.open(starting, os.O_CREAT | os.O_RDWR, 0o600)
        try:
            fcntl.flock(lock, fcntl.LOCK_EX)
            os.rename(starting, os.path.join(folder, IN_USE))
            os.environ[ENV_REQUEST_CACHE_PATH] = folder
            yield folder
        finally:
            os.close(lock)
            if previous is None:
                os.environ.pop(ENV_REQUEST_CACHE_PATH, None)
            else:
                os.environ[ENV_REQUEST_CACHE_PATH] = previous


def remove_abandoned(parent: str) -> None:
    """Remove the cache folders under ``parent`` whose command is gone."""
    try:
        entries = [entry for entry in os.scandir(parent) if entry.name.startswith(PREFIX)]
    except OSError:
        return
    for entry in entries:
        try:
            lock = os.open(os.path.join(entry.path, IN_USE), os.O_RDWR)
        except OSError:
            continue  # not ours to judge: starting, another user's, or made by an older version
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            os.close(lock)
            continue  # its command is running
        with suppress(OSError):
            os.close(lock)
        shutil.rmtree(entry.path, ignore_errors=True)
        logger.debug("removed the HTTP cache folder %s of a command that ended without removing it", entry.path)
