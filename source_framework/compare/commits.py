"""What a sync committed to a table, from the table's own checkpoint records (no Spark needed).

::

    stats = commit_stats(destination.committed_table(None, "users"))   # CommitStats(commits=12, files=12, rows=200000)

A Parquet folder's records list each commit's files and rows. A Delta table's commits are counted
from its Delta log instead: each of our commits there (the entries carrying our checkpoint record)
has the files and rows it added in the transaction's metrics, as its writer (delta-rs or Spark's
Delta writer) counted them.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from source_framework.destinations.spark.delta_log import RECORD_KEY
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
    stats = CommitStats()
    for record in table.committed_checkpoints():
        stats.commits += 1
        stats.files += len(record.files)
        stats.rows += record.rows
    return stats


#: the files and rows a Delta transaction added, as delta-rs and as Spark's Delta writer name them
_ADDED_FILES = ("num_added_files", "numFiles", "numAddedFiles")
_ADDED_ROWS = ("num_added_rows", "numOutputRows")


def _delta_commit_stats(path: str) -> CommitStats:
    from deltalake import DeltaTable

    stats = CommitStats()
    for info in DeltaTable(path).history():
        if not _ours(info):
            continue  # another writer's commit (OPTIMIZE, a user's own write)
        metrics = info.get("operationMetrics") or {}
        stats.commits += 1
        stats.files += _metric(metrics, _ADDED_FILES)
        stats.rows += _metric(metrics, _ADDED_ROWS)
    return stats


def _ours(info: Mapping[str, Any]) -> bool:
    """The commit carries our checkpoint record (``delta_table``: in ``userMetadata``)."""
    try:
        content = json.loads(info.get("userMetadata") or "null")
    except ValueError:
        return False
    return isinstance(content, dict) and isinstance(content.get(RECORD_KEY), dict)


def _metric(metrics: Mapping[str, Any], names: tuple[str, ...]) -> int:
    for name in names:
        if metrics.get(name) is not None:
            return int(metrics[name])
    return 0
