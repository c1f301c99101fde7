"""What our commits say in a Delta log: a checkpoint record or a reset's mark in ``commitInfo.userMetadata``, and rows added."""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from deltalake import DeltaTable

RECORD_KEY = "source_framework_checkpoint"
RESET_KEY = "source_framework_reset"


def history_newest_first(table: DeltaTable) -> Iterator[dict[str, Any]]:
    """The table's commit infos, newest first: the last few read first, as a resume mostly needs the newest."""
    seen = 0
    for info in table.history(20):
        seen += 1
        yield info
    if seen == 20:
        yield from table.history()[20:]


def record_of(info: Mapping[str, Any]) -> dict[str, Any] | None:
    """Our checkpoint record in a commit's info, or None (another writer's commit)."""
    raw = info.get("userMetadata")
    if not raw:
        return None
    try:
        content = json.loads(raw)
    except ValueError:
        return None
    record = content.get(RECORD_KEY) if isinstance(content, dict) else None
    return record if isinstance(record, dict) else None


#: the rows and files a transaction added, as delta-rs and as Spark's Delta writer name them
ADDED_ROWS = ("num_added_rows", "numOutputRows")
ADDED_FILES = ("num_added_files", "numFiles", "numAddedFiles")


def added_rows(info: Mapping[str, Any]) -> int | None:
    """The rows a commit added, by its writer's metrics, else by our record (files added as written); None if neither says."""
    metrics = info.get("operationMetrics") or {}
    for key in ADDED_ROWS:
        if metrics.get(key) is not None:
            return int(metrics[key])
    record = record_of(info)
    return int(record["rows"]) if not metrics and record is not None and record.get("rows") is not None else None


def added_files(info: Mapping[str, Any]) -> int:
    metrics = info.get("operationMetrics") or {}
    for key in ADDED_FILES:
        if metrics.get(key) is not None:
            return int(metrics[key])
    return len((record_of(info) or {}).get("files") or ()) if not metrics else 0


def rows_of(info: Mapping[str, Any]) -> int:
    metrics = info.get("operationMetrics") or {}
    merged = metrics.get("num_source_rows")
    rows = added_rows(info)
    return int(rows if rows is not None else merged or 0)


def with_counts(metadata: str, rows: int, files: list[str]) -> str:
    """Our record in ``metadata`` with the rows and files of a commit that no writer's metrics count."""
    content = json.loads(metadata)
    content[RECORD_KEY].update(rows=rows, files=files)
    return json.dumps(content, separators=(",", ":"))


def reset_of(info: Mapping[str, Any]) -> dict[str, Any] | None:
    """A ``state reset``'s mark in a commit's info (``DeltaLakeTable.request_reset``), or None."""
    raw = info.get("userMetadata")
    try:
        content = json.loads(raw) if raw else None
    except ValueError:
        return None
    reset = content.get(RESET_KEY) if isinstance(content, dict) else None
    return reset if isinstance(reset, dict) else None
