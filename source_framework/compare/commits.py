"""What a sync committed to a table, from the table's own checkpoint records or Delta log (no Spark needed)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from source_framework.destinations.spark.delta_log import RECORD_KEY, added_files, added_rows
from source_framework.destinations.spark.delta_table import is_delta_table
from source_framework.destinations.spark.destination import CommittedTable


@dataclass
class CommitStats:
    commits: int = 0
    files: int = 0
    rows: int = 0

    def __add__(self, other: CommitStats) -> CommitStats:
        return CommitStats(self.commits + other.commits, self.files + other.files, self.rows + other.rows)


def commit_stats(table: CommittedTable) -> CommitStats:
    """The committed checkpoints of one table: Spark commits, data files, rows (zero without a table)."""
    if is_delta_table(table.path):
        return _delta_commit_stats(table.path)
    return sum((CommitStats(1, len(record.files), record.rows) for record in table.committed_checkpoints()), CommitStats())


def _delta_commit_stats(path: str) -> CommitStats:
    from deltalake import DeltaTable

    # Only our commits: not another writer's (OPTIMIZE, a user's own write).
    ours = [info for info in DeltaTable(path).history() if _ours(info)]
    return sum((CommitStats(1, added_files(info), added_rows(info) or 0) for info in ours), CommitStats())


def _ours(info: Mapping[str, Any]) -> bool:
    try:
        content = json.loads(info.get("userMetadata") or "null")
    except ValueError:
        return False
    return isinstance(content, dict) and isinstance(content.get(RECORD_KEY), dict)
