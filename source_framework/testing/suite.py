"""``AcceptanceSuite``: the source_framework acceptance runner as a pytest base class."""

from __future__ import annotations

import inspect
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any, ClassVar

import pytest

from source_framework.testing.acceptance_config import (
    AcceptanceConfig,
    Entry,
    IncrementalEntry,
    ReadEntry,
)
from source_framework.testing.acceptance_reads import AcceptanceReads
from source_framework.testing.catalogs import load_json, stream_infos, stream_names
from source_framework.testing.connector_reference import ConnectorReference
from source_framework.testing.connector_runs import ConnectorRunner
from source_framework.testing.incremental_checks import (
    check_future_state_covers_streams,
    check_future_state_read,
    check_read_from_checkpoint,
    check_two_sequential_reads,
    per_stream_states,
    pick_checkpoints,
)
from source_framework.testing.record_checks import (
    check_expected_records,
    check_identical_reads,
    check_no_extra_columns,
    load_expected_records,
)
from source_framework.testing.table_checks import (
    check_rerun_adds_no_rows,
    check_tables_equal_records,
    read_tables,
)

ACCEPTANCE_TEST_CONFIG = "acceptance-test-config.yml"
_configs: dict[type, AcceptanceConfig] = {}


def for_section(section: str, **extra: Any) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Mark a test as run once per entry of ``section`` (and per value of ``extra``'s params)."""

    def mark(function: Callable[..., Any]) -> Callable[..., Any]:
        function.acceptance_section = section  # type: ignore[attr-defined]
        function.acceptance_extra = extra  # type: ignore[attr-defined]
        return function

    return mark


class AcceptanceSuite:
    """Airbyte's read, full-refresh and incremental acceptance checks, plus the Spark tables.

    Subclass it and set ``connector`` (default ``main.py`` beside the YAML) and optionally ``acceptance_test_config_path``,
    ``intermediate_states``, ``check_spark_tables``, ``spark_master``.
    """

    connector: ClassVar[str | None] = None
    acceptance_test_config_path: ClassVar[str | None] = None
    intermediate_states: ClassVar[int] = 3
    check_spark_tables: ClassVar[bool] = True
    spark_master: ClassVar[str | None] = None

    @classmethod
    def acceptance_config_file(cls) -> Path:
        test_dir = Path(inspect.getfile(sys.modules[cls.__module__])).resolve().parent
        if cls.acceptance_test_config_path:  # an absolute path replaces test_dir
            return (test_dir / cls.acceptance_test_config_path).resolve()
        from airbyte_cdk.utils.connector_paths import find_connector_root

        return find_connector_root([test_dir, Path.cwd()]) / ACCEPTANCE_TEST_CONFIG

    @classmethod
    def acceptance_config(cls) -> AcceptanceConfig:
        if cls not in _configs:
            _configs[cls] = AcceptanceConfig.load(str(cls.acceptance_config_file()))
        return _configs[cls]

    @classmethod
    def connector_reference(cls) -> ConnectorReference:
        return ConnectorReference.parse(cls.connector or "main.py", base_dir=cls.acceptance_config().root)

    def pytest_generate_tests(self, metafunc: pytest.Metafunc) -> None:
        section = getattr(metafunc.function, "acceptance_section", None)
        if section is None or "entry" not in metafunc.fixturenames:
            return
        metafunc.parametrize("entry", _entry_params(type(self).acceptance_config(), section))
        for name, values in getattr(metafunc.function, "acceptance_extra", {}).items():
            values = values(type(self)) if callable(values) else values
            metafunc.parametrize(name, values, ids=[f"{name}{value}" for value in values])

    # Class methods: a class-scoped fixture runs once for all the class's test instances.
    @pytest.fixture(scope="class")
    @classmethod
    def acceptance_reads(cls, tmp_path_factory: pytest.TempPathFactory) -> AcceptanceReads:
        workdir = tmp_path_factory.mktemp(f"acceptance-{cls.__name__}")
        config = cls.acceptance_config()
        runner = ConnectorRunner(cls.connector_reference(), workdir=str(workdir), env=config.environment)
        return AcceptanceReads(runner, config, spark_master=cls.spark_master)

    @pytest.fixture(scope="class")
    @classmethod
    def acceptance_spark(cls, request: pytest.FixtureRequest) -> Any:
        """The project's ``spark`` fixture if it has one, else a local session for this class."""
        try:
            yield request.getfixturevalue("spark")
            return
        except pytest.FixtureLookupError:
            pass
        from source_framework.destinations.spark.session import get_spark

        session = get_spark("local[1]", app_name="source-framework-acceptance")
        yield session
        session.stop()

    @for_section("basic_read")
    def test_expected_records(self, entry: ReadEntry, acceptance_reads: AcceptanceReads) -> None:
        expect = entry.expect_records
        if expect is None:
            pytest.skip(f"{entry.id} has no expect_records")
        if expect.bypass_reason or expect.path is None:
            pytest.skip(f"{entry.id}: expect_records is bypassed: {expect.bypass_reason}")
        catalog = acceptance_reads.full_refresh_catalog(entry)
        check_expected_records(
            acceptance_reads.basic_read(entry),
            load_expected_records(expect.path),
            expect,
            streams=stream_names(catalog),
            ignored_fields=entry.ignored_fields,
            empty_streams=entry.empty_streams,
            require_every_stream=acceptance_reads.config.high_strictness,
        )

    @for_section("basic_read")
    def test_no_undeclared_fields(self, entry: ReadEntry, acceptance_reads: AcceptanceReads) -> None:
        """``fail_on_extra_columns``: no record has a field its stream's schema does not declare."""
        if not entry.fail_on_extra_columns:
            pytest.skip(f"{entry.id} sets fail_on_extra_columns: false")
        streams = stream_infos(acceptance_reads.full_refresh_catalog(entry))
        check_no_extra_columns(acceptance_reads.basic_read(entry), streams)

    @for_section("full_refresh")
    def test_two_reads_are_identical(self, entry: ReadEntry, acceptance_reads: AcceptanceReads) -> None:
        catalog = acceptance_reads.full_refresh_catalog(entry)
        first = acceptance_reads.basic_read(entry)
        assert first.records(), f"{first.describe()} returned no records"
        check_identical_reads(first, acceptance_reads.second_full_refresh_read(entry), stream_names(catalog), entry.ignored_fields)

    @for_section("incremental")
    def test_two_sequential_reads(self, entry: IncrementalEntry, acceptance_reads: AcceptanceReads) -> None:
        """The read from the first read's final STATEs returns nothing older than them."""
        streams = self._incremental_streams(entry, acceptance_reads)
        check_two_sequential_reads(
            acceptance_reads.incremental_first(entry), acceptance_reads.incremental_second(entry), streams,
            threshold_days=entry.threshold_days, cursor_paths=entry.cursor_paths,
        )

    @for_section("incremental", checkpoint=lambda cls: list(range(cls.intermediate_states)))
    def test_read_from_intermediate_state(
        self, entry: IncrementalEntry, checkpoint: int, acceptance_reads: AcceptanceReads
    ) -> None:
        """From a mid-read STATE: every record the first read had after it, none before its cursor."""
        if entry.skip_comprehensive_incremental_tests:
            pytest.skip(f"{entry.id} sets skip_comprehensive_incremental_tests")
        streams = self._incremental_streams(entry, acceptance_reads)
        first = acceptance_reads.incremental_first(entry)
        picked = pick_checkpoints(first, streams, type(self).intermediate_states)
        if checkpoint >= len(picked):
            pytest.skip(f"the first read has only {len(picked)} intermediate STATE(s) to read from")
        chosen = picked[checkpoint]
        check_read_from_checkpoint(
            chosen, acceptance_reads.from_state(entry, chosen.state), streams,
            threshold_days=entry.threshold_days, cursor_paths=entry.cursor_paths,
        )

    @for_section("incremental")
    def test_future_state(self, entry: IncrementalEntry, acceptance_reads: AcceptanceReads) -> None:
        if entry.future_state_bypass_reason:
            pytest.skip(f"{entry.id}: future_state is bypassed: {entry.future_state_bypass_reason}")
        if entry.future_state_path is None:
            pytest.skip(f"{entry.id} has no future_state")
        streams = self._incremental_streams(entry, acceptance_reads)
        future = per_stream_states(load_json(entry.future_state_path, "future_state_path"))
        check_future_state_covers_streams(
            future, streams, entry.missing_streams, high_strictness=acceptance_reads.config.high_strictness
        )
        check_future_state_read(acceptance_reads.future_state(entry, future), future, streams)

    @for_section("incremental")
    def test_spark_tables_equal_records(
        self, entry: IncrementalEntry, acceptance_reads: AcceptanceReads, acceptance_spark: Any
    ) -> None:
        streams, snapshot = self._spark_tables(entry, acceptance_reads, acceptance_spark)
        _, tables = acceptance_reads.spark_first(entry, snapshot)
        check_tables_equal_records(tables, acceptance_reads.reference_read(entry), streams)

    @for_section("incremental")
    def test_spark_rerun_adds_no_rows(
        self, entry: IncrementalEntry, acceptance_reads: AcceptanceReads, acceptance_spark: Any
    ) -> None:
        _, snapshot = self._spark_tables(entry, acceptance_reads, acceptance_spark)
        _, before = acceptance_reads.spark_first(entry, snapshot)
        _, after = acceptance_reads.spark_rerun(entry, snapshot)
        check_rerun_adds_no_rows(before, after)

    def _incremental_streams(self, entry: IncrementalEntry, reads: AcceptanceReads) -> dict[str, Any]:
        streams = reads.incremental_streams(entry)
        if not streams:
            pytest.skip(f"the catalog of {entry.id} reads no stream incrementally")
        return streams

    def _spark_tables(self, entry: IncrementalEntry, reads: AcceptanceReads, spark: Any) -> tuple[dict[str, Any], Callable[[Any], Any]]:
        """The entry's streams, and how to read their tables from a destination; skipped without ``check_spark_tables``."""
        if not type(self).check_spark_tables:
            pytest.skip(f"{type(self).__name__}.check_spark_tables is False")
        streams = stream_infos(reads.catalog(entry))
        return streams, lambda destination: read_tables(spark, destination, streams)


def _entry_params(config: AcceptanceConfig, section: str) -> list[Any]:
    """One param per entry of ``section``; what runs nothing is a skipped param that says why, rather than vanishing."""
    entries = config.entries(section)
    if not entries:
        reason = config.why_no_tests(section) or f"'{section}' has no tests"
        return [pytest.param(None, id=f"{section}:none", marks=pytest.mark.skip(reason=reason))]
    return [_entry_param(entry) for entry in entries]


def _entry_param(entry: Entry) -> Any:
    if entry.skip_reason is None:
        return pytest.param(entry, id=entry.id)
    return pytest.param(entry, id=entry.id, marks=pytest.mark.skip(reason=f"{entry.id}: {entry.skip_reason}"))
