"""What a sync committed to a table, from the table's own checkpoint records (no Spark needed).

::

    stats = commit_stats(destination.committed_table(None, "users"))   # CommitStats(commits=12, files=12, rows=200000)
"""

from __future__ import annotations

from dataclasses import dataclass

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
    stats = CommitStats()
    for record in table.committed_checkpoints():
        stats.commits += 1
        stats.files += len(record.files)
        stats.rows += record.rows
    return stats
