"""What our commits say in a Delta log: each one's checkpoint record, or a ``state reset``'s mark,
in its ``commitInfo.userMetadata`` (a JSON object), and the rows it added.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from deltalake import DeltaTable

#: the key of our checkpoint record inside ``commitInfo.userMetadata``
RECORD_KEY = "source_framework_checkpoint"
#: the key of a ``state reset``'s mark inside ``commitInfo.userMetadata``
RESET_KEY = "source_framework_reset"


def history_newest_first(table: DeltaTable) -> Iterator[dict[str, Any]]:
    """The table's commit infos, newest first: the last few read first (a resume mostly needs the
    newest), the whole history only if asked for more."""
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


def rows_of(info: Mapping[str, Any]) -> int:
    """The rows a commit wrote, as its writer counted them (delta-rs's and Spark's own names), or,
    for files added as written (``delta_file_commit``), as the record says they were counted."""
    metrics = info.get("operationMetrics") or {}
    for key in ("num_added_rows", "numOutputRows", "num_source_rows"):
        if key in metrics:
            return int(metrics[key] or 0)
    return int((record_of(info) or {}).get("rows") or 0)


def with_rows(metadata: str, rows: int) -> str:
    content = json.loads(metadata)
    content[RECORD_KEY]["rows"] = rows
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
