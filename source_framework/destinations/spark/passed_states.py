"""The states a table passed, kept after their checkpoint records are reclaimed (``<table>/_sf_passed_states``), so such a
state keeps meaning "the table is ahead" and an ``append`` table never gets its records again."""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from typing import Any

from source_framework.destinations.checkpoint_record import STATE_DIGEST_BYTES, CheckpointRecord, state_digest
from source_framework.destinations.spark.atomic_files import fsync_directory

FILE_NAME = "_sf_passed_states"


class PassedStates:
    """The digests of the states of a table's reclaimed checkpoint records."""

    def __init__(self, table_dir: str) -> None:
        self.table_dir = table_dir
        self.path = os.path.join(table_dir, FILE_NAME)

    def add(self, records: Iterable[CheckpointRecord]) -> None:
        """Remember every state ``records`` passed, durably."""
        digests = b"".join(dict.fromkeys(state_digest(state) for record in records for state in record.states_passed()))
        if not digests:
            return
        fd = os.open(self.path, os.O_WRONLY | os.O_CREAT, 0o644)
        try:
            size = os.fstat(fd).st_size
            whole = size - size % STATE_DIGEST_BYTES  # a partial digest left by an append cut short goes
            if whole != size:
                os.ftruncate(fd, whole)
            os.lseek(fd, whole, os.SEEK_SET)
            view = memoryview(digests)
            while view:
                view = view[os.write(fd, view):]
            os.fsync(fd)
        finally:
            os.close(fd)
        if size == 0:
            fsync_directory(self.table_dir)  # the file is new: its name must last too

    def includes(self, state: Mapping[str, Any] | None) -> bool:
        try:
            with open(self.path, "rb") as handle:
                data = handle.read()
        except FileNotFoundError:
            return False
        digest, start = state_digest(state), 0
        end = len(data) - len(data) % STATE_DIGEST_BYTES
        while (found := data.find(digest, start, end)) >= 0:
            if found % STATE_DIGEST_BYTES == 0:
                return True
            start = found + 1
        return False
