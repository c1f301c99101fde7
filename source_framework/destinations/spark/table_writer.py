"""Applies one stream's commit jobs to its table, on the committer's thread: from the hand-over on, only it touches the table.

``append_dedup`` keeps one row per primary key (the latest cursor, then the version read last) but never merges rows with a
null key part: like SQL's unique keys, a null equals nothing."""

from __future__ import annotations

import hashlib
import logging
import shutil
from collections import Counter
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

import orjson
import pyarrow as pa
import pyarrow.compute as pc

from source_framework.destinations.base import APPEND_DEDUP, OVERWRITE, CommitReceipt, StreamTarget
from source_framework.destinations.checkpoint_record import ResumeNotes
from source_framework.destinations.spark.arrow_conversion import (
    CHECKPOINT,
    METADATA_COLUMNS,
    SYNC_ID,
    ConversionCounts,
    records_to_arrow,
)
from source_framework.destinations.spark.commit_parts import PageRows, StagedFiles, parquet_batches
from source_framework.destinations.spark.committer import CommitJob
from source_framework.destinations.spark.delta_merge import DedupMerge
from source_framework.destinations.spark.spark_frames import arrow_frame, conformed, cursor_value, path_value
from source_framework.destinations.spark.table import SparkTable

if TYPE_CHECKING:
    from source_framework.destinations.spark.delta_table import DeltaLakeTable
from source_framework.destinations.spark.table_schema import (
    IncompatibleSchema,
    SchemaChange,
    compare_schemas,
    schema_to_json,
    was_timestamp,
)

logger = logging.getLogger("source_framework.spark")

#: Up to this size of files a table is rewritten in this process's memory (a Parquet folder's ``append_dedup``, ``state set``);
#: Spark, which spills, rewrites a larger one.
ARROW_REWRITE_BYTES = 128 * 1024 * 1024


class TableWriter:
    """Owns one table's writes; every method but the constructor (and ``rebuild_from_reset``) runs on the committer's thread."""

    def __init__(
        self,
        table: SparkTable | DeltaLakeTable,
        target: StreamTarget,
        schema: pa.Schema,
        recorded_schema: pa.Schema | None = None,
        sync_id: str = "",
        on_type_mismatch: str = "null",
    ) -> None:
        self.table = table
        self.sync_id = sync_id
        self.on_type_mismatch = on_type_mismatch
        self.counts = ConversionCounts(on_new_undeclared=self._log_undeclared, on_new_mismatch=self._log_mismatch)
        self.target = target
        self.name = target.name
        self.stream_schema = schema
        self._mode = target.destination_sync_mode
        last = table.last_checkpoint()
        self._next_seq = last.seq + 1 if last else 0
        self._replace_next = self._mode == OVERWRITE or target.rebuild
        self._take_schema(None if self._replace_next else recorded_schema)
        self._reset_id: str | None = None
        self._staged: list[StagedFiles] = []
        self._failed: BaseException | None = None
        self._lookup_failed = False  # ``already_in_table`` could not read the table (warned once)
        self._rows_answered: Counter[bytes] = Counter()  # keyless: rows of earlier syncs ``already_in_table`` matched
        self.commits = 0  # writes that reached the table
        self.rows = 0  # rows they published

    @property
    def needs_spark(self) -> bool:
        spark_merges = self._mode == APPEND_DEDUP and self._dedup_merge(first=True) is None
        return spark_merges or self._rewrite_next or not self.table.arrow_writes

    def _dedup_merge(self, first: bool = False) -> DedupMerge | None:
        """How a commit's rows merge by key without Spark (``delta_merge``), or None where Spark merges (see the docs' tables.md)."""
        keys, cursor = self.target.primary_key, self.target.cursor_field
        if not self.table.arrow_writes:
            return None
        if not keys or any(len(path) != 1 for path in keys) or len(cursor) > 1 or (cursor and cursor[0] not in self.schema.names):
            return None
        change = self.schema_change
        if (first or self.commits == 0) and not self._replace_next and (change.added or change.needs_rewrite):
            return None
        if isinstance(self.table, SparkTable) and self.table.live_bytes() > ARROW_REWRITE_BYTES:
            return None
        return DedupMerge(tuple(path[0] for path in keys), cursor[0] if cursor else None)

    @property
    def rebuilding(self) -> bool:
        return self._replace_next

    def rebuild_from_reset(self, reset_id: str) -> None:
        """The stream starts over after ``state reset``: its first commit replaces the table and records the reset, applied once."""
        self._replace_next, self._reset_id = True, reset_id
        self._take_schema(None)  # the new table has the stream's schema, whatever the old one had

    def _take_schema(self, recorded: pa.Schema | None) -> None:
        self.schema_change: SchemaChange = compare_schemas(recorded, self.stream_schema)
        self.schema = self.schema_change.table
        self._schema_json = schema_to_json(self.schema)
        # (``schema.empty_table()`` would import pandas at start, which a sync whose rows the page converter writes never needs)
        self._no_rows = pa.Table.from_batches([], schema=self.schema)
        # a widened column cannot be read across old and new files: an append rewrites the table once
        self._rewrite_next = self.schema_change.needs_rewrite and self._mode != APPEND_DEDUP

    def check_schema(self) -> None:
        change = self.schema_change
        if change.incompatible:
            raise IncompatibleSchema(self.name, self.table.path, change)
        if change.added:
            logger.info("%s: the stream's schema adds column(s) %s: the table gets them with this run's first commit "
                        "(null in earlier rows)", self.name, ", ".join(change.added))
        if change.widened:
            logger.warning("%s: the stream's schema widens %s: this run's first commit rewrites the table with its rows "
                           "cast", self.name, ", ".join(str(widening) for widening in change.widened))
        if change.kept:
            logger.warning("%s: the stream's schema no longer declares column(s) %s: the table keeps them, null in new rows",
                           self.name, ", ".join(change.kept))

    def to_arrow(self, records: list[Any], extracted_at_ms: list[int]) -> pa.Table:
        """Records as an Arrow batch of the table's schema; either thread may call it (it reads only what is fixed)."""
        return records_to_arrow(records, self.schema, extracted_at_ms=extracted_at_ms, sync_id=self.sync_id,
                                checkpoint=-1, counts=self.counts, on_type_mismatch=self.on_type_mismatch)

    @property
    def looks_up_rows(self) -> bool:
        key = self.target.primary_key
        if key:
            return all(len(path) == 1 for path in key)
        cursor = self.target.cursor_field
        return len(cursor) == 1 and cursor[0] in self.schema.names

    def already_in_table(self, records: list[Any]) -> list[bool]:
        """Which ``records`` the table holds already; what cannot be compared answers False: written again, never dropped."""
        if not records or not self.looks_up_rows:
            return [False] * len(records)
        keyless = not self.target.primary_key
        keys = [path[0] for path in self.target.primary_key] or self.target.cursor_field
        try:
            candidates = records_to_arrow(records, self.schema, extracted_at_ms=0, sync_id=self.sync_id, checkpoint=-1)
            columns = [name for name in candidates.column_names if name not in METADATA_COLUMNS]
            # rows from before a timestamp column became text hold the rewrite's text: look for that too
            was_timestamps = [field.name for field in self.schema if was_timestamp(field)]
            rewritten = _as_rewritten(candidates, was_timestamps)
            where = pc.field(SYNC_ID) != self.sync_id if keyless else None
            for key in keys:
                values = candidates.column(key)
                if rewritten is not None and key in was_timestamps:
                    as_rewritten = rewritten.column(key)
                    values = pa.chunked_array([*values.chunks, *as_rewritten.chunks, *_as_arrow_text(as_rewritten).chunks])
                match = pc.field(key).isin(values.combine_chunks().drop_null())
                if keyless and values.null_count:
                    match = match | pc.field(key).is_null()
                where = match if where is None else where & match
            in_table = _as_rewrite_text(self.table.rows_where(candidates.schema, columns, where), was_timestamps)
            held = Counter(_row_digest(row) for row in in_table.to_pylist())
        except Exception as error:  # the table cannot say: write them (a duplicate is recoverable, a loss is not)
            if not self._lookup_failed:
                self._lookup_failed = True
                logger.warning("%s: could not look up records read again in the table (%s); they are written "
                               "(said once per stream)", self.name, error)
            return [False] * len(records)
        answered = self._rows_answered if keyless else Counter()  # with a key: within this call
        rows = candidates.select(columns).to_pylist()
        forms = zip(rows, rewritten.select(columns).to_pylist(), strict=True) if rewritten is not None else ((row,) for row in rows)
        answers = []
        for row_forms in forms:
            found = False
            for encoded in dict.fromkeys(map(_row_digest, row_forms)):  # as written, then as rewritten
                if held[encoded] > answered[encoded]:
                    answered[encoded] += 1
                    found = True
                    break
            answers.append(found)
        return answers

    def _log_undeclared(self, names: list[str]) -> None:
        logger.warning(
            "%s: records carry field(s) the stream's schema does not declare: %s; they get no column and are "
            "named in each row's _sf_meta (declare them in the schema to keep their values)",
            self.name, ", ".join(names),
        )

    def _log_mismatch(self, name: str, reason: str) -> None:
        logger.warning(
            "%s: a value of field '%s' does not fit its column (%s); such values are stored as null, named in the "
            "row's _sf_meta and counted in the summary (destination.on_type_mismatch: fail stops the stream instead)",
            self.name, name, reason,
        )

    def apply(self, jobs: list[CommitJob]) -> list[Any]:
        """One Spark write for one or more queued jobs; one result per job (a ``CommitReceipt``, or a stage job's ``StagedFiles``)."""
        if self._failed is not None:
            raise RuntimeError(f"stream '{self.name}': an earlier commit failed ({self._failed})")
        try:
            return self._apply(jobs)
        except BaseException as error:
            self._failed = error
            raise

    def _apply(self, jobs: list[CommitJob]) -> list[Any]:
        batches = self._in_read_order(jobs)
        from_pages = [job for job in jobs if job.page_token is not None]
        pages = None
        # (the page converter commits its rows itself, unless they are merged: a merge reads the rows it rewrites)
        if (from_pages and not jobs[0].stage_only and not batches and not self.needs_spark and self._mode != APPEND_DEDUP
                and self.table.takes_page_commits):
            last = from_pages[-1]
            assert last.pages is not None and last.page_token is not None
            pages = PageRows(last.pages, last.page_token, sum(job.page_rows for job in from_pages))
        elif from_pages:  # rows the page converter holds: its file is staged, published with the commit
            self._staged.append(self._stage_from_pages(from_pages[-1]))
        if jobs[0].stage_only:
            if batches or not from_pages:
                self._staged.append(self.table.stage(self._numbered(batches, self._next_seq)))
            return [self._staged[-1]] * len(jobs)
        # The STATEs of merged checkpoints are printed too: a later run given one must know the table holds what followed it.
        merged_states = [dict(state or {}) for job in jobs for state in (*job.earlier_states, job.state)][:-1]
        self._commit(batches, jobs[-1].state, jobs[-1].notes, merged_states, pages)
        return [CommitReceipt(self.rows, self.commits)] * len(jobs)

    def _in_read_order(self, jobs: list[CommitJob]) -> list[pa.Table]:
        records = [record for job in jobs for record in job.records]
        if not records:
            return [batch for job in jobs for batch in job.batches]
        converted = self.to_arrow(records, [ms for job in jobs for ms in job.extracted_at_ms])
        batches, offset = [], 0
        for job in jobs:
            batches += job.batches
            if job.records:
                batches.append(converted.slice(offset, len(job.records)))
                offset += len(job.records)
        return batches

    def _stage_from_pages(self, job: CommitJob) -> StagedFiles:
        assert job.pages is not None and job.page_token is not None
        folder = self.table.staging_folder()
        written = job.pages.write(job.page_token, self._next_seq, folder)
        self.counts.add_counts(written.counts)
        # (counted in its footer and fsynced by the converter: the commit only renames it)
        return StagedFiles(folder, written.rows, files=(written.file,))

    def _commit(self, batches: list[pa.Table], state: Any, notes: ResumeNotes | None, merged_states: list[Any],
                pages: PageRows | None = None) -> None:
        seq = self._next_seq
        arrow = self._numbered(batches, seq)
        staged, self._staged = self._staged, []
        data: Any = arrow
        publish, merged_away = staged, []
        replace = self._replace_next
        rewrites_table = False
        merge = self._dedup_merge() if self._mode == APPEND_DEDUP else None
        if merge is not None and not isinstance(self.table, SparkTable):  # a Delta MERGE; new rows: those handed over
            rewrites_table = True
        elif self._mode == APPEND_DEDUP:  # the table rewritten, one row per key: by Arrow, or by Spark where Arrow cannot
            data = (merge.latest_per_key(self._rows_to_merge(arrow, include_table=not replace, staged=staged)) if merge is not None
                    else self._merged(arrow, include_table=not replace, staged=staged))
            merge, publish, merged_away, replace, rewrites_table = None, [], staged, True, True
        elif self._rewrite_next and not replace:
            data = self._table_rows().unionByName(arrow_frame(self.table.spark, arrow))
            replace, rewrites_table = True, True
        info = self.table.commit(
            data, dict(state or {}), seq, replace=replace, notes=notes, merged_states=merged_states,
            reset_id=self._reset_id, schema=self._schema_json, staged=publish, pages=pages,
            **({"merge": merge} if merge is not None else {}),
        )
        self.counts.add_counts(info.counts)
        # Counted in the published files' footers, not taken on trust: the runtime prints the STATE only if they hold every record.
        new_rows = arrow.num_rows + sum(item.rows for item in staged) if rewrites_table else info.rows
        for item in merged_away:  # their rows are in the new table version now
            shutil.rmtree(item.folder, ignore_errors=True)
        if self._reset_id:
            self.table.clear_reset()
            self._reset_id = None
        self._replace_next = False  # a rebuild replaces once; the rest of this run adds to it
        self._rewrite_next = False  # so does a widening
        self._next_seq = seq + 1
        self.commits += 1
        self.rows += new_rows
        logger.debug("%s: commit %d, %d new rows, %.0f ms", self.name, seq, new_rows, info.ms)

    def _numbered(self, batches: list[pa.Table], seq: int) -> pa.Table:
        if not batches:
            return self._no_rows
        arrow = pa.concat_tables(batches)
        column = pa.repeat(pa.scalar(seq, pa.int64()), arrow.num_rows)
        return arrow.set_column(arrow.schema.get_field_index(CHECKPOINT), CHECKPOINT, column)

    def _table_rows(self) -> Any:
        return conformed(self.table.read(), self.schema)

    def _rows_to_merge(self, arrow: pa.Table, include_table: bool, staged: list[StagedFiles]) -> pa.Table:
        """The table's rows, then the staged ones, then ``arrow``'s: the order ``DedupMerge`` breaks ties by, as ``_merged``."""
        assert isinstance(self.table, SparkTable)  # (a Delta table merges itself)
        files = [file for item in staged for file in item.parquet_files()]
        staged_rows = pa.Table.from_batches(parquet_batches(files, self.schema), self.schema)
        return pa.concat_tables([*([self.table.rows(self.schema)] if include_table else []), staged_rows, arrow])

    def _merged(self, arrow: pa.Table, include_table: bool, staged: list[StagedFiles]) -> Any:
        """The table's rows plus the new ones, one per key: the latest cursor, then the last read (never by the clock)."""
        from functools import reduce

        # Spark first: the thread starting it imports pyspark, and a second thread importing it meanwhile fails (a circular import)
        spark = self.table.spark
        from pyspark.sql import Window
        from pyspark.sql import functions as F

        frames = [self.table.read_staged(item).select("*", F.lit(part).alias(_PART), F.col("_metadata.row_index").alias(_ROW))
                  for part, item in enumerate(staged)]
        rows = arrow.append_column(_ROW, pa.array(range(arrow.num_rows), pa.int64()))
        frames.append(arrow_frame(spark, rows).withColumn(_PART, F.lit(len(staged))))
        if include_table and self.table.last_checkpoint() is not None:  # (earlier commits: read before)
            frames.insert(0, self._table_rows().select("*", F.lit(-1).alias(_PART), F.lit(-1).cast("long").alias(_ROW)))
        frame = reduce(lambda a, b: a.unionByName(b), frames)
        keys = [path_value(path) for path in self.target.primary_key]
        cursor = self.target.cursor_field
        order = [cursor_value(cursor, self.target.json_schema).desc_nulls_last()] if cursor else []
        order += [F.col(CHECKPOINT).desc(), F.col(_PART).desc(), F.col(_ROW).desc()]
        without_key = reduce(lambda a, b: a | b, [key.isNull() for key in keys])
        ranked = frame.withColumn("_sf_rank", F.row_number().over(Window.partitionBy(*keys).orderBy(*order)))
        return ranked.where(without_key | (F.col("_sf_rank") == 1)).drop("_sf_rank", _PART, _ROW)


#: a merge's row order columns (``TableWriter._merged``): which of the commit's parts, which row in it
_PART, _ROW = "_sf_merge_part", "_sf_merge_row"


def _as_rewritten(rows: pa.Table, names: list[str]) -> pa.Table | None:
    if not names:
        return None
    for name in names:
        texts = rows.column(name).to_pylist()
        rows = rows.set_column(rows.schema.get_field_index(name), rows.schema.field(name),
                               pa.array([_rewrite_text(text) for text in texts], pa.string()))
    return rows


# A timestamp as Arrow casts it to text (files not rewritten yet), and as the widening's rewrite writes it.
_ARROW_TEXT = r"^(\d{4}-\d{2}-\d{2}) (\d{2}:\d{2}:\d{2}\.\d{6}Z)$"
_REWRITE_TEXT = r"^(\d{4}-\d{2}-\d{2})T(\d{2}:\d{2}:\d{2}\.\d{6}Z)$"


def _as_rewrite_text(rows: pa.Table, names: list[str]) -> pa.Table:
    """Table rows, the columns ``names`` as the rewrite writes timestamps (files not rewritten yet read them Arrow's way)."""
    for name in names:
        index = rows.schema.get_field_index(name)
        text = pc.replace_substring_regex(rows.column(name), pattern=_ARROW_TEXT, replacement=r"\1T\2")
        rows = rows.set_column(index, rows.schema.field(name), text)
    return rows


def _as_arrow_text(texts: Any) -> Any:
    return pc.replace_substring_regex(texts, pattern=_REWRITE_TEXT, replacement=r"\1 \2")


def _rewrite_text(text: str | None) -> str | None:
    if text is None:
        return None
    try:
        instant = datetime.fromisoformat(text)
    except ValueError:
        return text
    if instant.tzinfo is None:
        instant = instant.replace(tzinfo=UTC)  # as the conversion read a date-time without a zone
    return instant.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def _row_digest(row: Mapping[str, Any]) -> bytes:
    """A digest of a row's values, so counting many rows read again costs 16 bytes each, not their size."""
    encoded = orjson.dumps(row, option=orjson.OPT_SORT_KEYS | orjson.OPT_NON_STR_KEYS, default=str)
    return hashlib.blake2b(encoded, digest_size=16).digest()
