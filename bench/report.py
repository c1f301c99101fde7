"""Medians, ratios and targets of a benchmark run, as text and as JSON.

The targets are the speed issue's; they are reported whether met or missed, each where it
applies (the API answering at once: CPU-bound; the API waiting before each page: latency-bound)::

    CPU-bound      full sync @ slice checkpoints >= 0.85 x (1) our read, records dropped (>= 1,000,000
                   records; >= 0.6 below); (1) >= 150,000 records/s at >= 1,000,000 records;
                   full sync @ interval 100 >= 0.9 x full sync @ slice checkpoints
    latency-bound  full sync, concurrency 8 >= 6 x concurrency 1, and >= 1.2 x airbyte-cdk's
                   declarative source at concurrency 8
    CPU-bound      first STATE <= 6 s after the process started (embedded Spark session; up to
                   1,000,000 records: beyond, reading the first slice alone takes longer)
    any            first commit <= 1 s from the first slice's end (a running Spark Connect server);
                   peak memory of a full sync (Python + JVM + page converters) < 1.5 GB (concurrency 8 where it ran);
                   Python peak grows < 10% from the smallest to the largest --records
    any            (table formats) Delta @ slice >= 0.9 x Parquet folders @ slice, >= 3 x dlt's Delta
                   load; a resume opens a table of >= 1,000 commits in <= 1 s

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
READ_RATE_TARGET = 150_000  # records/s of (1) at >= LARGE records, the API answering at once
LARGE = 1_000_000
FIRST_STATE_TARGET_S = 6.0  # from the process's start, embedded Spark session
FIRST_COMMIT_TARGET_S = 1.0  # from the first slice's end, a running Spark Connect server
RESUME_OPEN_TARGET_S, RESUME_OPEN_COMMITS = 1.0, 1000  # a table of 1,000 commits opens for a resume within 1 s

CPU, LATENCY, ANY = "cpu", "latency", "any"

# (name, numerator case, denominator case, target or None, where the target applies)
RATIOS: list[tuple[str, str, str, float | None, str]] = [
    ("full sync @ slice / (1) our read, dropped", "full-slice-c1", "framework-null", 0.85, CPU),
    ("full sync @ slice / (1) our read, dropped, both concurrency 4", "full-slice-c4", "framework-null-c4", None, ANY),
    ("full sync @ slice / (1) our read, dropped, both concurrency 8", "full-slice-c8", "framework-null-c8", None, ANY),
    ("full sync @ 100 / full sync @ slice", "full-100", "full-slice-c1", 0.9, CPU),
    ("full sync @ 1000 / full sync @ slice", "full-1000", "full-slice-c1", None, ANY),
    ("full sync @ 10000 / full sync @ slice", "full-10000", "full-slice-c1", None, ANY),
    ("full sync, concurrency 8 / concurrency 1", "full-slice-c8", "full-slice-c1", 6.0, LATENCY),
    ("full sync, concurrency 4 / concurrency 1", "full-slice-c4", "full-slice-c1", None, ANY),
    ("full sync, concurrency 8 / airbyte-cdk declarative, concurrency 8", "full-slice-c8", "cdk-declarative-c8", 1.2, LATENCY),
    ("full sync, concurrency 4 / airbyte-cdk declarative, concurrency 4", "full-slice-c4", "cdk-declarative-c4", None, ANY),
    ("full sync @ slice / (2) airbyte-cdk read", "full-slice-c1", "cdk-devnull", None, ANY),
    ("(1) our read, dropped / (2) airbyte-cdk read", "framework-null", "cdk-devnull", None, ANY),
    ("(3) bare requests / (1) our read, dropped", "bare-requests", "framework-null", None, ANY),
    # the table formats (issue 50's targets): full-slice-c1 and full-100 write the run's format, Delta by default
    ("Delta @ slice / Parquet folders @ slice", "full-slice-c1", "parquet-slice", 0.9, ANY),
    ("Delta @ 100 / Parquet folders @ 100", "full-100", "parquet-100", None, ANY),
    ("Delta @ slice / dlt's Delta load", "full-slice-c1", "dlt-delta", 3.0, ANY),
    ("Delta by Spark's writer @ slice / Delta by delta-rs @ slice", "spark-writer-slice", "full-slice-c1", None, ANY),
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
            # CPU seconds over the process's wall time: the case's cores in use, and the demo API's
            "cores": _median_rounded([m.cores for m in runs]),
            "api_cores": _median_rounded([m.api_cores for m in runs]),
            "python_peak_mb": round(max(m.python_peak_mb for m in runs), 1),
            "jvm_peak_mb": round(max(m.jvm_peak_mb for m in runs), 1),
            "converter_peak_mb": round(max(m.converter_peak_mb for m in runs), 1),
            # seconds from the process's start to its first STATE line (full syncs only)
            "first_state_after_start_s": _median_rounded([m.extra.get("first_state_after_start_s") for m in runs]),
            # seconds from the first checkpoint asked (the first slice's end) to its STATE line
            "first_commit_s": _median_rounded([m.extra.get("first_commit_s") for m in runs]),
            # seconds a resume takes to open the tables and find their last checkpoint (full syncs only)
            "resume_open_s": _median_rounded([m.extra.get("resume_open_s") for m in runs]),
            "repetitions": len(runs),
        }

    @property
    def regime(self) -> str:
        """CPU-bound when the API answers at once, latency-bound when it waits before each page."""
        return LATENCY if self.settings.get("latency_ms") else CPU

    def ratios(self) -> list[dict[str, Any]]:
        rows = []
        for name, top, bottom, target, applies in RATIOS:
            a, b = self.median_rate(top), self.median_rate(bottom)
            if a is None or not b:
                continue
            if applies not in (ANY, self.regime):
                target = None
            elif top == "full-slice-c1" and bottom == "framework-null" and self.records < LARGE:
                target = 0.6  # the figure below 1,000,000 records: Spark's start weighs more
            value = a / b
            rows.append({"name": name, "value": round(value, 3), "target": target,
                         "met": None if target is None else value >= target,
                         "by_repetition": self._paired_range(top, bottom)})
        return rows

    def _paired_range(self, top: str, bottom: str) -> list[float] | None:
        """The lowest and highest of the ratio taken within each repetition (the two cases ran
        seconds apart), where there are several. Why: this machine's speed drifts over minutes,
        so the spread says how far one run's ratio can be trusted (1,000,000 orders, 5
        repetitions: slice checkpoints over the read alone 0.78-0.90, 0.83 from the medians)."""
        pairs = list(zip(self.measurements[top], self.measurements[bottom], strict=True))  # one per repetition
        if len(pairs) < 2:
            return None
        values = [a.records_per_second / b.records_per_second for a, b in pairs if b.records_per_second]
        return [round(min(values), 2), round(max(values), 2)] if values else None

    def checks(self) -> list[dict[str, Any]]:
        """The targets that are not ratios: our read's rate, seconds to the first STATE and from the
        first slice's end to it, memory."""
        rows = []
        read_rate = self.median_rate("framework-null")
        if read_rate is not None and self.regime == CPU and self.records >= LARGE:
            rows.append(_check("(1) our read, dropped: records/s", read_rate, ">=", READ_RATE_TARGET))
        connect = str(self.settings.get("spark_master") or "").startswith("sc://")
        for case in self.measurements:
            summary = self.summary(case)
            if summary["resume_open_s"] is not None and (summary["spark_commits"] or 0) >= RESUME_OPEN_COMMITS:
                rows.append(_check(f"{case}: resume opens {summary['spark_commits']:,} commits, s", summary["resume_open_s"],
                                   "<=", RESUME_OPEN_TARGET_S))
            if not case.startswith("full-slice"):
                continue
            if connect and summary["first_commit_s"] is not None:
                rows.append(_check(f"{case}: first commit s", summary["first_commit_s"], "<=", FIRST_COMMIT_TARGET_S))
            elif (not connect and self.regime == CPU and self.records <= LARGE
                  and summary["first_state_after_start_s"] is not None):
                # The issue sets it at 200,000 records. With the API waiting, or past 1,000,000
                # records (4,000,000: a first slice of 333,000), the first STATE waits for the
                # first slice's pages, not for Spark.
                rows.append(_check(f"{case}: first STATE s after start", summary["first_state_after_start_s"], "<=",
                                   FIRST_STATE_TARGET_S))
        peak = self.peak_sync_memory_mb()
        if peak is not None:
            rows.append(_check("peak memory of a full sync, MB (Python + JVM + converters)", peak, "<", MEMORY_LIMIT_MB))
        return rows

    def peak_sync_memory_mb(self) -> float | None:
        """The largest Python + JVM + page converters peak of the full syncs at concurrency 8 (the
        target's case), or of any full sync when that case did not run."""
        cases = ["full-slice-c8"] if "full-slice-c8" in self.measurements else [c for c in self.measurements if c.startswith("full-")]
        totals = [m.python_peak_mb + m.jvm_peak_mb + m.converter_peak_mb for case in cases for m in self.measurements[case]]
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
            f"{s.get('page_size')}, API latency {s.get('latency_ms', 0)} ms a page"
            f"{' (pages served from memory)' if s.get('pages_cached') else ''}, {s.get('repeat')} interleaved "
            f"repetition(s), medians; {s.get('cpus')} CPU(s)",
            "",
        ]
        header = ["case", "records/s", "seconds", "first STATE s", "first commit s", "STATEs", "commits", "files",
                  "resume open s", "cores", "API cores", "Python MB", "converter MB", "JVM MB"]
        rows = []
        for case in self.measurements:
            summary = self.summary(case)
            rows.append([summary["label"], f"{summary['records_per_second']:,.0f}", f"{summary['seconds']:.2f}",
                         _dash(summary["first_state_after_start_s"]), _dash(summary["first_commit_s"]),
                         str(summary["states"]), _dash(summary["spark_commits"]), _dash(summary["data_files"]),
                         _dash(summary["resume_open_s"]), _dash(summary["cores"]), _dash(summary["api_cores"]),
                         f"{summary['python_peak_mb']:.0f}", _dash(round(summary["converter_peak_mb"]) or None),
                         _dash(round(summary["jvm_peak_mb"]) or None)])
        lines.append(_table(header, rows))
        lines += ["", "Ratios of records/s (targets from the issue)"]
        ratio_rows = [[r["name"], f"{r['value']:.2f}",
                       "" if r["by_repetition"] is None else "{:.2f}-{:.2f}".format(*r["by_repetition"]),
                       "" if r["target"] is None else f">= {r['target']}",
                       "" if r["met"] is None else ("met" if r["met"] else "MISSED")] for r in self.ratios()]
        lines.append(_table(["ratio", "value", "by repetition", "target", ""], ratio_rows))
        check_rows = [[c["name"], f"{c['value']:,.2f}", f"{c['op']} {c['target']:,}", "met" if c["met"] else "MISSED"]
                      for c in self.checks()]
        if check_rows:
            lines += ["", "Other targets", _table(["figure", "value", "target", ""], check_rows)]
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
            "checks": self.checks(),
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


def _check(name: str, value: float, op: str, target: float) -> dict[str, Any]:
    met = {"<=": value <= target, "<": value < target, ">=": value >= target}[op]
    return {"name": name, "value": round(value, 3), "op": op, "target": target, "met": met}


def _median_or_none(values: Sequence[int | None]) -> int | None:
    present = [v for v in values if v is not None]
    return int(statistics.median(present)) if present else None


def _median_rounded(values: Sequence[float | None]) -> float | None:
    known = [v for v in values if v is not None]
    return round(statistics.median(known), 2) if known else None


def _dash(value: Any) -> str:
    return "-" if value is None else f"{value:,}" if isinstance(value, int) else str(value)


def _table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    widths = [max(len(h), *(len(r[i]) for r in rows)) if rows else len(h) for i, h in enumerate(header)]

    def line(cells: Sequence[str]) -> str:
        return "  ".join(c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(cells, widths, strict=True)))

    return "\n".join([line(header), "  ".join("-" * w for w in widths), *(line(r) for r in rows)])
