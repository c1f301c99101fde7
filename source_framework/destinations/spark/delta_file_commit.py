"""A Delta commit of Parquet files the page converter wrote: moved in and named in the log entry, not read and written again;
a kill before the transaction leaves a file no log entry names, which VACUUM removes."""

from __future__ import annotations

import json
import os
import uuid
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

import pyarrow as pa
import pyarrow.parquet as pq

from source_framework.destinations.spark.arrow_conversion import parquet_options
from source_framework.destinations.spark.commit_parts import ARROW_PARQUET_OPTIONS, StagedFiles

if TYPE_CHECKING:
    from deltalake import CommitProperties, DeltaTable, PostCommitHookProperties


def files_fit(table: DeltaTable, data: pa.Table, staged: Sequence[StagedFiles]) -> bool:
    """Whether ``data`` and every staged file have the table's schema exactly, so their files can be added as they are."""
    from deltalake import Schema

    if Schema.from_arrow(data.schema) != table.schema():
        return False
    wanted = data.schema.remove_metadata()
    return all(pq.read_schema(path).remove_metadata().equals(wanted) for path in _staged_paths(staged))


def commit_files(table: DeltaTable, folder: str, data: pa.Table, staged: Sequence[StagedFiles], seq: int,
                 properties_for: Callable[[int, list[str]], CommitProperties], hooks: PostCommitHookProperties) -> int:
    """One append transaction adding the staged files and ``data``'s; returns the rows added, as counted in the footers."""
    from deltalake.transaction import AddAction, RemoveAction

    added: list[tuple[str, int]] = []  # (name in the table, rows)
    counted = {os.path.join(item.folder, name): item.rows for item in staged if len(item.files) == 1 for name in item.files}
    for path in _staged_paths(staged):
        name = _file_name(seq, len(added))
        rows = counted.get(path)
        os.rename(path, os.path.join(folder, name))
        added.append((name, rows if rows is not None else pq.read_metadata(os.path.join(folder, name)).num_rows))
    if data.num_rows:
        name = _file_name(seq, len(added))
        pq.write_table(data, os.path.join(folder, name), **parquet_options(ARROW_PARQUET_OPTIONS, data.schema))
        added.append((name, data.num_rows))
    actions: list[AddAction | RemoveAction] = []
    for name, rows in added:
        stat = os.stat(os.path.join(folder, name))
        actions.append(AddAction(name, stat.st_size, {}, stat.st_mtime_ns // 1_000_000, True, json.dumps({"numRecords": rows})))
    total = sum(rows for _, rows in added)
    table.create_write_transaction(actions, mode="append", schema=table.schema(),
                                   commit_properties=properties_for(total, [name for name, _ in added]), post_commithook_properties=hooks)
    return total


def _staged_paths(staged: Sequence[StagedFiles]) -> list[str]:
    return [os.path.join(item.folder, name) for item in staged
            for name in (item.files or sorted(os.listdir(item.folder))) if name.endswith(".parquet")]


def _file_name(seq: int, n: int) -> str:
    return f"part-{seq:08d}-{n:03d}-{uuid.uuid4().hex}.snappy.parquet"


