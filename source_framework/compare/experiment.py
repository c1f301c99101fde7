"""Per setting: a clean sync, a crash and resume, and airbyte-cdk's read; Spark checks wait so no JVM competes with runs."""

from __future__ import annotations

import json
import logging
import os
import shutil
from collections.abc import Mapping, Sequence
from contextlib import closing
from dataclasses import dataclass, field
from typing import Any

from source_framework.compare.commits import CommitStats, commit_stats
from source_framework.compare.runner import RunResult, SyncRunner
from source_framework.compare.settings import Setting
from source_framework.compare.table_diff import Diff, diff_tables
from source_framework.runtime.destination_setup import spark_destination
from source_framework.runtime.entrypoint import build_parser
from source_framework.runtime.process import EXIT_OK

logger = logging.getLogger("source_framework.compare")


class RunFailed(RuntimeError):
    """A child that should have completed exited non-zero."""


@dataclass
class CrashResult:
    kill_after: int
    crashed: RunResult
    resumed: RunResult
    read_again: int
    diff: Diff | None = None


@dataclass
class SettingResult:
    setting: Setting
    clean: RunResult
    commits: CommitStats
    cdk: RunResult | None = None
    crash: CrashResult | None = None
    folder: str = ""
    per_stream_diff: dict[str, Diff] = field(default_factory=dict)
    stream_intervals: dict[str, int | None] = field(default_factory=dict)


@dataclass
class StreamTable:
    """One configured stream as the destination knows it, and its key for the row check."""

    name: str
    namespace: str | None  # the catalog's; None: the destination's default (the source's name)
    key: list[str]
    intervals: dict[str, int | None] = field(default_factory=dict, compare=False)


class Experiment:
    def __init__(
        self,
        workdir: str,
        script: str,
        source: Any,
        config: Mapping[str, Any],
        catalog_path: str,
        tables: Sequence[StreamTable],
        spark_master: str | None = None,
        with_cdk: bool = True,
    ) -> None:
        self.workdir = os.path.abspath(workdir)
        self.script = script
        self.source = source
        self.config = dict(config)
        if spark_master:
            # In the owner-only config copy, not on command lines, where anyone sees a Spark Connect URL's token.
            self.config["destination"] = {**(self.config.get("destination") or {}), "spark_master": spark_master}
        self.catalog_path = os.path.abspath(catalog_path)
        self.tables = list(tables)
        self.with_cdk = with_cdk

    def run_setting(self, setting: Setting, crash_at: float | None) -> SettingResult:
        folder = os.path.join(self.workdir, setting.slug)
        for stale in ("clean", "crash"):
            shutil.rmtree(os.path.join(folder, stale), ignore_errors=True)
        runner = SyncRunner(folder, self.script, [t.name for t in self.tables])
        config_path = self._write_config(folder, setting)
        try:
            logger.info("setting %s: uninterrupted sync", setting.label)
            clean = _completed(runner.run_ours("clean", self._read_args(config_path, folder, "clean")))
            commits = self._committed(setting, folder, clean)
            result = SettingResult(setting, clean, commits, folder=folder, stream_intervals={
                t.name: t.intervals[setting.label] for t in self.tables if setting.label in t.intervals})
            if crash_at is not None and clean.records > 0:
                result.crash = self._crash_and_resume(runner, config_path, folder, clean, crash_at)
            if self.with_cdk:
                logger.info("setting %s: airbyte-cdk's own read", setting.label)
                result.cdk = _completed(runner.run_cdk("cdk", ["read", "--config", config_path, "--catalog", self.catalog_path]))
        finally:
            os.remove(config_path)  # it holds the user's secrets; the results do not
        return result

    def _committed(self, setting: Setting, folder: str, clean: RunResult) -> CommitStats:
        """What the clean run committed; a read stream with no commit is an error, else every later check compares nothing."""
        total = CommitStats()
        with closing(self.read_destination(setting, folder, "clean")) as destination:
            for table in self.tables:
                committed = destination.committed_table(table.namespace, table.name)
                stats = commit_stats(committed)
                if stats.commits == 0 and clean.reads.get(table.name, 0) > 0:
                    raise RunFailed(
                        f"the 'clean' run read {clean.reads[table.name]:,} records of '{table.name}', but no commit "
                        f"is in its table at {committed.path}: the comparison would check an empty table"
                    )
                total += stats
        return total

    def _crash_and_resume(
        self, runner: SyncRunner, config_path: str, folder: str, clean: RunResult, crash_at: float
    ) -> CrashResult:
        kill_after = min(clean.records, max(1, int(clean.records * crash_at)))
        logger.info("setting %s: sync killed after %d records read", os.path.basename(folder), kill_after)
        crashed = runner.run_ours("crash", self._read_args(config_path, folder, "crash"), kill_after=kill_after)
        if not crashed.killed:
            _completed(crashed)  # it finished before the kill point (fewer records this time)
        state_path = runner.write_states("crash", crashed)
        resume_args = self._read_args(config_path, folder, "crash") + (["--state", state_path] if state_path else [])
        logger.info("setting %s: resume from the crashed run's last STATEs", os.path.basename(folder))
        resumed = _completed(runner.run_ours("resume", resume_args))
        read_again = max(0, crashed.records + resumed.records - clean.records)
        return CrashResult(kill_after, crashed, resumed, read_again)

    def check_tables(self, results: Sequence[SettingResult], spark: Any) -> None:
        for result in results:
            if result.crash is None:
                continue
            with closing(self.read_destination(result.setting, result.folder, "clean")) as clean, \
                    closing(self.read_destination(result.setting, result.folder, "crash")) as crash:
                for table in self.tables:
                    result.per_stream_diff[table.name] = diff_tables(
                        clean.committed_table(table.namespace, table.name, spark),
                        crash.committed_table(table.namespace, table.name, spark),
                        table.key,
                    )
            result.crash.diff = sum(result.per_stream_diff.values(), Diff(0, 0, 0, 0))

    def _write_config(self, folder: str, setting: Setting) -> str:
        os.makedirs(folder, exist_ok=True)
        path = _config_path(folder)
        descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)  # secrets: owner only
        with os.fdopen(descriptor, "w", encoding="utf-8") as handle:
            json.dump(setting.apply(self.config), handle)
        return path

    def _read_args(self, config_path: str, folder: str, warehouse: str) -> list[str]:
        return ["read", "--config", config_path, "--catalog", self.catalog_path,
                "--warehouse", os.path.join(folder, warehouse), "--quiet"]

    def read_destination(self, setting: Setting, folder: str, warehouse: str) -> Any:
        """The Spark destination the children's ``read`` wrote to, built the same way so it finds the tables."""
        parsed = build_parser().parse_args(self._read_args(_config_path(folder), folder, warehouse))
        return spark_destination(self.source, setting.apply(self.config), parsed)


def _config_path(folder: str) -> str:
    return os.path.join(folder, "config.json")


def _completed(run: RunResult) -> RunResult:
    if run.returncode != EXIT_OK and not run.killed:
        reported = "".join(f"\n  {message}" for message in run.errors[-3:])
        raise RunFailed(
            f"the '{run.name}' run exited with code {run.returncode}"
            + (f"; it reported:{reported}" if reported else "")
            + f"\nthe end of its stderr ({run.stderr_path}):\n{run.stderr_tail()}"
        )
    return run
