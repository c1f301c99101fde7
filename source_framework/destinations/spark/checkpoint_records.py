"""Our own per-commit records: ``<table>/_checkpoints/<seq:08d>.json``.

Why: Spark's metadata log says *which files* are visible, but not *which source state*
they cover. Each commit therefore also leaves a small JSON record (the caller's state,
the files, the row count). The record is written before the metadata-log batch, so a
record is only trusted when its batch exists and lists its files (``table.py`` checks
that); a record without its batch is the trace of a commit that never happened.

Record layout::

    {"seq": 3, "batch_id": 2, "state": {"updatedAt": "..."}, "files": ["file:///t/c00000003-0-ab.parquet"],
     "rows": 1000, "replace": false, "committed_at": "2025-02-01T00:00:00.000000Z"}

Usage::

    records = CheckpointRecords("/warehouse/demo/users")
    records.write({"seq": 3, ...})
    for seq in records.seqs_newest_first():
        print(records.read(seq))
"""

from __future__ import annotations

import json
import os

from source_framework.destinations.spark.atomic_files import write_atomically

CHECKPOINTS_DIR = "_checkpoints"
_SUFFIX = ".json"


class CheckpointRecords:
    """The ``_checkpoints`` folder of one table."""

    def __init__(self, table_dir: str):
        self.directory = os.path.join(os.path.abspath(table_dir), CHECKPOINTS_DIR)

    def path(self, seq: int) -> str:
        return os.path.join(self.directory, f"{seq:08d}{_SUFFIX}")

    def write(self, record: dict) -> None:
        """Write (or replace a leftover of) the record for ``record["seq"]``, atomically."""
        os.makedirs(self.directory, exist_ok=True)
        data = json.dumps(record, separators=(",", ":"), sort_keys=True).encode("utf-8")
        write_atomically(self.path(record["seq"]), data)

    def read(self, seq: int) -> dict | None:
        try:
            with open(self.path(seq), encoding="utf-8") as record:
                return json.load(record)
        except FileNotFoundError:
            return None

    def seqs_newest_first(self) -> list[int]:
        if not os.path.isdir(self.directory):
            return []
        seqs = []
        for name in os.listdir(self.directory):
            stem = name[: -len(_SUFFIX)] if name.endswith(_SUFFIX) else ""
            if stem.isascii() and stem.isdigit():
                seqs.append(int(stem))
        return sorted(seqs, reverse=True)
