"""A PNG a person can look at: throughput and records at risk against the checkpoint interval.

Two panels over the settings in the order compared (``none`` = slice checkpoints only): records
per second, and the most records at risk (log scale: intervals span orders of magnitude), each
for our runtime and, for reference, airbyte-cdk's own read. matplotlib draws it with the Agg
backend, so no display is needed.

Usage::

    plot_comparison(results, "compare.png", title="users, orders: 200,000 records")
"""

from __future__ import annotations

from collections.abc import Sequence

from source_framework.compare.experiment import SettingResult


def plot_comparison(results: Sequence[SettingResult], path: str, title: str | None = None) -> str:
    import matplotlib

    matplotlib.use("Agg")  # files only: no display on servers and CI
    from matplotlib import pyplot

    labels = [r.setting.label for r in results]
    positions = list(range(len(results)))
    figure, (speed, risk) = pyplot.subplots(2, 1, figsize=(7.5, 7), sharex=True)
    try:
        speed.plot(positions, [r.clean.records_per_second for r in results], "o-", label="ours (into Spark)")
        risk.plot(positions, [max(r.clean.max_at_risk, 1) for r in results], "o-", label="ours")
        with_cdk = [(i, r.cdk) for i, r in zip(positions, results, strict=True) if r.cdk is not None]
        if with_cdk:
            xs = [i for i, _ in with_cdk]
            speed.plot(xs, [run.records_per_second for _, run in with_cdk], "s--", label="airbyte-cdk read (no destination)")
            risk.plot(xs, [max(run.max_at_risk, 1) for _, run in with_cdk], "s--", label="airbyte-cdk read")
        speed.set_ylabel("records / s")
        speed.set_ylim(bottom=0)
        risk.set_ylabel("most records at risk")
        risk.set_yscale("log")
        risk.set_xlabel("state_checkpoint_interval (none: slice checkpoints only)")
        risk.set_xticks(positions, labels)
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
