"""The folder of our per-commit records, ``<table>/_checkpoints/<seq:08d>.json``: the state each commit covers, which
Spark's log does not say. Written before the log's batch, a record counts only when its batch lists its files."""

from __future__ import annotations

import os

from source_framework.destinations.checkpoint_record import CheckpointRecord
from source_framework.destinations.spark.atomic_files import write_atomically

CHECKPOINTS_DIR = "_checkpoints"
_SUFFIX = ".json"


class CheckpointFolder:
    def __init__(self, table_dir: str):
        self.directory = os.path.join(os.path.abspath(table_dir), CHECKPOINTS_DIR)

    def path(self, seq: int) -> str:
        return os.path.join(self.directory, f"{seq:08d}{_SUFFIX}")

    def write(self, record: CheckpointRecord) -> None:
        write_atomically(self.path(record.seq), record.to_json())

    def read(self, seq: int) -> CheckpointRecord | None:
        try:
            with open(self.path(seq), "rb") as handle:
                raw = handle.read()
        except FileNotFoundError:
            return None
        try:
            return CheckpointRecord.from_json(raw)
        except (ValueError, KeyError, TypeError) as error:
            raise ValueError(f"checkpoint record {self.path(seq)} cannot be read: {error}") from None

    def seqs_newest_first(self) -> list[int]:
        if not os.path.isdir(self.directory):
            return []
        seqs = []
        for name in os.listdir(self.directory):
            stem = name[: -len(_SUFFIX)] if name.endswith(_SUFFIX) else ""
            if stem.isascii() and stem.isdigit():
                seqs.append(int(stem))
        return sorted(seqs, reverse=True)
