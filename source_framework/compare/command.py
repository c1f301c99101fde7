"""``python -m source_framework.compare``: intervals side by side; exits 0 done, 1 a sync failed, 2 bad input, 130 interrupted."""

from __future__ import annotations

import argparse
import json
import logging
import os
import signal
import sys
import threading
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any

from source_framework.compare.settings import Setting, parse_intervals, with_concurrency, with_read_ahead
from source_framework.runtime.command_errors import SourceFailed, source_call
from source_framework.runtime.entrypoint import build_parser as build_read_parser
from source_framework.runtime.entrypoint import run_script
from source_framework.runtime.inputs import InputError, check_config, load_catalog, load_config
from source_framework.runtime.process import EXIT_BAD_INPUT, EXIT_FAILED, EXIT_OK, log_to_stderr
from source_framework.runtime.read_command import prepare_streams
from source_framework.runtime.secrets import SecretFilter, find_secrets

DEFAULT_INTERVALS = "none,10000,1000,100"
EXIT_INTERRUPTED = 130  # as a shell reports a command ended by Ctrl-C
logger = logging.getLogger("source_framework.compare")


def build_parser() -> argparse.ArgumentParser:
    compare = argparse.ArgumentParser(
        prog="python -m source_framework.compare",
        description="run the same streams under several checkpoint intervals, with a crash and resume each, and compare",
    )
    compare.add_argument("--connector", default="main.py", help="the connector's entry script (default: main.py)")
    compare.add_argument("--config", required=True, help="config JSON file (its destination section is used)")
    compare.add_argument("--catalog", required=True, help="configured catalog JSON file")
    compare.add_argument("--intervals", default=DEFAULT_INTERVALS,
                         help="comma-separated state_checkpoint_interval values; none = slice checkpoints only "
                         f"(default {DEFAULT_INTERVALS})")
    compare.add_argument("--concurrency",
                         help="comma-separated concurrency levels (slices read at once); each interval runs at each "
                         "(default: the config's concurrency_level, one run per interval)")
    compare.add_argument("--max-checkpoints-ahead",
                         help="comma-separated bounds on how many checkpoints reading may run ahead of its last STATE "
                         "(read's --max-checkpoints-ahead); each setting runs at each: speed against records read "
                         "again after a crash (default: the config's max_checkpoints_ahead, one run per setting)")
    compare.add_argument("--crash-at", default="0.5",
                         help="kill each crash run after this fraction of the records was read (default 0.5; also 50%%)")
    compare.add_argument("--no-crash", action="store_true", help="skip the crash-and-resume runs")
    compare.add_argument("--no-cdk", action="store_true", help="skip airbyte-cdk's reference read")
    compare.add_argument("--workdir", default="./compare-checkpoints", help="warehouses, logs and results (default ./compare-checkpoints)")
    compare.add_argument("--markdown", action="store_true", help="print Markdown tables instead of plain text")
    compare.add_argument("--json", help="where to write the results as JSON (default <workdir>/compare.json)")
    compare.add_argument("--plot", help="where to write the PNG chart (default <workdir>/compare.png)")
    compare.add_argument("--spark-master", help="Spark master for the syncs and the table check (default: the config's)")
    return compare


def main(argv: list[str] | None = None) -> int:
    parsed = build_parser().parse_args(argv)
    log_to_stderr()
    try:
        import matplotlib  # noqa: F401  (the chart; checked before any sync runs)
    except ImportError:
        sys.stderr.write("error: the compare tool needs matplotlib: pip install 'source_framework[compare]'\n")
        return EXIT_BAD_INPUT
    from source_framework.compare.experiment import Experiment, RunFailed
    from source_framework.compare.plot import plot_comparison
    from source_framework.compare.report import Report

    try:
        config = load_config(parsed.config)
        catalog = load_catalog(parsed.catalog)
        settings = with_read_ahead(with_concurrency(parse_intervals(parsed.intervals), parsed.concurrency),
                                   parsed.max_checkpoints_ahead)
        crash_at = None if parsed.no_crash else parse_fraction(parsed.crash_at)
        script = connector_script(parsed.connector)
        source = connector_source(script)
        tables = checked_tables(source, config, catalog, settings, parsed)
        workdir = writable_folder(parsed.workdir, "--workdir")
        json_path = writable_file(parsed.json or os.path.join(workdir, "compare.json"), "--json")
        plot_path = writable_file(parsed.plot or os.path.join(workdir, "compare.png"), "--plot")
    except (InputError, ValueError) as error:
        sys.stderr.write(f"error: {error}\n")
        return EXIT_BAD_INPUT

    experiment = Experiment(workdir, script, source, config, parsed.catalog, tables,
                            spark_master=parsed.spark_master, with_cdk=not parsed.no_cdk)
    try:
        with _sigterm_as_interrupt():
            results = [experiment.run_setting(setting, crash_at) for setting in settings]
    except RunFailed as error:
        sys.stderr.write(f"error: {error}\n")
        return EXIT_FAILED
    except KeyboardInterrupt:
        sys.stderr.write("interrupted: the comparison stopped; its results are incomplete and were not written\n")
        return EXIT_INTERRUPTED
    if crash_at is not None:
        logger.info("checking the crash-and-resume tables against the uninterrupted ones with Spark")
        _check_tables(experiment, results, parsed.spark_master or (config.get("destination") or {}).get("spark_master"))

    names = [t.name for t in tables]
    report = Report(results, names, crash_at)
    for warning in report.warnings():
        sys.stderr.write(f"warning: {warning}\n")
    sys.stdout.write(report.markdown() if parsed.markdown else report.text())
    sys.stdout.flush()
    with open(json_path, "w", encoding="utf-8") as handle:
        json.dump(report.to_json(), handle, indent=2)
    plot_path = plot_comparison(results, plot_path, title=", ".join(names))
    sys.stderr.write(f"results: {json_path}\nchart:   {plot_path}\n")
    return EXIT_OK


@contextmanager
def _sigterm_as_interrupt() -> Iterator[None]:
    """SIGTERM ends the comparison as Ctrl-C does, so the child sync stops and the secret config copy is removed."""
    def interrupt(signum: int, frame: Any) -> None:
        raise KeyboardInterrupt

    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.signal(signal.SIGTERM, interrupt)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def parse_fraction(text: str) -> float:
    value = text.strip()
    try:
        fraction = float(value[:-1]) / 100 if value.endswith("%") else float(value)
    except ValueError:
        raise ValueError(f"--crash-at: {text!r} is not a fraction such as 0.5 or 50%") from None
    if not 0 < fraction < 1:
        raise ValueError(f"--crash-at: {text!r} must be between 0 and 1 (exclusive)")
    return fraction


def connector_script(path: str) -> str:
    script = os.path.abspath(path)
    if not os.path.isfile(script):
        raise ValueError(f"--connector: no connector script at {script}")
    return script


def connector_source(script: str) -> Any:
    captured: list[Any] = []
    run_script(script, [], lambda source, args: captured.append(source))
    if not captured:
        raise ValueError(f"--connector: {script} did not call source_framework.launch(source, argv) when run as __main__")
    return captured[0]


def checked_tables(source: Any, config: Mapping[str, Any], catalog: Any, settings: Sequence[Setting],
                   parsed: argparse.Namespace) -> list[Any]:
    """The streams' tables as ``read``'s own adapters place them, so the check looks where syncs write (an empty place would pass)."""
    from source_framework.compare.experiment import StreamTable

    read_args = build_read_parser().parse_args(["read", "--config", parsed.config, "--catalog", parsed.catalog])
    secrets = SecretFilter(find_secrets(config, {}))  # until the spec says which fields are secret
    intervals: dict[str, dict[str, int | None]] = {}
    try:
        with source_call("spec()"):
            spec = source.spec(logger)
        secrets = SecretFilter(find_secrets(config, spec.connectionSpecification))
        for setting in settings:
            applied = setting.apply(config)
            check_config(source, applied, spec, parsed.config)
            kind = (applied.get("destination") or {}).get("type", "spark")
            if kind != "spark":
                raise InputError(f"config file '{parsed.config}': destination.type is {kind!r}; the comparison "
                                 "checks the tables the syncs write, so it needs the Spark destination")
            adapters = prepare_streams(source, applied, catalog, {}, read_args, set())
            for name, adapter in adapters.items():
                if hasattr(adapter, "checkpoint_interval"):
                    intervals.setdefault(name, {})[setting.label] = adapter.checkpoint_interval
    except SourceFailed as failure:
        raise InputError(secrets.mask(" ".join(str(failure).split()))) from None
    except InputError as error:
        raise InputError(secrets.mask(str(error))) from None
    tables = []
    for adapter in adapters.values():
        keys = adapter.primary_key
        # Nested key paths are stored inside JSON-string columns; then compare whole rows instead.
        key = [path[0] for path in keys] if keys and all(len(path) == 1 for path in keys) else []
        tables.append(StreamTable(adapter.name, adapter.namespace, key, intervals.get(adapter.name, {})))
    return tables


def writable_folder(path: str, flag: str) -> str:
    folder = os.path.abspath(path)
    try:
        os.makedirs(folder, exist_ok=True)
    except OSError as error:
        raise ValueError(f"{flag}: cannot use {folder} as a folder ({error.strerror or error})") from None
    return folder


def writable_file(path: str, flag: str) -> str:
    """``path``, once its folder exists and is writable (checked before the syncs, not after them)."""
    target = os.path.abspath(path)
    folder = os.path.dirname(target)
    if os.path.isdir(target):
        raise ValueError(f"{flag}: {target} is a folder, not a file")
    if not os.path.isdir(folder):
        raise ValueError(f"{flag}: the folder {folder} does not exist")
    if not os.access(folder, os.W_OK) or (os.path.exists(target) and not os.access(target, os.W_OK)):
        raise ValueError(f"{flag}: cannot write {target}")
    return target


def _check_tables(experiment: Any, results: list[Any], master: str | None) -> None:
    from source_framework.destinations.spark.session import get_spark

    spark = get_spark(master or "local[*]", app_name="compare-checkpoints")
    try:
        experiment.check_tables(results, spark)
    finally:
        spark.stop()
