"""The end-of-run summary of ``read``, on stderr: one row per stream, then a line per failed stream saying why.

An ``ok`` stream always has ``committed = read - skipped``: ``skipped`` are records a resumed sync read again and the
table already held.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from source_framework.runtime.error_log import failure_reason
from source_framework.runtime.results import ReadResult, StreamResult
from source_framework.runtime.secrets import SecretFilter
from source_framework.runtime.stream_adapter_base import FULL_REFRESH_COMPLETE, FULL_REFRESH_STATE, means_no_state

HEADER = ("stream", "status", "read", "committed", "skipped", "checkpoints", "commits", "final cursor", "time", "where")


def format_summary(result: ReadResult, seconds: float, secrets: SecretFilter | None = None) -> str:
    """The table, then a line per failed stream (secrets masked), then what was counted about records and values."""
    failed = len(result.failed)
    rows = [HEADER] + [_row(stream) for stream in result.streams]
    lines = [f"read finished in {human_seconds(seconds)}: {len(result.streams)} stream(s), {failed} failed"]
    lines += _aligned(rows)
    for stream in result.failed:
        assert stream.error is not None
        lines.append(_printable(f"{stream.name} failed: {failure_reason(stream.error, secrets)}"))
    for stream in result.streams:
        not_kept = stream.values_not_kept
        line = undeclared_fields_line(stream.name, not_kept.records_with_undeclared_fields, not_kept.undeclared_fields)
        if line:
            lines.append(line)
        line = mismatched_values_line(stream.name, not_kept.mismatched_values)
        if line:
            lines.append(line)
    return "\n".join(lines) + "\n"


#: fields named in an undeclared-fields line; the rest are counted
UNDECLARED_SHOWN = 10


def undeclared_fields_line(stream: str, records: int, by_field: Mapping[str, int]) -> str | None:
    """A line naming the fields the schema does not declare, most frequent first: they get no column, so the summary
    says so rather than let them vanish. None when there were none."""
    if not by_field:
        return None
    ranked = sorted(by_field.items(), key=lambda item: (-item[1], item[0]))
    shown = [f"{name}: {count:,}" for name, count in ranked[:UNDECLARED_SHOWN]]
    if len(ranked) > UNDECLARED_SHOWN:
        shown.append(f"and {len(ranked) - UNDECLARED_SHOWN} more")
    return f"{stream}: {records:,} records carried fields the schema does not declare ({', '.join(shown)}); see _sf_meta"


def mismatched_values_line(stream: str, by_field: Mapping[str, tuple[int, str]]) -> str | None:
    """A line naming the values stored as null because they did not fit their column, most frequent first, or None."""
    if not by_field:
        return None
    ranked = sorted(by_field.items(), key=lambda item: (-item[1][0], item[0]))
    shown = [f"{name}: {count:,}, {reason}" if reason else f"{name}: {count:,}" for name, (count, reason) in ranked[:UNDECLARED_SHOWN]]
    if len(ranked) > UNDECLARED_SHOWN:
        shown.append(f"and {len(ranked) - UNDECLARED_SHOWN} more fields")
    total = sum(count for count, _ in by_field.values())
    return (f"{stream}: {total:,} values did not fit their column and were stored as null ({'; '.join(shown)}); see "
            f"_sf_meta, or set destination.on_type_mismatch: fail to stop the stream instead")


def _row(stream: StreamResult) -> Sequence[str]:
    commits = "-" if stream.commits is None else f"{stream.commits:,}"
    return (
        stream.name,
        "FAILED" if stream.error is not None else "ok",
        f"{stream.records:,}",
        f"{stream.committed:,}",
        f"{stream.skipped:,}",
        f"{stream.states:,}",
        commits,
        short_state(stream.final_state),
        human_seconds(stream.duration),
        stream.location or "-",
    )


def _aligned(rows: list[Sequence[str]]) -> list[str]:
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    return ["  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip() for row in rows]


def state_as_words(state: Any) -> str | None:
    """airbyte-cdk's full-refresh state markers as a person reads them, or None; for display only, files keep the marker."""
    if state == FULL_REFRESH_STATE:
        return "(full refresh: no cursor)"
    if state == FULL_REFRESH_COMPLETE:
        return "(full refresh: complete, no cursor)"
    return None


def short_state(state: Mapping[str, Any] | None, limit: int = 60) -> str:
    """A state in a few words: ``updatedAt=2025-03-01T00:00:00Z``, or ``10 partitions, max updatedAt=...``."""
    if state is None or means_no_state(state):
        return "-"
    partitions = state.get("states")
    if isinstance(partitions, list):
        text = f"{len(partitions)} partitions"
        cursors = [entry["cursor"] for entry in partitions if isinstance(entry, Mapping) and entry.get("cursor")]
        keys = {key for cursor in cursors if isinstance(cursor, Mapping) for key in cursor}
        if len(keys) == 1:
            key = keys.pop()
            try:
                text += f", max {key}={max(cursor[key] for cursor in cursors)}"
            except (TypeError, KeyError):  # mixed or missing values: the count alone
                pass
        return _printable(text)
    text = ", ".join(f"{key}={value}" for key, value in state.items())
    return _printable(text if len(text) <= limit else text[: limit - 3] + "...")


def _printable(text: str) -> str:
    """A lone surrogate (valid in a JSON state) cannot be written as text: escaped."""
    return text.encode("utf-8", "backslashreplace").decode("utf-8")


def human_seconds(seconds: float) -> str:
    if seconds < 60:
        return f"{seconds:.1f}s"
    minutes, secs = divmod(int(seconds), 60)
    if minutes < 60:
        return f"{minutes}m{secs:02d}s"
    hours, minutes = divmod(minutes, 60)
    return f"{hours}h{minutes:02d}m"
