"""The states a table passed, kept after their checkpoint records are reclaimed: ``<table>/_sf_passed_states``.

Why: ``runtime.resume`` takes a given state the table has passed (an older commit's, a checkpoint
merged into one, a run's start state, ``{}`` from a deleted state file) to mean the table is
ahead, and resumes from its newest checkpoint; a state it never passed is an edit, honoured. The
table keeps its newest ``KEEP_RECORDS`` checkpoint records only (``table.py``, ``reclaim``), so
without this file the same state would change meaning once its record was reclaimed, and an
``append`` table would get its records again. Before a record is deleted, the states it passed are
added here as 8-byte digests (``checkpoint_record.state_digest``: key and partition order do not
count), so the answer never depends on how many records are kept. It grows by 8 bytes per STATE
of the reclaimed records, and is read only for a state that matches none of the records kept::

    passed = PassedStates("/warehouse/demo/users")
    passed.add(records_about_to_be_deleted)
    passed.includes({"updatedAt": "2025-01-01T00:00:00Z"})   # True once added

Crash safety: digests are appended and fsynced before the records go, so a kill in between leaves
a digest twice (harmless); an append cut short leaves a partial digest at the end, which reading
ignores and the next append cuts off first.
"""

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
        """Remember every state ``records`` passed (``CheckpointRecord.states_passed``), durably."""
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
        """Whether a reclaimed record passed ``state``."""
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
