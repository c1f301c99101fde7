"""What a table commit is made of, whichever the table's format: staged files, page converter rows, what it published."""

from __future__ import annotations

import os
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.parquet as pq

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

    def parquet_files(self) -> list[str]:
        """Its data files: those listed, else the folder's (Spark's writer adds a ``_SUCCESS`` and checksums beside them)."""
        names = self.files or sorted(os.listdir(self.folder))
        return [os.path.join(self.folder, name) for name in names if name.startswith("part-") and name.endswith(".parquet")]


def parquet_batches(files: Sequence[str], schema: pa.Schema) -> Iterator[pa.RecordBatch]:
    """The rows of Parquet files as ``schema``, missing columns null, read with ``pyarrow.parquet`` (``pyarrow.dataset`` imports pandas)."""
    for path in files:
        with pq.ParquetFile(path) as parquet:
            for batch in parquet.iter_batches():
                columns = [batch.column(field.name).cast(field.type) if field.name in batch.schema.names
                           else pa.nulls(batch.num_rows, field.type) for field in schema]
                yield pa.RecordBatch.from_arrays(columns, schema=schema)


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
