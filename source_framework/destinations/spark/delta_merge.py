"""``append_dedup`` without Spark: a delta-rs MERGE, or Arrow's rewrite of a Parquet folder; the rows Spark's (``TableWriter._merged``)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from source_framework.destinations.spark.arrow_conversion import CHECKPOINT

if TYPE_CHECKING:
    from deltalake import CommitProperties, DeltaTable, PostCommitHookProperties

_POSITION = "__sf_position"


@dataclass(frozen=True)
class DedupMerge:
    """How a commit's rows merge into the table: by ``keys`` (column names), the latest ``cursor``."""

    keys: tuple[str, ...]
    cursor: str | None = None

    def latest_per_key(self, rows: pa.Table) -> pa.Table:
        """One row per key (MERGE refuses two source rows for one table row); rows with a null key part all kept, in order."""
        # (pandas is not imported for a merge, 0.4 s of a sync's process: ``pa.array`` of Python values, a group_by (pyarrow.acero)
        # and an empty array's ``combine_chunks`` would import it)
        positions = pa.Array.from_buffers(pa.int64(), rows.num_rows, [None, pa.py_buffer(np.arange(rows.num_rows, dtype=np.int64))])
        indexed = rows.append_column(_POSITION, positions)
        null_key = pc.or_(*[pc.is_null(indexed[key]) for key in self.keys]) if len(self.keys) > 1 else pc.is_null(indexed[self.keys[0]])
        keyed = indexed.filter(pc.invert(null_key))
        # The latest cursor (nulls last), then the latest checkpoint, then the row read last: a Spark rewrite's order.
        order = [(self.cursor, "descending", "at_end")] if self.cursor else []
        order += [(CHECKPOINT, "descending", "at_end"), (_POSITION, "descending", "at_end")]
        ranked = keyed.take(pc.sort_indices(keyed, sort_keys=order))
        key = ranked[self.keys[0]]  # each key's first row: for one key, by hash kernels
        firsts = (ranked[_POSITION].take(pc.index_in(pc.unique(key), value_set=key)) if len(self.keys) == 1
                  else ranked.group_by(list(self.keys), use_threads=False).aggregate([(_POSITION, "first")])[f"{_POSITION}_first"])
        chosen = pa.chunked_array([*firsts.chunks, *indexed.filter(null_key)[_POSITION].chunks], pa.int64())
        return rows.take(chosen.take(pc.array_sort_indices(chosen)))

    def apply(self, table: DeltaTable, rows: pa.Table, properties: CommitProperties, hooks: PostCommitHookProperties) -> dict[str, Any]:
        on = " AND ".join(f"t.{_quoted(key)} = s.{_quoted(key)}" for key in self.keys)
        merger = table.merge(self.latest_per_key(rows), on, source_alias="s", target_alias="t",
                             commit_properties=properties, post_commithook_properties=hooks)
        later = f"s.{_quoted(self.cursor)} >= t.{_quoted(self.cursor)} OR t.{_quoted(self.cursor)} IS NULL" if self.cursor else None
        return dict(merger.when_matched_update_all(predicate=later).when_not_matched_insert_all().execute())


def _quoted(name: str) -> str:
    """A column in delta-rs's SQL, quoted so case and dots are kept."""
    return '"' + name.replace('"', '""') + '"'
