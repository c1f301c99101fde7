"""The acceptance runner itself: its command line works, and its checks fail when they should.

A check that cannot fail proves nothing, so each one is shown a broken connector or a broken
output here: the tiny connector with its ``ignore_state`` bug, and hand-made read outputs.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import shutil
import subprocess
import sys
from collections import Counter

import pytest

from source_framework.testing.acceptance_config import (
    AcceptanceConfig,
    AcceptanceConfigError,
    ExpectRecords,
    load_for_standard_suite,
)
from source_framework.testing.catalogs import (
    incremental_only,
    load_catalog,
    stream_infos,
)
from source_framework.testing.connector_reference import ConnectorReference
from source_framework.testing.connector_runs import ConnectorRunner, ReadOutput
from source_framework.testing.incremental_checks import (
    check_future_state_covers_streams,
    check_future_state_read,
    check_read_from_checkpoint,
    check_two_sequential_reads,
    pick_checkpoints,
)
from source_framework.testing.record_checks import (
    check_expected_records,
    check_no_extra_columns,
)
from source_framework.testing.table_checks import (
    check_rerun_adds_no_rows,
    check_tables_equal_records,
    read_tables,
    record_rows,
)

pytestmark = pytest.mark.slow  # runs the acceptance suite many times: the quick tier (-m "not slow") leaves it out

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
TINY = os.path.join(HERE, "tiny_connector")


def _record(stream, data):
    return {"type": "RECORD", "record": {"stream": stream, "data": data, "emitted_at": 0}}


def _state(stream, stream_state):
    return {
        "type": "STATE",
        "state": {"type": "STREAM", "stream": {"stream_descriptor": {"name": stream}, "stream_state": stream_state}},
    }


def _output(*messages):
    return ReadOutput(args=[], returncode=0, messages=list(messages), stderr="", seconds=0.0, label="hand-made read")


def _catalog(name, cursor, schema, pk=("id",)):
    return {
        "streams": [
            {
                "stream": {"name": name, "json_schema": schema, "supported_sync_modes": ["full_refresh", "incremental"]},
                "sync_mode": "incremental",
                "destination_sync_mode": "append",
                "cursor_field": [cursor],
                "primary_key": [[p] for p in pk],
            }
        ]
    }


SCHEMA = {
    "properties": {
        "id": {"type": "integer"},
        "storeId": {"type": ["null", "integer"]},
        "updatedAt": {"type": "string", "format": "date-time"},
        "items": {"type": ["null", "array"]},
    }
}


def test_command_line_runs_both_suites():
    """``python -m source_framework.testing`` collects both suites for a connector and its YAML."""
    process = subprocess.run(
        [
            sys.executable, "-m", "source_framework.testing",
            "--connector", "main.py", "--acceptance-config", "acceptance-test-config.yml",
            "--", "-q", "-p", "no:warnings", "-k", "test_spec or test_check or test_future_state",
        ],
        cwd=TINY, capture_output=True, text=True, timeout=300,
    )
    assert process.returncode == 0, process.stdout[-3000:] + process.stderr[-3000:]
    assert "4 passed" in process.stdout, process.stdout[-2000:]


def test_checks_catch_a_connector_that_ignores_its_state(tmp_path):
    """The tiny connector with its ``ignore_state`` bug fails the incremental checks."""
    with open(os.path.join(TINY, "config.json")) as handle:
        config = {**json.load(handle), "ignore_state": True}
    config_path = tmp_path / "broken_config.json"
    config_path.write_text(json.dumps(config))
    runner = ConnectorRunner(ConnectorReference.parse("main.py", base_dir=TINY), workdir=str(tmp_path))
    catalog = incremental_only(load_catalog(os.path.join(TINY, "configured_catalog.json")))
    streams = stream_infos(catalog)

    first = runner.read(str(config_path), catalog)
    second = runner.read(str(config_path), catalog, state=first.final_state_list())
    with pytest.raises(AssertionError, match="older than the state's cursor"):
        check_two_sequential_reads(first, second, streams)

    future = [{"type": "STREAM", "stream": {"stream_descriptor": {"name": "notes"}, "stream_state": {"version": 10**9}}}]
    with pytest.raises(AssertionError, match="records from a state in the future"):
        check_future_state_read(runner.read(str(config_path), catalog, state=future), future, streams)


def test_read_from_a_checkpoint_must_keep_the_records_after_it():
    streams = stream_infos(_catalog("users", "updatedAt", SCHEMA))
    first = _output(
        _record("users", {"id": 1, "updatedAt": "2025-01-01T00:00:00Z"}),
        _state("users", {"updatedAt": "2025-01-01T00:00:00Z"}),
        _record("users", {"id": 2, "updatedAt": "2025-01-02T00:00:00Z"}),
        _record("users", {"id": 3, "updatedAt": "2025-01-03T00:00:00Z"}),
        _state("users", {"updatedAt": "2025-01-03T00:00:00Z"}),
    )
    [checkpoint] = pick_checkpoints(first, streams, how_many=3)
    assert checkpoint.state[0]["stream"]["stream_state"] == {"updatedAt": "2025-01-01T00:00:00Z"}
    good = _output(*first.messages[2:])
    check_read_from_checkpoint(checkpoint, good, streams)
    lost = _output(first.messages[2], first.messages[4])
    with pytest.raises(AssertionError, match="1 of the 2 records .* are missing"):
        check_read_from_checkpoint(checkpoint, lost, streams)
    older = _output(first.messages[0], *first.messages[2:])
    older.messages[0] = _record("users", {"id": 9, "updatedAt": "2024-12-31T23:59:59+00:00"})
    with pytest.raises(AssertionError, match="older than the state's cursor"):
        check_read_from_checkpoint(checkpoint, older, streams)


def test_partitioned_state_bounds_each_partition_by_its_own_cursor():
    streams = stream_infos(_catalog("store_orders", "updatedAt", SCHEMA))
    state = {"states": [{"partition": {"store_id": 1}, "cursor": {"updatedAt": "2025-06-01T00:00:00Z"}}]}
    first = _output(_state("store_orders", state))
    # store 2 is not in the state: its old records are fine; store 1's old record is not
    fine = _output(_record("store_orders", {"id": 1, "storeId": 2, "updatedAt": "2025-01-01T00:00:00Z"}))
    check_two_sequential_reads(_output(fine.messages[0], *first.messages), fine, streams)
    bad = _output(_record("store_orders", {"id": 2, "storeId": 1, "updatedAt": "2025-05-31T00:00:00Z"}))
    with pytest.raises(AssertionError, match="1 of 1 records"):
        check_two_sequential_reads(_output(bad.messages[0], *first.messages), bad, streams)


def test_future_state_must_cover_every_incremental_stream():
    streams = stream_infos(_catalog("users", "updatedAt", SCHEMA))
    with pytest.raises(AssertionError, match="no state for the incremental stream"):
        check_future_state_covers_streams([], streams, missing_streams=())
    check_future_state_covers_streams([], streams, missing_streams=("users",))
    with pytest.raises(AssertionError, match="no STATE message"):
        check_future_state_read(_output(), [], streams)


def test_expected_records_and_extra_fields():
    read = _output(_record("users", {"id": 1, "name": "a"}), _record("users", {"id": 2, "name": "b", "nick": "x"}))
    check_expected_records(read, {"users": [{"id": 1, "name": "a"}]}, ExpectRecords(path=""), ["users"], {})
    with pytest.raises(AssertionError, match="1 of 1 expected records were not read"):
        check_expected_records(read, {"users": [{"id": 1, "name": "z"}]}, ExpectRecords(path=""), ["users"], {})
    check_expected_records(read, {"users": [{"id": 1, "name": "z"}]}, ExpectRecords(path=""), ["users"], {"users": ["name"]})
    with pytest.raises(AssertionError, match="not expected"):
        check_expected_records(read, {"users": [{"id": 1, "name": "a"}]}, ExpectRecords(path="", extra_records=False), ["users"], {})
    with pytest.raises(AssertionError, match="no expected records for stream"):
        check_expected_records(read, {}, ExpectRecords(path=""), ["users"], {}, require_every_stream=True)
    schema = {"properties": {"id": {"type": "integer"}, "name": {"type": "string"}}}
    with pytest.raises(AssertionError, match="/nick"):
        check_no_extra_columns(read, stream_infos(_catalog("users", "id", schema)))


def test_table_rows_compare_by_value_through_the_schema():
    streams = stream_infos(_catalog("orders", "updatedAt", SCHEMA))
    record = {"id": 1, "storeId": "7", "updatedAt": "2025-01-01T01:00:00+01:00", "items": [{"b": 1, "a": 2}], "extra": 1}
    row = (
        ("id", 1),
        ("items", '[{"a":2,"b":1}]'),
        ("storeId", 7),
        ("updatedAt", (dt.datetime(2025, 1, 1, tzinfo=dt.UTC) - dt.datetime(1970, 1, 1, tzinfo=dt.UTC)) // dt.timedelta(microseconds=1)),
    )
    assert record_rows([record], streams["orders"]) == Counter([row])
    read = _output(_record("orders", record))
    check_tables_equal_records({"orders": Counter([row])}, read, streams)
    with pytest.raises(AssertionError, match="1 records not in the table"):
        check_tables_equal_records({"orders": Counter()}, read, streams)
    with pytest.raises(AssertionError, match="added 1"):
        check_rerun_adds_no_rows({"orders": Counter([row])}, {"orders": Counter([row, row])})


def test_the_spark_checks_read_the_table_the_destination_names_not_a_namesake(spark, tmp_path):
    """A stream without a namespace is its source's table: another source's table of the same
    name in the warehouse is never read in its place (the checks used to glob ``<warehouse>/*/<stream>``)."""
    import pyarrow as pa

    from source_framework.destinations.spark.destination import SparkDestination

    streams = stream_infos(_catalog("items", "id", {"properties": {"id": {"type": "integer"}}}))
    theirs = SparkDestination(str(tmp_path), default_namespace="another_source")
    ours = SparkDestination(str(tmp_path), default_namespace="our_source")
    try:
        # a new table in the destination's (default) format, as a sync makes it
        items = theirs._table_at(theirs.table_path(None, "items"), spark, arrow_writes=True)
        items.commit(pa.table({"id": pa.array([1, 2], pa.int64())}), {}, 1)
        assert read_tables(spark, ours, streams) == {"items": None}
        assert read_tables(spark, theirs, streams) == {"items": Counter([(("id", 1),), (("id", 2),)])}
    finally:
        theirs.close()
        ours.close()


def test_strictness_high_needs_expected_records_and_a_future_state(tmp_path):
    (tmp_path / "acceptance-test-config.yml").write_text(
        "test_strictness_level: high\nacceptance_tests:\n"
        "  basic_read:\n    tests:\n      - config_path: c.json\n"
        "  incremental:\n    tests:\n      - config_path: c.json\n        configured_catalog_path: k.json\n"
    )
    with pytest.raises(AcceptanceConfigError) as error:
        AcceptanceConfig.load(str(tmp_path / "acceptance-test-config.yml"))
    for problem in ("'spec' is missing", "no expect_records", "no future_state"):
        assert problem in str(error.value)


def test_the_standard_suite_sees_the_yaml_without_the_runners_keys():
    content = load_for_standard_suite(os.path.join(ROOT, "acceptance-test-config.yml"))
    [basic_read] = content["acceptance_tests"]["basic_read"]["tests"]
    assert "expect_records" not in basic_read and "fail_on_extra_columns" not in basic_read
    assert content["acceptance_tests"]["incremental"]["tests"][0]["future_state"]
    config = AcceptanceConfig.load(os.path.join(ROOT, "acceptance-test-config.yml"))
    assert config.high_strictness and config.basic_read[0].expect_records is not None


# -- found in review: checks that could not fail, and false failures against Airbyte's CAT ---------------------


def _versions(*pairs, stream="s"):
    return [_record(stream, {"id": i, "version": v}) for i, v in pairs]


VERSIONED = stream_infos(_catalog("s", "version", {"properties": {"id": {"type": "integer"}, "version": {"type": "integer"}}}))


def test_a_first_read_whose_final_state_does_not_cover_its_records_fails():
    """A connector whose state never moves (``{"version": 0}``) returned nothing older on the second
    read, so it passed; CAT asserts every first-read record is at or below the final state."""
    stuck = _output(*_versions((1, 5), (2, 9)), _state("s", {"version": 0}))
    with pytest.raises(AssertionError, match="2 of 2 records of the first read are newer than its final state"):
        check_two_sequential_reads(stuck, _output(), VERSIONED)
    check_two_sequential_reads(_output(*_versions((1, 5), (2, 9)), _state("s", {"version": 9})), _output(), VERSIONED)


def test_threshold_days_lets_the_second_read_return_records_that_many_days_before_the_state():
    streams = stream_infos(_catalog("users", "updatedAt", SCHEMA))
    first = _output(_record("users", {"id": 1, "updatedAt": "2025-01-10T00:00:00Z"}),
                    _state("users", {"updatedAt": "2025-01-10T00:00:00Z"}))
    lookback = _output(_record("users", {"id": 1, "updatedAt": "2025-01-09T00:00:00Z"}))
    check_two_sequential_reads(first, lookback, streams, threshold_days=2)
    with pytest.raises(AssertionError, match="older than the state's cursor"):
        check_two_sequential_reads(first, lookback, streams)
    too_old = _output(_record("users", {"id": 1, "updatedAt": "2025-01-07T23:59:59Z"}))
    with pytest.raises(AssertionError, match="older than the state's cursor"):
        check_two_sequential_reads(first, too_old, streams, threshold_days=2)


def test_cursor_paths_find_the_cursor_in_the_state_and_a_state_without_it_is_not_checked():
    first = _output(*_versions((1, 10), (2, 20)), _state("s", {"last": {"v": 20}}))
    older = _output(*_versions((1, 10)))
    with pytest.raises(AssertionError, match="older than the state's cursor"):
        check_two_sequential_reads(first, older, VERSIONED, cursor_paths={"s": ["last", "v"]})
    with pytest.warns(UserWarning, match="cannot find cursor 'version' in its state"):
        check_two_sequential_reads(first, older, VERSIONED)  # as CAT: a state it cannot read is not checked


def test_partition_values_and_cursors_compare_across_text_and_numbers():
    partitioned = _state("s", {"states": [{"partition": {"store_id": "3"}, "cursor": {"version": 20}}]})
    first = _output(_record("s", {"id": 1, "store_id": 3, "version": 20}), partitioned)
    with pytest.raises(AssertionError, match="1 of 1 records"):
        check_two_sequential_reads(first, _output(_record("s", {"id": 1, "store_id": 3, "version": 10})), VERSIONED)
    text_state = _output(*_versions((1, 9999)), _state("s", {"version": "10000"}))
    with pytest.raises(AssertionError, match="older than the state's cursor"):
        check_two_sequential_reads(text_state, _output(*_versions((5, 999))), VERSIONED)


def test_the_future_state_need_cover_every_stream_only_at_high_strictness():
    streams = stream_infos(_catalog("users", "updatedAt", SCHEMA))
    check_future_state_covers_streams([], streams, missing_streams=(), high_strictness=False)
    with pytest.raises(AssertionError, match="no state for the incremental stream"):
        check_future_state_covers_streams([], streams, missing_streams=(), high_strictness=True)


def test_extra_columns_are_checked_at_the_top_level_as_cat_does_and_a_schema_without_properties_declares_none():
    nested = stream_infos(_catalog("a", "id", {"properties": {"id": {"type": "integer"},
                                                              "profile": {"type": "object", "properties": {"lang": {}}}}}))
    check_no_extra_columns(_output(_record("a", {"id": 1, "profile": {"lang": "en", "twitter": "@a"}})), nested)
    with pytest.raises(AssertionError, match="/name"):
        check_no_extra_columns(_output(_record("a", {"id": 1, "name": "x"})), nested)
    schemaless = stream_infos(_catalog("a", "id", {"type": "object", "additionalProperties": True}))
    with pytest.raises(AssertionError, match="fields not in the schema: /id"):
        check_no_extra_columns(_output(_record("a", {"id": 1})), schemaless)


def test_ignored_fields_take_wildcards_as_cat_does():
    from source_framework.testing.record_checks import check_identical_reads

    first = _output(_record("a", {"id": 1, "steps": [{"started_at": 1}, {"started_at": 2}], "properties_hs_time_x": 5}))
    second = _output(_record("a", {"id": 1, "steps": [{"started_at": 3}, {"started_at": 4}], "properties_hs_time_x": 6}))
    check_identical_reads(first, second, ["a"], {"a": ["steps/*/started_at", "properties_hs_time_*"]})
    with pytest.raises(AssertionError, match="two full-refresh reads differ"):
        check_identical_reads(first, second, ["a"], {"a": ["steps/*/started_at"]})


def test_a_table_of_a_stream_whose_schema_declares_no_column_counts_its_rows(spark, tmp_path):
    import pyarrow as pa

    from source_framework.destinations.spark.destination import SparkDestination

    streams = stream_infos(_catalog("bare", "id", {"type": "object"}))
    destination = SparkDestination(str(tmp_path), default_namespace="src")
    try:
        # a new table in the destination's (default) format, as a sync makes it
        bare = destination._table_at(destination.table_path(None, "bare"), spark, arrow_writes=True)
        bare.commit(pa.table({"_sf_meta": pa.array(["a", "b", "c"])}), {}, 1)
        tables = read_tables(spark, destination, streams)
    finally:
        destination.close()
    check_tables_equal_records(tables, _output(*[_record("bare", {"id": n}) for n in range(3)]), streams)
    with pytest.raises(AssertionError, match="bare"):
        check_tables_equal_records(tables, _output(*[_record("bare", {"id": n}) for n in range(2)]), streams)


def test_expected_records_tool_takes_a_module_and_class_from_the_current_folder(tmp_path):
    process = subprocess.run(
        [sys.executable, "-m", "source_framework.testing.expected_records", "--connector", "tiny_source:TinySource",
         "--config", "config.json", "--catalog", "configured_catalog.json", "--per-stream", "1"],
        cwd=TINY, capture_output=True, text=True, timeout=300,
    )
    assert process.returncode == 0, process.stderr[-3000:]
    assert {json.loads(line)["stream"] for line in process.stdout.splitlines()} >= {"notes"}


def test_command_line_takes_pytest_settings_from_the_connectors_folder_not_the_frameworks(tmp_path):
    """With source_framework installed from a checkout (pip install -e), pytest took the
    checkout's own pytest.ini (``-n 3``): ``-p no:xdist`` then failed on "-n"."""
    connector = tmp_path / "connector"
    shutil.copytree(TINY, connector)
    process = subprocess.run(
        [sys.executable, "-m", "source_framework.testing", "--connector", "main.py",
         "--", "-q", "-p", "no:xdist", "-p", "no:warnings", "-k", "test_spec or test_check or test_future_state"],
        cwd=connector, capture_output=True, text=True, timeout=300,
    )
    assert process.returncode == 0, process.stdout[-3000:] + process.stderr[-3000:]
    assert "4 passed" in process.stdout, process.stdout[-2000:]
