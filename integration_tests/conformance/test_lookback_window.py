"""A declarative ``DatetimeBasedCursor`` with a ``lookback_window``: each sync reads again the days
before its state. airbyte-cdk prints those records again on every sync (a destination's problem);
ours must print them too with ``--destination stdout``, and land each in its table once, with a
primary key and without one (found in review: without a key every sync wrote its lookback window
once more).
"""

from __future__ import annotations

import conformance_harness as harness
import pytest


@pytest.mark.parametrize("style", ["declarative_lookback", "declarative_lookback_events"])
def test_records_a_lookback_window_reads_again_are_printed_as_by_airbyte_cdk_and_landed_once(style, tmp_path, spark):
    api = harness.start_api()
    try:
        config = harness.source_config(api)
        catalog = harness.configured_catalog(style, config)
        assert all(bool(s["primary_key"]) == (style == "declarative_lookback") for s in catalog["streams"])
        warehouse = str(tmp_path / "warehouse")
        ours_config = harness.ours_config(api, warehouse)
        first_cdk = harness.cdk_read(style, config, catalog)
        first = harness.ours_read(style, ours_config, catalog, args=["--concurrency", "4"])
        assert first.ok(), first.describe()
        assert first.final_states() == first_cdk.final_states()

        harness.touch(api)  # new versions of some records, inside the window and after it
        state = first.final_state_list()
        second_cdk = harness.cdk_read(style, config, catalog, state)
        landed = {harness.canonical(record) for record in first_cdk.records()}
        assert sum(harness.canonical(record) in landed for record in second_cdk.records()) > 50  # the window
        second = harness.ours_read(style, ours_config, catalog, state, args=["--concurrency", "4"])
        assert second.ok(), second.describe()
        assert second.final_states() == second_cdk.final_states()
        harness.check_tables_equal_records(harness.read_tables(spark, warehouse, style, catalog),
                                           harness.after_resume(first_cdk, second_cdk, catalog), harness.infos(catalog))

        stdout = harness.ours_read(style, config, catalog, state, args=["--destination", "stdout"])
        problems = harness.multiset_diff(harness.record_multisets(second_cdk, catalog), harness.record_multisets(stdout, catalog))
        assert not problems, "RECORD messages of ours (--destination stdout) vs airbyte-cdk's:\n" + "\n".join(problems)
    finally:
        api.stop()
