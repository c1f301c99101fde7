"""Crash-safe small-file writes: a reader sees the old file, the new file, or none; never half.

The table's commit point is the appearance of one metadata file, so: write a temporary file in the same folder, fsync it,
rename it into place, then fsync the folder so the rename is durable. Temporary names (``.*.tmp``) never parse as batch ids."""

from __future__ import annotations

import errno
import os
import shutil
import uuid
from contextlib import suppress

TEMP_SUFFIX = ".tmp"
#: What ``fsync`` on a folder answers where the file system cannot do it; any other error must not be passed over.
FSYNC_UNSUPPORTED = frozenset({errno.EINVAL, errno.ENOTSUP, errno.EOPNOTSUPP, errno.EBADF})


def write_atomically(path: str, data: bytes, *, overwrite: bool = True) -> None:
    """Atomically create or replace ``path``; ``overwrite=False`` publishes with a hard link, so a taken name raises instead."""
    # Plain descriptors, no file object: each system call lets go of the interpreter the reading thread holds.
    directory = os.path.dirname(path) or "."
    temp_path = os.path.join(directory, f".{os.path.basename(path)}.{uuid.uuid4().hex}{TEMP_SUFFIX}")
    published = False
    try:
        try:
            fd = os.open(temp_path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
        except FileNotFoundError:  # the folder's first file (made here, not looked for every time)
            make_folders(directory)
            fd = os.open(temp_path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view):]
            os.fsync(fd)
        finally:
            os.close(fd)
        if overwrite:
            os.replace(temp_path, path)
            published = True
        else:
            published = _publish_exclusively(temp_path, path)
    finally:
        if not published:
            with suppress(FileNotFoundError):
                os.remove(temp_path)
    fsync_directory(directory)


def _publish_exclusively(temp_path: str, path: str) -> bool:
    """Whether ``temp_path`` is gone (renamed); linked, it is left for the caller to remove."""
    try:
        os.link(temp_path, path)
    except FileExistsError:
        raise
    except OSError:
        # File systems without hard links: a check-then-rename is the best we can do.
        if os.path.exists(path):
            raise FileExistsError(path) from None
        os.rename(temp_path, path)
        return True
    return False


def fsync_file(path: str) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def fsync_directory(directory: str) -> None:
    """Make renames inside ``directory`` durable; raises where they may not be, as a commit point must survive a power loss."""
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    except OSError as error:
        if error.errno not in FSYNC_UNSUPPORTED:
            raise
    finally:
        os.close(fd)


def make_folders(path: str) -> None:
    """``os.makedirs``, each new folder fsynced in its parent, so a new table outlives a power loss after its first STATE."""
    made = []
    folder = os.path.abspath(path)
    while not os.path.isdir(folder):
        made.append(folder)
        parent = os.path.dirname(folder)
        if parent == folder:
            break
        folder = parent
    os.makedirs(path, exist_ok=True)
    for folder in reversed(made):
        fsync_directory(os.path.dirname(folder))


def is_temp_file(name: str) -> bool:
    return name.startswith(".") and name.endswith(TEMP_SUFFIX)


def remove_folder(folder: str) -> None:
    """Remove a staging folder: one call when its files were all moved out, else the folder and what is left."""
    try:
        os.rmdir(folder)
    except OSError:
        shutil.rmtree(folder, ignore_errors=True)
