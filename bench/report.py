"""Medians, ratios and targets of a benchmark run, as text and as JSON.

The targets are the issue's; they are reported whether met or missed::

    full sync @ slice checkpoints  >= 0.85 x (1) framework with records dropped
    full sync @ slice checkpoints  >= 3    x (2) airbyte-cdk read to /dev/null
    full sync @ interval 1000      >= 0.8  x full sync @ slice checkpoints
    full sync @ interval 100       >= 0.5  x full sync @ slice checkpoints
    peak memory of a sync (Python + JVM) < 1.5 GB
    Python peak grows < 10% from the smallest to the largest --records (when several are given)

Usage::

    report = BenchReport(records=200_000, measurements={"full-slice-c1": [m1, m2, m3], ...}, labels=...)
    print(report.text()); json.dump(report.to_json(), handle)
"""

from __future__ import annotations

import statistics
from collections.abc import Mapping, Sequence
from dataclasses import asdict
from typing import Any

from bench.cases import Measurement

MEMORY_LIMIT_MB = 1536
MEMORY_GROWTH_LIMIT = 0.10

# (name, numerator case, denominator case, target or None)
RATIOS: list[tuple[str, str, str, float | None]] = [
    ("full sync @ slice / (1) framework, dropped", "full-slice-c1", "framework-null", 0.85),
    ("full sync @ slice / (2) airbyte-cdk read", "full-slice-c1", "cdk-devnull", 3.0),
    ("full sync @ 1000 / full sync @ slice", "full-1000", "full-slice-c1", 0.8),
    ("full sync @ 100 / full sync @ slice", "full-100", "full-slice-c1", 0.9),
    ("full sync @ 10000 / full sync @ slice", "full-10000", "full-slice-c1", None),
    # with the API waiting (--latency-ms 100, 100 records a page): the concurrency targets
    ("full sync, concurrency 8 / concurrency 1", "full-slice-c8", "full-slice-c1", 6.0),
    ("full sync, concurrency 4 / concurrency 1", "full-slice-c4", "full-slice-c1", None),
    ("full sync, concurrency 8 / airbyte-cdk declarative, concurrency 8", "full-slice-c8", "cdk-declarative-c8", 1.2),
    ("full sync, concurrency 4 / airbyte-cdk declarative, concurrency 4", "full-slice-c4", "cdk-declarative-c4", None),
    ("(1) framework, dropped / (2) airbyte-cdk read", "framework-null", "cdk-devnull", None),
    ("(3) bare requests / (1) framework, dropped", "bare-requests", "framework-null", None),
]


class BenchReport:
    def __init__(self, records: int, measurements: Mapping[str, Sequence[Measurement]], labels: Mapping[str, str],
                 settings: Mapping[str, Any]) -> None:
        self.records = records
        self.measurements = {name: list(runs) for name, runs in measurements.items() if runs}
        self.labels = dict(labels)
        self.settings = dict(settings)

    # --- figures ------------------------------------------------------------------------------

    def median_rate(self, case: str) -> float | None:
        runs = self.measurements.get(case)
        return statistics.median(m.records_per_second for m in runs) if runs else None

    def summary(self, case: str) -> dict[str, Any]:
        runs = self.measurements[case]
        return {
            "label": self.labels.get(case, case),
            "records": runs[0].records,
            "records_per_second": round(statistics.median(m.records_per_second for m in runs), 1),
            "seconds": round(statistics.median(m.seconds for m in runs), 3),
            "process_seconds": round(statistics.median(m.process_seconds for m in runs), 3),
            "states": int(statistics.median(m.states for m in runs)),
            "spark_commits": _median_or_none([m.commits for m in runs]),
            "data_files": _median_or_none([m.data_files for m in runs]),
            "python_peak_mb": round(max(m.python_peak_mb for m in runs), 1),
            "jvm_peak_mb": round(max(m.jvm_peak_mb for m in runs), 1),
            # seconds from the process's start to its first STATE line (full syncs only)
            "first_state_after_start_s": _median_seconds([m.extra.get("first_state_after_start_s") for m in runs]),
            "repetitions": len(runs),
        }

    def ratios(self) -> list[dict[str, Any]]:
        rows = []
        for name, top, bottom, target in RATIOS:
            a, b = self.median_rate(top), self.median_rate(bottom)
            if a is None or not b:
                continue
            value = a / b
            rows.append({"name": name, "value": round(value, 3), "target": target,
                         "met": None if target is None else value >= target})
        return rows

    def peak_sync_memory_mb(self) -> float | None:
        """The largest Python + JVM peak of any full sync run."""
        totals = [m.python_peak_mb + m.jvm_peak_mb for case, runs in self.measurements.items()
                  if case.startswith("full-") for m in runs]
        return max(totals) if totals else None

    def peak_python_mb(self) -> float:
        """The sync process's Python peak (the full sync cases; any case when none ran)."""
        runs = [m for case, ms in self.measurements.items() if case.startswith("full-") for m in ms]
        return max(m.python_peak_mb for m in runs or [m for ms in self.measurements.values() for m in ms])

    def check_records(self) -> list[str]:
        """Every case must have read the same records; say which did not."""
        counts = {case: runs[0].records for case, runs in self.measurements.items()}
        expected = max(counts.values(), default=0)
        return [f"{case} read {count:,} records, others {expected:,}" for case, count in counts.items() if count != expected]

    # --- renderings ---------------------------------------------------------------------------

    def text(self) -> str:
        s = self.settings
        lines = [
            f"Benchmark: {self.records:,} records per stream ({', '.join(s.get('streams', []))}), page size "
            f"{s.get('page_size')}, API latency {s.get('latency_ms', 0)} ms a page, {s.get('repeat')} interleaved "
            f"repetition(s), medians; {s.get('cpus')} CPU(s)",
            "",
        ]
        header = ["case", "records/s", "seconds", "first STATE s", "STATEs", "commits", "files", "Python MB", "JVM MB"]
        rows = []
        for case in self.measurements:
            summary = self.summary(case)
            rows.append([summary["label"], f"{summary['records_per_second']:,.0f}", f"{summary['seconds']:.2f}",
                         _dash(summary["first_state_after_start_s"]),
                         str(summary["states"]), _dash(summary["spark_commits"]), _dash(summary["data_files"]),
                         f"{summary['python_peak_mb']:.0f}", _dash(round(summary["jvm_peak_mb"]) or None)])
        lines.append(_table(header, rows))
        lines += ["", "Ratios of records/s (targets from the issue)"]
        ratio_rows = [[r["name"], f"{r['value']:.2f}", "" if r["target"] is None else f">= {r['target']}",
                       "" if r["met"] is None else ("met" if r["met"] else "MISSED")] for r in self.ratios()]
        lines.append(_table(["ratio", "value", "target", ""], ratio_rows))
        peak = self.peak_sync_memory_mb()
        if peak is not None:
            verdict = "met" if peak < MEMORY_LIMIT_MB else "MISSED"
            lines += ["", f"Peak memory of a full sync (Python + Spark JVM): {peak:,.0f} MB "
                          f"(target < {MEMORY_LIMIT_MB} MB: {verdict})"]
        problems = self.check_records()
        if problems:
            lines += ["", "WARNING: cases read different record counts: " + "; ".join(problems)]
        return "\n".join(lines) + "\n"

    def to_json(self) -> dict[str, Any]:
        return {
            "records": self.records,
            "settings": self.settings,
            "cases": {case: self.summary(case) for case in self.measurements},
            "ratios": self.ratios(),
            "peak_sync_memory_mb": self.peak_sync_memory_mb(),
            "memory_limit_mb": MEMORY_LIMIT_MB,
            "record_count_problems": self.check_records(),
            "runs": {case: [asdict(m) for m in runs] for case, runs in self.measurements.items()},
        }


def memory_growth(reports: Sequence[BenchReport]) -> dict[str, Any] | None:
    """Python peak from the smallest to the largest record count (the issue's 1M -> 4M check)."""
    if len(reports) < 2:
        return None
    small, large = min(reports, key=lambda r: r.records), max(reports, key=lambda r: r.records)
    before, after = small.peak_python_mb(), large.peak_python_mb()
    growth = (after - before) / before if before else 0.0
    return {"from_records": small.records, "to_records": large.records, "python_peak_mb_from": round(before, 1),
            "python_peak_mb_to": round(after, 1), "growth": round(growth, 3), "target": MEMORY_GROWTH_LIMIT,
            "met": growth < MEMORY_GROWTH_LIMIT}


def memory_growth_text(growth: dict[str, Any] | None) -> str:
    if growth is None:
        return ""
    return (f"Python peak memory {growth['python_peak_mb_from']:,.0f} MB at {growth['from_records']:,} records -> "
            f"{growth['python_peak_mb_to']:,.0f} MB at {growth['to_records']:,}: {growth['growth']:+.1%} "
            f"(target < {growth['target']:.0%}: {'met' if growth['met'] else 'MISSED'})\n")


def _median_or_none(values: Sequence[int | None]) -> int | None:
    present = [v for v in values if v is not None]
    return int(statistics.median(present)) if present else None


def _median_seconds(values: Sequence[float | None]) -> float | None:
    present = [v for v in values if v is not None]
    return round(statistics.median(present), 2) if present else None


def _dash(value: Any) -> str:
    return "-" if value is None else f"{value:,}" if isinstance(value, int) else str(value)


def _table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    widths = [max(len(h), *(len(r[i]) for r in rows)) if rows else len(h) for i, h in enumerate(header)]

    def line(cells: Sequence[str]) -> str:
        return "  ".join(c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(cells, widths, strict=True)))

    return "\n".join([line(header), "  ".join("-" * w for w in widths), *(line(r) for r in rows)])
