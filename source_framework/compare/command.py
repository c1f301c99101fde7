"""``main.py compare-checkpoints``: the same streams under several checkpoint intervals, side by side.

::

    python main.py compare-checkpoints --config C --catalog K --intervals none,10000,1000,100 \\
        [--crash-at 0.5 | --no-crash] [--no-cdk] [--workdir ./compare-checkpoints] \\
        [--markdown] [--json FILE] [--plot FILE] [--spark-master local[2]]

For each interval: one uninterrupted ``read`` into a fresh warehouse, one killed with SIGKILL
after ``--crash-at`` of the records were read and resumed from its last STATEs, and airbyte-cdk's
own ``read`` of the same streams for reference (see ``experiment``). Prints a table on stdout
(Markdown with ``--markdown``), writes JSON and a PNG chart (defaults in ``--workdir``).
Progress goes to stderr. Exit codes: 0 done, 1 a sync failed, 2 bad input.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
from typing import Any, List, Optional

from source_framework.compare.settings import parse_intervals
from source_framework.runtime.inputs import InputError, load_catalog, load_config

# The runtime's command line imports this module for every command, so the heavy parts
# (Spark tables, matplotlib) are imported only when a comparison runs.

COMMAND = "compare-checkpoints"
DEFAULT_INTERVALS = "none,10000,1000,100"
logger = logging.getLogger("source_framework.compare")


def add_compare_parser(commands: Any) -> argparse.ArgumentParser:
    """Register ``compare-checkpoints`` on the command line's subparsers."""
    compare = commands.add_parser(
        COMMAND,
        help="run the same streams under several checkpoint intervals, with a crash and resume each, and compare",
    )
    compare.add_argument("--config", required=True, help="config JSON file (its destination section is used)")
    compare.add_argument("--catalog", required=True, help="configured catalog JSON file")
    compare.add_argument("--intervals", default=DEFAULT_INTERVALS,
                         help=f"comma-separated state_checkpoint_interval values; none = slice checkpoints only (default {DEFAULT_INTERVALS})")
    compare.add_argument("--crash-at", default="0.5", help="kill each crash run after this fraction of the records was read (default 0.5; also 50%%)")
    compare.add_argument("--no-crash", action="store_true", help="skip the crash-and-resume runs")
    compare.add_argument("--no-cdk", action="store_true", help="skip airbyte-cdk's reference read")
    compare.add_argument("--workdir", default="./compare-checkpoints", help="warehouses, logs and results (default ./compare-checkpoints)")
    compare.add_argument("--markdown", action="store_true", help="print Markdown tables instead of plain text")
    compare.add_argument("--json", help="where to write the results as JSON (default <workdir>/compare.json)")
    compare.add_argument("--plot", help="where to write the PNG chart (default <workdir>/compare.png)")
    compare.add_argument("--spark-master", help="Spark master for the syncs and the table check (default: the config's)")
    return compare


def run_compare(source: Any, parsed: argparse.Namespace) -> int:
    from source_framework.compare.experiment import Experiment, RunFailed
    from source_framework.compare.plot import plot_comparison
    from source_framework.compare.report import Report

    _log_to_stderr()
    try:
        config = load_config(parsed.config)
        catalog = load_catalog(parsed.catalog)
        settings = parse_intervals(parsed.intervals)
        crash_at = None if parsed.no_crash else parse_fraction(parsed.crash_at)
        script = connector_script()
    except (InputError, ValueError) as error:
        sys.stderr.write(f"error: {error}\n")
        return 2

    tables = stream_tables(source, catalog)
    workdir = os.path.abspath(parsed.workdir)
    experiment = Experiment(workdir, script, config, parsed.catalog, tables,
                            spark_master=parsed.spark_master, with_cdk=not parsed.no_cdk)
    try:
        results = [experiment.run_setting(setting, crash_at) for setting in settings]
    except RunFailed as error:
        sys.stderr.write(f"error: {error}\n")
        return 1
    if crash_at is not None:
        logger.info("checking the crash-and-resume tables against the uninterrupted ones with Spark")
        _check_tables(experiment, results, parsed.spark_master or (config.get("destination") or {}).get("spark_master"))

    names = [t.name for t in tables]
    report = Report(results, names, crash_at)
    sys.stdout.write(report.markdown() if parsed.markdown else report.text())
    sys.stdout.flush()
    json_path = parsed.json or os.path.join(workdir, "compare.json")
    with open(json_path, "w", encoding="utf-8") as handle:
        json.dump(report.to_json(), handle, indent=2)
    plot_path = plot_comparison(results, parsed.plot or os.path.join(workdir, "compare.png"), title=", ".join(names))
    sys.stderr.write(f"results: {json_path}\nchart:   {plot_path}\n")
    return 0


def parse_fraction(text: str) -> float:
    """``0.5`` or ``50%`` -> 0.5; strictly between 0 and 1."""
    value = text.strip()
    try:
        fraction = float(value[:-1]) / 100 if value.endswith("%") else float(value)
    except ValueError:
        raise ValueError(f"--crash-at: {text!r} is not a fraction such as 0.5 or 50%") from None
    if not 0 < fraction < 1:
        raise ValueError(f"--crash-at: {text!r} must be between 0 and 1 (exclusive)")
    return fraction


def connector_script() -> str:
    """The connector's entry script (``main.py``): the children run it again with other arguments."""
    script = os.path.abspath(sys.argv[0])
    if not os.path.isfile(script):
        raise ValueError(f"compare-checkpoints must be started from the connector's script (got {sys.argv[0]!r})")
    return script


def stream_tables(source: Any, catalog: Any) -> List[Any]:
    """Each configured stream's table folder (as the Spark destination names it) and key."""
    from source_framework.compare.experiment import StreamTable

    tables = []
    for configured in catalog.streams:
        stream = configured.stream
        namespace = stream.namespace or getattr(source, "name", "") or "default"
        keys = configured.primary_key or stream.source_defined_primary_key or []
        # Nested key paths are stored inside JSON-string columns; then compare whole rows instead.
        key = [path[0] for path in keys] if keys and all(len(path) == 1 for path in keys) else []
        tables.append(StreamTable(stream.name, os.path.join(namespace, stream.name), key))
    return tables


def _check_tables(experiment: Any, results: List[Any], master: Optional[str]) -> None:
    from source_framework.destinations.spark.session import get_spark

    spark = get_spark(master or "local[*]", app_name="compare-checkpoints")
    try:
        experiment.check_tables(results, spark)
    finally:
        spark.stop()


def _log_to_stderr() -> None:
    logging.basicConfig(stream=sys.stderr, level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    for noisy in ("py4j", "urllib3", "pyspark"):
        logging.getLogger(noisy).setLevel(logging.WARNING)
