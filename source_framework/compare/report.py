"""The comparison's results as a text table, a Markdown table, or JSON.

Two tables: "Runs" (one row for our runtime and one for airbyte-cdk's read, per setting) and
"Crash and resume" (per setting).

Usage::

    report = Report(results, streams=["users", "orders"], crash_at=0.5)
    print(report.text())          # or report.markdown()
    json.dump(report.to_json(), handle)
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from typing import Any

from source_framework.compare.experiment import SettingResult
from source_framework.compare.runner import RunResult

RUN_COLUMNS = ["interval", "run", "STATEs", "repeated", "Spark commits", "data files", "wall s", "first STATE s",
               "first commit s", "records/s", "max at risk"]
CRASH_COLUMNS = ["interval", "killed after", "STATEs saved", "at risk at kill", "read again", "resume wall s",
                 "rows", "duplicates", "missing"]
NOTES = [
    "first STATE s: seconds from the run's process start to its first STATE line (imports, Spark's start "
    "where the sync needs it, and the first commit included).",
    "first commit s: seconds from the moment the sync first asked for a checkpoint (its first slice's end, at "
    "slice checkpoints) to that checkpoint's STATE line.",
    "max at risk: the most records read but not covered by a STATE the caller had received (what a crash "
    "can cost); ours is counted when each STATE line arrives, airbyte-cdk's as RECORD lines since the "
    "stream's last STATE. With concurrency, a slice committed ahead of the STATE's watermark counts as at "
    "risk although a resumed run skips it: 'read again' in the crash table is what the crash cost.",
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

    # --- rows ---------------------------------------------------------------------------------

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

    # --- renderings ---------------------------------------------------------------------------

    def text(self) -> str:
        parts = ["Checkpoint intervals: " + self.headline(), "", "Runs", _text_table(RUN_COLUMNS, self.run_rows())]
        crash = self.crash_rows()
        if crash:
            parts += ["", "Crash and resume", _text_table(CRASH_COLUMNS, crash)]
        parts += [""] + ["* " + note for note in NOTES]
        return "\n".join(parts) + "\n"

    def markdown(self) -> str:
        parts = ["## Checkpoint intervals", "", self.headline() + ".", "", "### Runs", "",
                 _markdown_table(RUN_COLUMNS, self.run_rows())]
        crash = self.crash_rows()
        if crash:
            parts += ["", "### Crash and resume", "", _markdown_table(CRASH_COLUMNS, crash)]
        parts += [""] + ["- " + note for note in NOTES]
        return "\n".join(parts) + "\n"

    def to_json(self) -> dict[str, Any]:
        return {
            "created_at": dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
            "streams": self.streams,
            "crash_at": self.crash_at,
            "settings": [_setting_json(result) for result in self.results],
            "notes": NOTES,
        }


def _run_cells(run: RunResult) -> list[str]:
    return [_int(run.states), _int(run.repeated_states)]


def _speed_cells(run: RunResult) -> list[str]:
    first = "-" if run.first_state_seconds is None else f"{run.first_state_seconds:.1f}"
    commit = "-" if run.first_commit_seconds is None else f"{run.first_commit_seconds:.2f}"
    return [f"{run.seconds:.1f}", first, commit, _int(round(run.records_per_second)), _int(run.max_at_risk)]


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
        "records_at_risk_at_end": run.at_risk_at_end,
        "killed": run.killed,
        "returncode": run.returncode,
        "stderr_log": run.stderr_path,
    }


def _setting_json(result: SettingResult) -> dict[str, Any]:
    data: dict[str, Any] = {
        "interval": result.setting.interval,
        "concurrency": result.setting.concurrency,  # None: the config's own concurrency_level
        "label": result.setting.label,
        "ours": {**(_run_json(result.clean) or {}), "spark_commits": result.commits.commits,
                 "data_files": result.commits.files, "committed_rows": result.commits.rows},
        "airbyte_cdk": _run_json(result.cdk),
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
        # First two columns are names (left-aligned); the rest are numbers (right-aligned).
        return "  ".join(str(c).ljust(w) if i < 2 else str(c).rjust(w) for i, (c, w) in enumerate(zip(cells, widths, strict=True)))

    return "\n".join([line(columns), "  ".join("-" * w for w in widths), *(line(r) for r in rows)])


def _markdown_table(columns: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    header = "| " + " | ".join(columns) + " |"
    rule = "|" + "|".join(":---" if i < 2 else "---:" for i in range(len(columns))) + "|"
    return "\n".join([header, rule, *("| " + " | ".join(str(c) for c in r) + " |" for r in rows)])
