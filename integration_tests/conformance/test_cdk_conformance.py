"""Differential conformance: each connector style of ``connectors/`` under airbyte-cdk's own
entrypoint and under ours, against the demo API on 127.0.0.1.

For every style (see ``connectors/__init__.py``):

1. the same records: our Spark tables, read back with a plain ``spark.read``, hold exactly the
   records airbyte-cdk's ``read`` printed (none missing, none extra); ours with
   ``--destination stdout`` prints them too, and TRACE estimates are passed on;
2. final states move both ways, after some records changed in the API:
   - airbyte-cdk accepts our final state, and for the incremental streams reads from it exactly
     what it reads from its own;
   - ours, from the CDK's final state, lands exactly what the CDK reads from it (new warehouse;
     a full-refresh stream lands every record: it replaces its table whatever state it is given);
   - ours, from its own final state, completes its first tables with what the CDK reads from
     that state (append: every record exactly once; overwrite: replaced);
3. a sync started under airbyte-cdk and stopped half-way goes on under ours from the STATEs
   the CDK printed until then: ours lands exactly what the CDK reads from them;
4. (slow) a process of ours killed with SIGKILL in the middle of the sync and resumed from the
   last STATEs it printed ends with every record of the CDK's sync in the tables exactly once,
   and airbyte-cdk accepts those STATEs too.
"""

from __future__ import annotations

import json

import conformance_harness as harness
import pytest


def _tables(spark, warehouse, catalog):
    return harness.read_tables(spark, warehouse, harness.infos(catalog))


def test_same_records_as_airbyte_cdk(first_sync):
    sync = first_sync
    assert sync.ours.ok(), sync.ours.describe()
    assert not isinstance(sync.ours_tables, Exception), f"reading our tables back failed: {sync.ours_tables!r}"
    harness.check_tables_equal_records(sync.ours_tables, sync.cdk, harness.infos(sync.catalog))

    assert sync.ours_stdout.ok(), sync.ours_stdout.describe()
    problems = harness.multiset_diff(
        harness.record_multisets(sync.cdk, sync.catalog), harness.record_multisets(sync.ours_stdout, sync.catalog)
    )
    assert not problems, "RECORD messages of ours (--destination stdout) vs airbyte-cdk's:\n" + "\n".join(problems)

    expected_estimates = sync.cdk.estimates()
    for run in (sync.ours, sync.ours_stdout):
        assert run.estimates() == expected_estimates, (
            f"{run.label}: TRACE estimates {dict(run.estimates())}, airbyte-cdk printed {dict(expected_estimates)}"
        )


def test_airbyte_cdk_resumes_from_our_final_state_as_from_its_own(first_sync, resumed):
    sync = first_sync
    assert resumed.problem is None, resumed.problem
    assert resumed.cdk_from_ours.ok(), (
        f"airbyte-cdk does not accept our final state {json.dumps(resumed.our_state)}:\n{resumed.cdk_from_ours.describe()}"
    )
    incremental = harness.incremental_streams(sync.catalog)
    problems = harness.multiset_diff(
        harness.record_multisets(resumed.cdk_from_cdk, sync.catalog, incremental),
        harness.record_multisets(resumed.cdk_from_ours, sync.catalog, incremental),
    )
    assert not problems, (
        f"airbyte-cdk reads other records from our final state than from its own.\n"
        f"ours: {json.dumps(resumed.our_state)}\nairbyte-cdk's: {json.dumps(resumed.cdk_state)}\n" + "\n".join(problems)
    )


def test_ours_from_the_final_state_of_airbyte_cdk_lands_what_it_reads(first_sync, resumed, spark):
    sync = first_sync
    assert resumed.problem is None, resumed.problem
    warehouse = str(sync.work / "from-cdk-state")
    ours = harness.ours_read(sync.style, sync.ours_config(warehouse), sync.catalog, resumed.cdk_state)
    assert ours.ok(), f"ours from airbyte-cdk's final state {json.dumps(resumed.cdk_state)}:\n{ours.describe()}"
    # resumed.cdk_from_ours read every full-refresh stream in full (our final state for them is "no state")
    expected = harness.from_state(resumed.cdk_from_cdk, resumed.cdk_from_ours, sync.catalog)
    harness.check_tables_equal_records(_tables(spark, warehouse, sync.catalog), expected, harness.infos(sync.catalog))


def test_ours_from_its_own_final_state_completes_its_tables(first_sync, resumed, spark):
    sync = first_sync
    assert resumed.problem is None, resumed.problem
    assert resumed.cdk_from_ours.ok(), resumed.cdk_from_ours.describe()
    ours = harness.ours_read(sync.style, sync.ours_config(sync.warehouse), sync.catalog, resumed.our_state)
    assert ours.ok(), f"ours from its own final state {json.dumps(resumed.our_state)}:\n{ours.describe()}"
    harness.check_tables_equal_records(
        _tables(spark, sync.warehouse, sync.catalog),
        harness.after_resume(sync.cdk, resumed.cdk_from_ours, sync.catalog),
        harness.infos(sync.catalog),
    )


def test_mid_sync_state_of_airbyte_cdk_resumes_ours_to_the_same_records(first_sync, spark):
    """A sync that airbyte-cdk's entrypoint started and that stopped after half of its STATEs
    goes on under ours: ours lands exactly what the CDK reads from those STATEs."""
    sync = first_sync
    cdk_states = sync.cdk.states()
    assert cdk_states, f"airbyte-cdk printed no STATE: {sync.cdk.describe()}"
    middle = sync.cdk.states_at(max(1, len(cdk_states) // 2))

    cdk_from_middle = harness.cdk_read(sync.style, sync.config, sync.catalog, middle)
    assert cdk_from_middle.ok(), cdk_from_middle.describe()
    warehouse = str(sync.work / "from-cdk-mid-state")
    ours = harness.ours_read(sync.style, sync.ours_config(warehouse), sync.catalog, middle)
    assert ours.ok(), f"ours from airbyte-cdk's STATEs {json.dumps(middle)}:\n{ours.describe()}"
    everything = harness.cdk_read(sync.style, sync.config, sync.catalog)  # the API now (other tests touch it)
    expected = harness.from_state(cdk_from_middle, everything, sync.catalog)  # full refresh: every record
    harness.check_tables_equal_records(_tables(spark, warehouse, sync.catalog), expected, harness.infos(sync.catalog))


@pytest.mark.slow
def test_sigkill_mid_sync_then_resume_lands_every_record_once(first_sync, spark):
    sync = first_sync
    outcome = sync.kill.result(timeout=600)  # started in the background by the first_sync fixture
    killed = outcome.killed
    try:
        assert killed.killed, f"the sync was not killed in its middle: {killed.describe()}"

        cdk_from_killed = harness.cdk_read(sync.style, harness.source_config(outcome.api), sync.catalog, killed.state_list())
        assert cdk_from_killed.ok(), f"airbyte-cdk refuses the STATEs ours printed: {cdk_from_killed.describe()}"

        resumed = harness.ours_read(sync.style, outcome.config, sync.catalog, killed.state_list() or None)
        assert resumed.ok(), f"resume from {json.dumps(killed.state_list())}:\n{resumed.describe()}\n{killed.describe()}"
    finally:
        outcome.api.stop()
    warehouse = outcome.config["destination"]["warehouse"]
    print(f"{killed.describe().split(chr(10) + 'stderr')[0]}\nresumed: {resumed.describe()}")
    try:
        harness.check_tables_equal_records(_tables(spark, warehouse, sync.catalog), sync.cdk, harness.infos(sync.catalog))
    except AssertionError as error:
        raise AssertionError(f"{error}\n{killed.describe()}\nresumed: {resumed.describe()}") from None
