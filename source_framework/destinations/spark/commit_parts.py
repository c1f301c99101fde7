"""What a table commit is made of, whichever the table's format (``table.SparkTable``,
``delta_table.DeltaLakeTable``): files staged ahead of it, rows the page converter holds for it,
what it published, and how this process writes its Parquet files.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from source_framework.destinations.spark.page_conversion import PageConverter

#: How this process writes a commit's Parquet file when it writes it itself (``arrow_writes``):
#: the file Spark's own writer makes of the same rows (snappy; timestamps as UTC-adjusted
#: TIMESTAMP(MICROS), which Spark reads as ``timestamp``), so a table may mix files of both;
#: dictionaries for text columns only (``arrow_conversion.parquet_options``).
ARROW_PARQUET_OPTIONS: dict[str, Any] = {"compression": "snappy", "coerce_timestamps": "us", "allow_truncated_timestamps": False}


@dataclass(frozen=True)
class StagedFiles:
    """Data files written ahead of their commit: a folder under the staging folder."""

    folder: str
    rows: int
    #: the folder's files, when whoever wrote them counted ``rows`` in their footers and fsynced
    #: them (the page converter, in its own process): the commit then only renames them. Why: each
    #: file operation costs the committer's thread the interpreter the reading thread holds
    files: tuple[str, ...] = ()


@dataclass(frozen=True)
class CommitInfo:
    """What one :meth:`SparkTable.commit` published."""

    seq: int
    batch_id: int
    files: list[str]  # file: URIs, as listed in the metadata log
    rows: int  # counted in the published files' Parquet footers
    ms: float  # wall time of the whole commit
    #: what converting the rows the page converter wrote for the commit could not keep as given
    #: (``PageRows``; ``ConversionCounts.as_dict()``)
    counts: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class PageRows:
    """Rows a commit publishes that the stream's page converter holds (``page_conversion``): those
    up to ``token``, ``rows`` of them. The converter writes them into the table, and carries out
    the commit's file work with them in its own process (``SparkTable.commit``)."""

    converter: PageConverter
    token: int
    rows: int
