"""A PNG of throughput and records at risk (log scale: intervals span orders of magnitude) against the checkpoint interval."""

from __future__ import annotations

import textwrap
from collections.abc import Sequence
from dataclasses import dataclass, field

from source_framework.compare.experiment import SettingResult
from source_framework.compare.report import interval_warnings, read_ahead_notes


@dataclass
class Series:
    name: str
    style: str
    xs: list[int]
    records_per_second: list[float]
    max_at_risk: list[int]
    checkpoints_ahead: list[int | None] = field(default_factory=list)
    read_again: list[int | None] = field(default_factory=list)  # the crash's cost, per point (None: no crash)


def chart_series(results: Sequence[SettingResult]) -> tuple[list[str], list[Series]]:
    """The x-axis interval labels and the lines: ours and airbyte-cdk's per concurrency level and read-ahead bound."""
    labels = list(dict.fromkeys(r.setting.interval_label for r in results))
    lines = []
    for axes in dict.fromkeys((r.setting.concurrency, r.setting.ahead) for r in results):
        runs = [r for r in results if (r.setting.concurrency, r.setting.ahead) == axes]
        level, ahead = axes
        suffix = ("" if level is None else f", concurrency {level}") + ("" if ahead is None else f", {ahead} ahead")
        for name, style, pairs in (
            (f"ours (into Spark){suffix}", "o-", [(r, r.clean) for r in runs]),
            (f"airbyte-cdk read (no destination){suffix}", "s--", [(r, r.cdk) for r in runs if r.cdk is not None]),
        ):
            if pairs:
                lines.append(Series(name, style, [labels.index(r.setting.interval_label) for r, _ in pairs],
                                    [run.records_per_second for _, run in pairs],
                                    [max(run.max_at_risk, 1) for _, run in pairs],  # log scale: no zero
                                    [run.max_checkpoints_ahead for _, run in pairs],
                                    [r.crash.read_again if r.crash and run is r.clean else None for r, run in pairs]))
    return labels, lines


def chart_notes(results: Sequence[SettingResult]) -> list[str]:
    return ["WARNING: " + warning for warning in interval_warnings(results)] + read_ahead_notes(results)


def plot_comparison(results: Sequence[SettingResult], path: str, title: str | None = None) -> str:
    import matplotlib

    matplotlib.use("Agg")  # files only: no display on servers and CI
    from matplotlib import pyplot

    labels, lines = chart_series(results)
    notes = "\n".join(textwrap.fill(note, 110) for note in chart_notes(results))
    note_inches = 0.16 * (notes.count("\n") + 1) if notes else 0.0
    figure, (speed, risk) = pyplot.subplots(2, 1, figsize=(7.5, 7 + note_inches), sharex=True)
    try:
        for line in lines:
            speed.plot(line.xs, line.records_per_second, line.style, label=line.name)
            risk.plot(line.xs, line.max_at_risk, line.style, label=line.name)
            for x, y, ahead in zip(line.xs, line.max_at_risk, line.checkpoints_ahead, strict=False):
                if ahead is not None:
                    risk.annotate(f"{ahead} ckpts ahead", (x, y), textcoords="offset points", xytext=(4, 6), fontsize="x-small")
            again = [(x, max(cost, 1)) for x, cost in zip(line.xs, line.read_again, strict=False) if cost is not None]
            if again:
                risk.plot([x for x, _ in again], [cost for _, cost in again], "x:",
                          label=line.name.replace("ours (into Spark)", "read again after the crash"))
        speed.set_ylabel("records / s")
        speed.set_ylim(bottom=0)
        risk.set_ylabel("most records at risk")
        risk.set_yscale("log")
        risk.set_xlabel("state_checkpoint_interval (none: slice checkpoints only)")
        risk.set_xticks(list(range(len(labels))), labels)
        for axes in (speed, risk):
            axes.grid(True, alpha=0.3)
            axes.margins(x=0.12)
            axes.legend(loc="best", fontsize="small")
        figure.suptitle(title or "Checkpoint interval: throughput and records at risk")
        if notes:
            figure.text(0.01, 0.005, notes, fontsize="x-small", va="bottom", ha="left", wrap=False)
        figure.tight_layout(rect=(0, note_inches / (7 + note_inches), 1, 1))
        figure.savefig(path, dpi=110)
    finally:
        pyplot.close(figure)
    return path
