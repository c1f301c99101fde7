"""Differential conformance: each connector style of ``connectors/`` under airbyte-cdk's own
entrypoint and under ours, against the demo API on 127.0.0.1.

For every style (see ``connectors/__init__.py``):

1. the same records: our Spark tables, read back with the test session's Spark, hold exactly the
   records airbyte-cdk's ``read`` printed (none missing, none extra), with ``--concurrency 1`` and
   ``--concurrency 4`` alike; ours with ``--destination stdout`` prints them too; the TRACE
   estimates and LOG messages the connector emits are passed on;
2. final states move both ways, after some records changed in the API:
   - airbyte-cdk accepts our final state, and for the incremental streams reads from it exactly
     what it reads from its own;
   - ours, from the CDK's final state, lands exactly what the CDK reads from it (new warehouse;
     a full-refresh stream lands every record: it replaces its table whatever state it is given);
   - ours, from its own final state, completes its first tables with what the CDK reads from
     that state (append: every record exactly once; overwrite: replaced);
3. a sync started under airbyte-cdk and stopped half-way goes on under ours from the STATEs
   the CDK printed until then: ours lands exactly what the CDK reads from them;
4. a full-refresh stream given a STATE from the middle of airbyte-cdk's sync (a page token of
   its resumable full refresh) is read again in full and replaces its table: no duplicates;
5. (slow, at both concurrencies) a process of ours killed with SIGKILL right after a STATE in
   the middle of the sync and resumed from the last STATEs it printed ends with every record of
   the CDK's sync in the tables exactly once, and airbyte-cdk accepts those STATEs too.

Spark reads each style's tables in 1; from 2 on, delta-rs reads what landed (``harness.landed_tables``).
"""

from __future__ import annotations

import json

import conformance_harness as harness
import pytest

pytestmark = pytest.mark.slow  # every connector style synced under airbyte-cdk and ours: the quick tier (-m "not slow") leaves it out


def _tables(spark, warehouse, sync):
    """What landed in ``warehouse`` (through delta-rs: Spark's view of each style's tables is the first test's)."""
    return harness.landed_tables(spark, warehouse, sync.style, sync.catalog)


@pytest.mark.parametrize("concurrency", harness.CONCURRENCIES)
def test_same_records_as_airbyte_cdk(first_sync, concurrency):
    """Our tables hold exactly airbyte-cdk's records whatever the concurrency, and the TRACE
    estimates and LOG messages the connector emits come out as under airbyte-cdk."""
    sync = first_sync
    ours, tables = sync.ours_at[concurrency]
    assert ours.ok(), ours.describe()
    assert not isinstance(tables, Exception), f"reading our tables back failed: {tables!r}"
    harness.check_tables_equal_records(tables, sync.cdk, harness.infos(sync.catalog))
    _check_messages_passed_on(ours, sync.cdk)


def test_destination_stdout_prints_the_records_of_airbyte_cdk(first_sync):
    sync = first_sync
    assert sync.ours_stdout.ok(), sync.ours_stdout.describe()
    problems = harness.multiset_diff(
        harness.record_multisets(sync.cdk, sync.catalog), harness.record_multisets(sync.ours_stdout, sync.catalog)
    )
    assert not problems, "RECORD messages of ours (--destination stdout) vs airbyte-cdk's:\n" + "\n".join(problems)
    _check_messages_passed_on(sync.ours_stdout, sync.cdk)


def _check_messages_passed_on(run, cdk):
    assert run.estimates() == cdk.estimates(), (
        f"{run.label}: TRACE estimates {dict(run.estimates())}, airbyte-cdk printed {dict(cdk.estimates())}"
    )
    assert run.logs() == cdk.logs(), f"{run.label}: the connector's LOG messages {dict(run.logs())}, airbyte-cdk printed {dict(cdk.logs())}"


def test_full_refresh_streams_end_with_the_state_airbyte_cdk_ends_them_with(first_sync):
    """A full refresh's final STATE is airbyte-cdk's, whatever the stream's style: ``{"__ab_full_refresh_sync_complete":
    true}`` where the CDK gives the stream its resumable full-refresh cursor (an ``HttpStream``), a substream's
    per-parent form where it gives it that cursor's substream kind, ``{"__ab_no_cursor_state_message": true}`` for
    the rest. Into Spark at every concurrency and on stdout alike."""
    sync = first_sync
    full_refresh = [s["stream"]["name"] for s in sync.catalog["streams"] if s["sync_mode"] == "full_refresh"]
    if not full_refresh:
        pytest.skip("this style has no full-refresh stream")
    expected = {name: state["stream"]["stream_state"] for name, state in sync.cdk.final_states().items() if name in full_refresh}
    assert set(expected) == set(full_refresh), f"airbyte-cdk printed no final state for some: {sync.cdk.describe()}"
    runs = [run for run, _ in sync.ours_at.values()] + [sync.ours_stdout]
    for run in runs:
        ours = {name: state["stream"]["stream_state"] for name, state in run.final_states().items() if name in full_refresh}
        assert ours == expected, f"{run.label}: final full-refresh states {json.dumps(ours)}, airbyte-cdk's {json.dumps(expected)}"


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
    expected = harness.from_state(resumed.cdk_from_cdk, resumed.everything, sync.catalog)
    harness.check_tables_equal_records(_tables(spark, warehouse, sync), expected, harness.infos(sync.catalog))


def test_ours_from_its_own_final_state_completes_its_tables(first_sync, resumed, spark):
    sync = first_sync
    assert resumed.problem is None, resumed.problem
    assert resumed.cdk_from_ours.ok(), resumed.cdk_from_ours.describe()
    ours = harness.ours_read(sync.style, sync.ours_config(sync.warehouse), sync.catalog, resumed.our_state)
    assert ours.ok(), f"ours from its own final state {json.dumps(resumed.our_state)}:\n{ours.describe()}"
    harness.check_tables_equal_records(
        _tables(spark, sync.warehouse, sync),
        harness.after_resume(sync.cdk, resumed.cdk_from_ours, sync.catalog, replaced_by=resumed.everything),
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
    harness.check_tables_equal_records(_tables(spark, warehouse, sync), expected, harness.infos(sync.catalog))


def test_a_full_refresh_from_a_mid_sync_state_rereads_everything_and_replaces_its_table(first_sync, spark):
    """Where airbyte-cdk resumes a full refresh from its page token (its resumable full-refresh
    cursor), ours reads the stream again in full and replaces its table (README): given the first
    STATE airbyte-cdk printed for each full-refresh stream, over a table that already holds them,
    ours reads every record (its STATE counts them all) and the table holds each exactly once."""
    sync = first_sync
    full_refresh = harness.overwrite_streams(sync.catalog)
    if not full_refresh:
        pytest.skip("this style has no full-refresh stream")
    catalog = {"streams": [s for s in sync.catalog["streams"] if s["stream"]["name"] in full_refresh]}
    first_states: dict[str, dict] = {}
    for state in sync.cdk.states():
        first_states.setdefault(state["stream"]["stream_descriptor"]["name"], {"type": "STREAM", "stream": state["stream"]})
    given = [first_states[name] for name in full_refresh if name in first_states]
    markers = {"__ab_full_refresh_sync_complete", "__ab_no_cursor_state_message"}  # "the stream is complete"
    page_tokens = [s for s in given if not markers & set(s["stream"]["stream_state"])]
    if sync.style == "resumable_full_refresh":  # the case this test is for: a state in the middle of a stream
        assert page_tokens, f"airbyte-cdk printed no page-token state: {json.dumps(given)}"

    warehouse = str(sync.work / "full-refresh-replaced")
    first = harness.ours_read(sync.style, sync.ours_config(warehouse), catalog)
    assert first.ok(), first.describe()
    again = harness.ours_read(sync.style, sync.ours_config(warehouse), catalog, given)
    assert again.ok(), f"ours from airbyte-cdk's first STATEs {json.dumps(given)}:\n{again.describe()}"
    everything = harness.cdk_read(sync.style, sync.config, catalog)  # the API now (other tests touch it)
    counts = {s["stream"]["stream_descriptor"]["name"]: s["sourceStats"]["recordCount"] for s in again.states()}
    assert counts == {name: len(everything.records(name)) for name in full_refresh}, "each stream read again in full"
    harness.check_tables_equal_records(_tables(spark, warehouse, sync), everything, harness.infos(catalog))


@pytest.mark.slow
@pytest.mark.parametrize("concurrency", harness.CONCURRENCIES)
def test_sigkill_mid_sync_then_resume_lands_every_record_once(first_sync, concurrency, spark):
    sync = first_sync
    outcome = sync.kills[concurrency].result(timeout=600)  # started in the background by the kill_runner fixture
    killed = outcome.killed
    complete = len(sync.ours.states())  # STATE lines of a whole sync of ours
    try:
        # In the middle: paused right after a STATE (not killed on a timeout, not exited by itself),
        # with at least one STATE printed and fewer than a whole sync prints; else the resume below
        # would start from nothing, or from the end, and prove nothing. A sync of ours that prints
        # one STATE, at its end (states that lag their records), has no STATE in its middle: it is
        # killed while the API holds the second half of its requests, with no STATE printed.
        if killed.kill_when_held:
            assert complete == 1, f"a whole sync prints {complete} STATEs: {sync.ours.describe()}"
            assert killed.killed and killed.held and killed.state_lines == 0, f"not killed mid-run: {killed.describe()}"
        else:
            assert killed.killed and killed.paused, f"the sync was not killed right after a STATE: {killed.describe()}"
            assert 1 <= killed.state_lines < complete, (
                f"killed after {killed.state_lines} STATE lines; a whole sync prints {complete}: {killed.describe()}"
            )

        cdk_from_killed = harness.cdk_read(sync.style, harness.source_config(outcome.api), sync.catalog, killed.state_list())
        assert cdk_from_killed.ok(), f"airbyte-cdk refuses the STATEs ours printed: {cdk_from_killed.describe()}"

        resumed = harness.ours_read(sync.style, outcome.config, sync.catalog, killed.state_list() or None)
        assert resumed.ok(), f"resume from {json.dumps(killed.state_list())}:\n{resumed.describe()}\n{killed.describe()}"
    finally:
        outcome.api.stop()
    warehouse = outcome.config["destination"]["warehouse"]
    print(f"{killed.describe().split(chr(10) + 'stderr')[0]}\nresumed: {resumed.describe()}")
    try:
        harness.check_tables_equal_records(_tables(spark, warehouse, sync), sync.cdk, harness.infos(sync.catalog))
    except AssertionError as error:
        raise AssertionError(f"{error}\n{killed.describe()}\nresumed: {resumed.describe()}") from None
