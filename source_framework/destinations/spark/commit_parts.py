"""What a table commit is made of, whichever the table's format: staged files, page converter rows, what it published."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from source_framework.destinations.spark.page_conversion import PageConverter

#: Parquet options of the files this process writes: the file Spark's own writer makes of the same rows, so a table may mix both.
ARROW_PARQUET_OPTIONS: dict[str, Any] = {"compression": "snappy", "coerce_timestamps": "us", "allow_truncated_timestamps": False}


@dataclass(frozen=True)
class StagedFiles:
    """Data files written ahead of their commit: a folder under the staging folder."""

    folder: str
    rows: int
    #: the files, when their writer counted ``rows`` and fsynced them (the page converter): the commit only renames them
    files: tuple[str, ...] = ()


@dataclass(frozen=True)
class CommitInfo:
    """What one :meth:`SparkTable.commit` published."""

    seq: int
    batch_id: int
    files: list[str]  # file: URIs, as listed in the metadata log
    rows: int  # counted in the published files' Parquet footers
    ms: float  # wall time of the whole commit
    #: what converting the page converter's rows could not keep as given (``ConversionCounts.as_dict()``)
    counts: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class PageRows:
    """Rows up to ``token`` that the stream's page converter holds, which it writes and commits in its own process."""

    converter: PageConverter
    token: int
    rows: int
