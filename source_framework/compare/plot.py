"""A PNG a person can look at: throughput and records at risk against the checkpoint interval.

Two panels over the intervals in the order compared (``none`` = slice checkpoints only): records
per second, and the most records at risk (log scale: intervals span orders of magnitude), each
for our runtime and, for reference, airbyte-cdk's own read; one line per concurrency level
(``--concurrency 1,4``). matplotlib draws it with the Agg
backend, so no display is needed.

Usage::

    plot_comparison(results, "compare.png", title="users, orders: 200,000 records")
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from source_framework.compare.experiment import SettingResult


@dataclass
class Series:
    """One line of both panels: ``xs`` index the interval labels."""

    name: str
    style: str
    xs: list[int]
    records_per_second: list[float]
    max_at_risk: list[int]


def chart_series(results: Sequence[SettingResult]) -> tuple[list[str], list[Series]]:
    """The interval labels along the x axis and the lines: ours and airbyte-cdk's per concurrency level."""
    labels = list(dict.fromkeys(r.setting.interval_label for r in results))
    lines = []
    for level in dict.fromkeys(r.setting.concurrency for r in results):
        runs = [r for r in results if r.setting.concurrency == level]
        suffix = "" if level is None else f", concurrency {level}"
        for name, style, pairs in (
            (f"ours (into Spark){suffix}", "o-", [(r, r.clean) for r in runs]),
            (f"airbyte-cdk read (no destination){suffix}", "s--", [(r, r.cdk) for r in runs if r.cdk is not None]),
        ):
            if pairs:
                lines.append(Series(name, style, [labels.index(r.setting.interval_label) for r, _ in pairs],
                                    [run.records_per_second for _, run in pairs],
                                    [max(run.max_at_risk, 1) for _, run in pairs]))  # log scale: no zero
    return labels, lines


def plot_comparison(results: Sequence[SettingResult], path: str, title: str | None = None) -> str:
    import matplotlib

    matplotlib.use("Agg")  # files only: no display on servers and CI
    from matplotlib import pyplot

    labels, lines = chart_series(results)
    figure, (speed, risk) = pyplot.subplots(2, 1, figsize=(7.5, 7), sharex=True)
    try:
        for line in lines:
            speed.plot(line.xs, line.records_per_second, line.style, label=line.name)
            risk.plot(line.xs, line.max_at_risk, line.style, label=line.name)
        speed.set_ylabel("records / s")
        speed.set_ylim(bottom=0)
        risk.set_ylabel("most records at risk")
        risk.set_yscale("log")
        risk.set_xlabel("state_checkpoint_interval (none: slice checkpoints only)")
        risk.set_xticks(list(range(len(labels))), labels)
        for axes in (speed, risk):
            axes.grid(True, alpha=0.3)
            axes.margins(x=0.12)  # keep the first and last points off the frame
            axes.legend(loc="best", fontsize="small")
        figure.suptitle(title or "Checkpoint interval: throughput and records at risk")
        figure.tight_layout()
        figure.savefig(path, dpi=110)
    finally:
        pyplot.close(figure)
    return path
