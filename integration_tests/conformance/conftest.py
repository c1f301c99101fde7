"""Fixtures of the conformance suite: per connector style, a first sync under each entrypoint.

``kill_runner`` (session) runs the processes of ours that the SIGKILL tests kill: ``first_sync``
starts its style's in the background (``harness.KillRunner``) once its own syncs have told how many
requests and STATEs a whole sync makes, so that they run while that style's other in-process tests
go on (the styles may run on different test workers: pytest.ini, conftest.py).

``first_sync`` (module scope, one per style in ``connectors.STYLES``) starts a demo API, builds
the configured catalog from the source's own ``discover`` and reads everything once with
airbyte-cdk's entrypoint and with ours (into Spark once per ``--concurrency`` value of
``harness.CONCURRENCIES``, reading each warehouse's tables back at once, and with
``--destination stdout``); the later tests go on from the ``--concurrency 4`` warehouse.
``resumed`` then changes some records in the API and reads from each entrypoint's final state
with airbyte-cdk.

The Spark session is the integration tests' one (``spark`` in ``integration_tests/conftest.py``),
created before our first in-process read into Spark so that every such read writes through it.
"""

from __future__ import annotations

from collections.abc import Iterator
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Any

import conformance_harness as harness
import pytest
from connectors import STYLES

KILL_TEST = "test_sigkill_mid_sync_then_resume_lands_every_record_once"
#: the --concurrency of the fixture's first sync of ours (the other values sync again, on demand)
FIRST_CONCURRENCY = 4


def pytest_configure(config: pytest.Config) -> None:
    if not any(line.split(":")[0].strip() == "slow" for line in config.getini("markers")):
        config.addinivalue_line("markers", "slow: runs a connector as its own process (a JVM of its own) and kills it")


@dataclass
class FirstSync:
    style: str
    api: Any
    work: Any
    config: dict[str, Any]
    catalog: dict[str, Any]
    warehouse: str
    cdk: harness.Run
    ours: harness.Run
    ours_tables: Any  # {stream: rows} read back right after the sync, or what reading them raised
    ours_stdout: harness.Run
    kills: dict[int, Any]  # per concurrency, Future[KillOutcome] when that SIGKILL test runs
    #: per --concurrency value, our first sync into Spark and its tables read back (or what reading them raised)
    ours_at: dict[int, tuple[harness.Run, Any]] = field(default_factory=dict)

    def ours_config(self, warehouse: str) -> dict[str, Any]:
        return harness.ours_config(self.api, warehouse)


@dataclass
class Resumed:
    """After ``harness.touch``: airbyte-cdk from its own final state and from ours, and from none."""

    problem: str | None = None  # why there is nothing to resume from (the tests fail with it)
    cdk_state: list | None = None
    our_state: list | None = None
    cdk_from_cdk: harness.Run | None = None
    cdk_from_ours: harness.Run | None = None
    #: every record now: what a full refresh holds after a new sync (airbyte-cdk reads nothing of a
    #: resumable full refresh from its own final state, which only an attempt of the same job is given)
    everything: harness.Run | None = None


@pytest.fixture(scope="session")
def kill_runner() -> Iterator[harness.KillRunner]:
    """The SIGKILL tests' processes, run in the background (two at a time)."""
    runner = harness.KillRunner(workers=2)
    try:
        yield runner
    finally:
        runner.close()


def _plan_kills(request: pytest.FixtureRequest, runner: harness.KillRunner, style: str, tmp: pytest.TempPathFactory,
                catalog: dict[str, Any], requests: int, ours_at: dict[int, tuple[harness.Run, Any]]) -> None:
    for concurrency in harness.CONCURRENCIES:
        if _kill_test_selected(request, style, concurrency):
            try:
                runner.plan(style, concurrency, str(tmp.mktemp(f"{style}-{concurrency}-killed")), catalog, requests,
                            states=len(ours_at[concurrency][0].states()))
            except Exception as error:  # noqa: BLE001 - that style's SIGKILL test fails with it
                runner.futures[(style, concurrency)] = _failed(error)


def _failed(error: BaseException) -> Future:
    future: Future = Future()
    future.set_exception(error)
    return future


def _kill_test_selected(request: pytest.FixtureRequest, style: str, concurrency: int) -> bool:
    for item in request.session.items:
        callspec = getattr(item, "callspec", None)
        if getattr(item, "originalname", "") == KILL_TEST and callspec is not None:
            if callspec.params.get("first_sync") == style and callspec.params.get("concurrency") == concurrency:
                return True
    return False


@pytest.fixture(scope="module", params=STYLES)
def first_sync(
    request: pytest.FixtureRequest, kill_runner: harness.KillRunner, spark: Any, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[FirstSync]:
    style = request.param
    api = harness.start_api(style=style)
    try:
        with harness.trusting(api):  # the https API's certificate, for the runs of this style's tests
            work = tmp_path_factory.mktemp(style)
            config = harness.source_config(api)
            catalog = harness.configured_catalog(style, config)
            api.reset_stats()
            cdk = harness.cdk_read(style, config, catalog)
            requests = api.stats()["requests"]  # (what a whole sync asks: the SIGKILL test's API holds the second half)
            assert cdk.ok() and cdk.records(), f"the connector itself fails under airbyte-cdk: {cdk.describe()}"
            warehouse = str(work / "warehouse")
            ours_at = {}
            for concurrency in harness.CONCURRENCIES:  # the other warehouses are only read back
                into = warehouse if concurrency == FIRST_CONCURRENCY else str(work / f"concurrency-{concurrency}")
                run = harness.ours_read(style, harness.ours_config(api, into), catalog, args=["--concurrency", str(concurrency)])
                ours_at[concurrency] = (run, _tables_of(spark, into, style, catalog) if run.ok() else None)
            _plan_kills(request, kill_runner, style, tmp_path_factory, catalog, requests, ours_at)
            ours, tables = ours_at[FIRST_CONCURRENCY]
            kills = {c: kill_runner.futures[(style, c)] for c in harness.CONCURRENCIES if (style, c) in kill_runner.futures}
            ours_stdout = harness.ours_read(style, harness.ours_config(api, str(work / "unused")), catalog,
                                            args=["--destination", "stdout"])
            yield FirstSync(style, api, work, config, catalog, warehouse, cdk, ours, tables, ours_stdout, kills, ours_at)
    finally:
        api.stop()


def _tables_of(spark: Any, warehouse: str, style: str, catalog: dict[str, Any]) -> Any:
    """Our tables read back, or what reading them raised (the record tests fail with it)."""
    try:
        return harness.read_tables(spark, warehouse, style, catalog)
    except Exception as error:  # noqa: BLE001
        return error


@pytest.fixture(scope="module")
def resumed(first_sync: FirstSync) -> Resumed:
    sync = first_sync
    if not sync.ours.ok():
        return Resumed(problem=f"our first sync failed: {sync.ours.describe()}")
    cdk_state, our_state = sync.cdk.final_state_list(), sync.ours.final_state_list()
    if not our_state:
        return Resumed(problem=f"our first sync printed no STATE: {sync.ours.describe()}")
    harness.touch(sync.api)
    cdk_from_cdk = harness.cdk_read(sync.style, sync.config, sync.catalog, cdk_state)
    assert cdk_from_cdk.ok(), f"the connector fails under airbyte-cdk from its own state: {cdk_from_cdk.describe()}"
    cdk_from_ours = harness.cdk_read(sync.style, sync.config, sync.catalog, our_state)
    everything = harness.cdk_read(sync.style, sync.config, sync.catalog)
    assert everything.ok(), everything.describe()
    return Resumed(None, cdk_state, our_state, cdk_from_cdk, cdk_from_ours, everything)
