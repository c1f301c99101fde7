"""Crash-safe small-file writes: a reader sees the old file, the new file, or none; never half.

Why: the table's commit point is the appearance of one metadata file, and our checkpoint
records must never be read half-written after a SIGKILL or power loss. The recipe is the
classic one: write a temporary file in the same folder, fsync it, rename it into place
(atomic on POSIX within one file system), then fsync the folder so the rename is durable.

Temporary names start with ``.`` and end with ``.tmp``; Spark's metadata-log reader only
looks at names that parse as batch ids, so it never mistakes one for a batch.

Usage::

    write_atomically("/t/_checkpoints/00000003.json", b'{"seq": 3}')
    write_atomically("/t/_spark_metadata/7", data, overwrite=False)  # FileExistsError if taken
"""

from __future__ import annotations

import errno
import os
import shutil
import uuid

TEMP_SUFFIX = ".tmp"
#: What ``fsync`` on a folder answers where the file system cannot do it (some network and FUSE
#: file systems): nothing to make durable there. Any other error is the folder's entries not being
#: on disk, which a commit must not pass over.
FSYNC_UNSUPPORTED = frozenset({errno.EINVAL, errno.ENOTSUP, errno.EOPNOTSUPP, errno.EBADF})


def write_atomically(path: str, data: bytes, *, overwrite: bool = True) -> None:
    """Atomically create (or, with ``overwrite=True``, replace) ``path`` holding ``data``; its
    folder is made if missing.

    With ``overwrite=False`` the file is published with a hard link, which fails with
    ``FileExistsError`` instead of silently replacing a file another writer created.
    """
    # Plain descriptors, no file object: a commit writes two such files, and each system call is a
    # moment the committer's thread lets go of the interpreter and waits to get it back from the
    # reading thread (~1 ms each at the sync's 1 ms switch interval).
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
            try:
                os.remove(temp_path)
            except FileNotFoundError:
                pass
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
    """Flush a file's contents to disk (e.g. a data file before it is committed)."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def fsync_directory(directory: str) -> None:
    """Make renames/creations inside ``directory`` durable. Raises ``OSError`` when they may not be
    (an I/O error, a folder that is gone): a commit point whose entry is not on disk can vanish
    with a power loss after its STATE left. Only a file system that cannot fsync a folder at all
    (``FSYNC_UNSUPPORTED``) is passed over."""
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    except OSError as error:
        if error.errno not in FSYNC_UNSUPPORTED:
            raise
    finally:
        os.close(fd)


def make_folders(path: str) -> None:
    """``os.makedirs(path, exist_ok=True)``, durably: each folder made is fsynced in its parent,
    top down. Why: a folder's entry in its parent is not on disk until the parent is fsynced, so
    after a power loss a new table (or its log, or its records) could be gone while the STATE of
    its first commit was already printed."""
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
    """True for leftovers of an interrupted :func:`write_atomically`."""
    return name.startswith(".") and name.endswith(TEMP_SUFFIX)


def remove_folder(folder: str) -> None:
    """Remove a staging folder: one call when its files were all moved out (a commit's file work
    is paid in the interpreter the reading thread needs), else the folder and what is left."""
    try:
        os.rmdir(folder)
    except OSError:
        shutil.rmtree(folder, ignore_errors=True)
