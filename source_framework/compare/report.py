"""The comparison's results as a text table, a Markdown table, or JSON, with warnings and read-ahead notes."""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from typing import Any

from source_framework.compare.experiment import SettingResult
from source_framework.compare.runner import RunResult
from source_framework.compare.settings import CONFIG_KEY

#: More checkpoints waiting than this means reading outran the commits.
READ_AHEAD_CHECKPOINTS = 2

RUN_COLUMNS = ["interval", "run", "STATEs", "repeated", "Spark commits", "data files", "wall s", "first STATE s",
               "first commit s", "records/s", "max at risk", "ckpts ahead"]
CRASH_COLUMNS = ["interval", "killed after", "STATEs saved", "at risk at kill", "read again", "resume wall s",
                 "rows", "duplicates", "missing"]
NOTES = [
    "first STATE s: seconds from the run's process start to its first STATE line (imports, Spark's start "
    "where the sync needs it, and the first commit included).",
    "first commit s: seconds from the moment the sync first asked for a checkpoint (its first slice's end, at "
    "slice checkpoints) to that checkpoint's STATE line.",
    "records/s: records over the seconds from the first record read to the run's end (the process's start, "
    "imports and Spark's, is left out; the last commits are in).",
    "max at risk: the most records read but not covered by a STATE the caller had received (what a crash "
    "can cost); ours is counted when each STATE line arrives, airbyte-cdk's as RECORD lines since the "
    "stream's last STATE. With concurrency, a slice committed ahead of the STATE's watermark counts as at "
    "risk although a resumed run skips it: 'read again' in the crash table is what the crash cost.",
    "ckpts ahead: the most checkpoints the sync had asked for whose STATE had not reached the caller yet, "
    "when a STATE arrived: how far reading ran ahead of its last STATE (ours only).",
    "repeated: STATEs equal to the same stream's previous one.",
    "read again: records read by the killed run and again by the resume (killed + resume - uninterrupted).",
    "duplicates / missing: rows of the final table whose key is there more / less often than in the "
    "uninterrupted run's table.",
]


class Report:
    def __init__(self, results: Sequence[SettingResult], streams: Sequence[str], crash_at: float | None) -> None:
        self.results = list(results)
        self.streams = list(streams)
        self.crash_at = crash_at

    def run_rows(self) -> list[list[str]]:
        rows = []
        for result in self.results:
            label = result.setting.label
            rows.append([label, "ours", *_run_cells(result.clean), _int(result.commits.commits),
                         _int(result.commits.files), *_speed_cells(result.clean)])
            if result.cdk is not None:
                rows.append([label, "airbyte-cdk read", *_run_cells(result.cdk), "-", "-", *_speed_cells(result.cdk)])
        return rows

    def crash_rows(self) -> list[list[str]]:
        rows = []
        for result in self.results:
            crash = result.crash
            if crash is None:
                continue
            diff = crash.diff
            killed = _int(crash.crashed.records) if crash.crashed.killed else "not killed"
            rows.append([
                result.setting.label, killed, _int(crash.crashed.states), _int(crash.crashed.at_risk_at_end),
                _int(crash.read_again), f"{crash.resumed.seconds:.1f}",
                _int(diff.rows) if diff else "?", _int(diff.duplicates) if diff else "?", _int(diff.missing) if diff else "?",
            ])
        return rows

    def headline(self) -> str:
        records = self.results[0].clean.records if self.results else 0
        text = f"{records:,} records per sync in {len(self.streams)} stream(s) ({', '.join(self.streams)})"
        if self.crash_at is not None:
            text += f"; crash injected after {self.crash_at:.0%} of the records were read"
        return text

    def warnings(self) -> list[str]:
        return interval_warnings(self.results)

    def text(self) -> str:
        parts = ["Checkpoint intervals: " + self.headline()]
        parts += ["", *("WARNING: " + warning for warning in self.warnings())] if self.warnings() else []
        parts += ["", "Runs", _text_table(RUN_COLUMNS, self.run_rows())]
        crash = self.crash_rows()
        if crash:
            parts += ["", "Crash and resume", _text_table(CRASH_COLUMNS, crash)]
        ahead = read_ahead_notes(self.results)
        if ahead:
            parts += ["", "Read-ahead", *ahead]
        parts += [""] + ["* " + note for note in NOTES]
        return "\n".join(parts) + "\n"

    def markdown(self) -> str:
        parts = ["## Checkpoint intervals", "", self.headline() + "."]
        parts += [item for warning in self.warnings() for item in ("", "> **Warning:** " + warning)]
        parts += ["", "### Runs", "", _markdown_table(RUN_COLUMNS, self.run_rows())]
        crash = self.crash_rows()
        if crash:
            parts += ["", "### Crash and resume", "", _markdown_table(CRASH_COLUMNS, crash)]
        ahead = read_ahead_notes(self.results)
        if ahead:
            parts += ["", "### Read-ahead", "", *("- " + note for note in ahead)]
        parts += [""] + ["- " + note for note in NOTES]
        return "\n".join(parts) + "\n"

    def to_json(self) -> dict[str, Any]:
        return {
            "created_at": dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
            "streams": self.streams,
            "crash_at": self.crash_at,
            "settings": [_setting_json(result) for result in self.results],
            "warnings": self.warnings(),
            "read_ahead": read_ahead_notes(self.results),
            "notes": NOTES,
        }


def interval_warnings(results: Sequence[SettingResult]) -> list[str]:
    """Streams for which different intervals changed nothing: their interval ignored the setting, or their STATE count was equal."""
    warnings = []
    ignored: dict[str, dict[str, int | None]] = {}
    for result in results:
        for stream, interval in result.stream_intervals.items():
            if interval != result.setting.interval:
                ignored.setdefault(stream, {})[result.setting.label] = interval
    if ignored:
        named = "; ".join(
            f"{stream} (state_checkpoint_interval {_interval_values(seen.values())} at {', '.join(seen)})"
            for stream, seen in ignored.items())
        warnings.append(
            f"the interval setting changed nothing for {named}: the connector sets the stream's "
            f"state_checkpoint_interval itself instead of reading the config key '{CONFIG_KEY}', where this tool "
            "writes each setting; the figures of those streams compare nothing.")
    same: dict[str, tuple[int, list[str]]] = {}
    for axes in dict.fromkeys(r.setting.axes_label for r in results):
        group = [r for r in results if r.setting.axes_label == axes]
        intervals = {r.setting.interval for r in group}
        numbers = [i for i in intervals if i is not None]
        if len(intervals) < 2 or not numbers:
            continue
        for stream in dict.fromkeys(s for r in group for s in r.clean.states_by_stream):
            counts = {r.clean.states_by_stream.get(stream, 0) for r in group}
            read = max(r.clean.reads.get(stream, 0) for r in group)
            # Slices of no more records per STATE than the smallest interval leave equal counts meaningless.
            if len(counts) == 1 and stream not in ignored and read > min(numbers) * max(1, next(iter(counts))):
                count, labels = same.get(stream, (counts.pop(), []))
                same[stream] = (count, labels + [r.setting.label for r in group])
    if same:
        named = "; ".join(f"{stream} ({count:,} STATEs at each of {', '.join(labels)})"
                          for stream, (count, labels) in same.items())
        warnings.append(
            f"the interval setting changed nothing for {named}: the same STATE count at different intervals. "
            f"The connector may set the stream's state_checkpoint_interval itself instead of reading the config key "
            f"'{CONFIG_KEY}', the stream may be declared unsorted (it checkpoints per slice only), or its slices "
            "may hold fewer records than the intervals compared.")
    return warnings


def read_ahead_notes(results: Sequence[SettingResult]) -> list[str]:
    """Per setting: how far reading ran ahead of its last STATE, what the crash cost, and when read-ahead bounds that cost."""
    notes = []
    for result in results:
        run = result.clean
        if run.max_checkpoints_ahead is None:
            continue
        ahead = run.max_checkpoints_ahead
        note = (f"{result.setting.label}: reading ran up to {ahead:,} checkpoint{'' if ahead == 1 else 's'} "
                f"({run.max_at_risk:,} records) ahead of the last STATE")
        if result.crash is not None:
            note += f"; the crash cost {result.crash.read_again:,} records read again"
        bound = result.setting.ahead
        # A bound this small keeps reading in step; the count may exceed it by what was asked meanwhile.
        if ahead > READ_AHEAD_CHECKPOINTS and (bound is None or bound > READ_AHEAD_CHECKPOINTS):
            note += ("; reading outran the commits (an API that answers at once), so this read-ahead, not the "
                     "interval, bounds what a crash costs (--max-checkpoints-ahead lowers it)")
        notes.append(note + ".")
    return notes


def _interval_values(values: Any) -> str:
    return ", ".join(dict.fromkeys("none" if v is None else str(v) for v in values))


def _run_cells(run: RunResult) -> list[str]:
    return [_int(run.states), _int(run.repeated_states)]


def _speed_cells(run: RunResult) -> list[str]:
    first = "-" if run.first_state_seconds is None else f"{run.first_state_seconds:.1f}"
    commit = "-" if run.first_commit_seconds is None else f"{run.first_commit_seconds:.2f}"
    ahead = "-" if run.max_checkpoints_ahead is None else _int(run.max_checkpoints_ahead)
    return [f"{run.seconds:.1f}", first, commit, _int(round(run.records_per_second)), _int(run.max_at_risk), ahead]


def _int(value: int) -> str:
    return f"{value:,}"


def _run_json(run: RunResult | None) -> dict[str, Any] | None:
    if run is None:
        return None
    return {
        "records": run.records,
        "states": run.states,
        "repeated_states": run.repeated_states,
        "seconds": round(run.seconds, 3),
        "first_state_seconds": None if run.first_state_seconds is None else round(run.first_state_seconds, 3),
        "first_commit_seconds": None if run.first_commit_seconds is None else round(run.first_commit_seconds, 3),
        "records_per_second": round(run.records_per_second, 1),
        "max_records_at_risk": run.max_at_risk,
        "max_checkpoints_ahead": run.max_checkpoints_ahead,
        "reading_seconds": None if run.reading_seconds is None else round(run.reading_seconds, 3),
        "states_by_stream": run.states_by_stream,
        "records_at_risk_at_end": run.at_risk_at_end,
        "killed": run.killed,
        "returncode": run.returncode,
        "stderr_log": run.stderr_path,
    }


def _setting_json(result: SettingResult) -> dict[str, Any]:
    data: dict[str, Any] = {
        "interval": result.setting.interval,
        "concurrency": result.setting.concurrency,  # None: the config's own concurrency_level
        "max_checkpoints_ahead": result.setting.ahead,  # None: the config's own max_checkpoints_ahead
        "label": result.setting.label,
        "ours": {**(_run_json(result.clean) or {}), "spark_commits": result.commits.commits,
                 "data_files": result.commits.files, "committed_rows": result.commits.rows},
        "airbyte_cdk": _run_json(result.cdk),
        "stream_intervals": result.stream_intervals,
        "crash": None,
    }
    crash = result.crash
    if crash is not None:
        data["crash"] = {
            "kill_after_records": crash.kill_after,
            "killed": _run_json(crash.crashed),
            "states_saved": crash.crashed.states,
            "records_at_risk_at_kill": crash.crashed.at_risk_at_end,
            "resumed": _run_json(crash.resumed),
            "records_read_again": crash.read_again,
            "final_table": vars(crash.diff) if crash.diff else None,
            "per_stream": {name: vars(diff) for name, diff in result.per_stream_diff.items()},
        }
    return data


def _text_table(columns: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    widths = [max(len(str(c)), *(len(str(r[i])) for r in rows)) if rows else len(c) for i, c in enumerate(columns)]

    def line(cells: Sequence[str]) -> str:
        return "  ".join(str(c).ljust(w) if i < 2 else str(c).rjust(w) for i, (c, w) in enumerate(zip(cells, widths, strict=True)))

    return "\n".join([line(columns), "  ".join("-" * w for w in widths), *(line(r) for r in rows)])


def _markdown_table(columns: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    header = "| " + " | ".join(columns) + " |"
    rule = "|" + "|".join(":---" if i < 2 else "---:" for i in range(len(columns))) + "|"
    return "\n".join([header, rule, *("| " + " | ".join(str(c) for c in r) + " |" for r in rows)])
