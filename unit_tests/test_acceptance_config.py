"""``acceptance-test-config.yml`` is read as Airbyte's connector acceptance tests (CAT) read it.

Unit tests of the reader (``source_framework.testing.acceptance_config``) and of how the
runner reports what the file bypasses: no connector runs, no Spark. The last tests hand the
file to airbyte-cdk's real standard suite and check that it still collects its scenarios.
"""

from __future__ import annotations

import copy
import logging
import os
import tempfile

import pytest
import yaml

from source_framework.testing import acceptance_config
from source_framework.testing.acceptance_config import (
    DEFAULT_TIMEOUT_SECONDS,
    AcceptanceConfig,
    AcceptanceConfigError,
    ExpectRecords,
    cdk_rejected_keys,
    load_for_standard_suite,
)
from source_framework.testing.acceptance_reads import incremental_where_supported
from source_framework.testing.standard_suite import standard_suite_for
from source_framework.testing.suite import AcceptanceSuite, _entry_params

#: A file that passes test_strictness_level: high with the fewest keys.
HIGH = {
    "connector_image": "source-example:dev",
    "test_strictness_level": "high",
    "acceptance_tests": {
        "spec": {"tests": [{"spec_path": "spec.json", "config_path": "config.json"}]},
        "connection": {"tests": [{"config_path": "config.json", "status": "succeed"}]},
        "discovery": {"tests": [{"config_path": "config.json"}]},
        "basic_read": {"tests": [{"config_path": "config.json", "expect_records": {"path": "expected.jsonl"}}]},
        "full_refresh": {"tests": [{"config_path": "config.json"}]},
        "incremental": {
            "tests": [{"config_path": "config.json", "future_state": {"future_state_path": "future.json"}}]
        },
    },
}

#: Every key of CAT's configuration schema, each in a section where CAT accepts it (at high).
EVERY_CAT_KEY = """
connector_image: airbyte/source-example:dev
base_path: .
test_strictness_level: high
custom_environment_variables: {EXAMPLE_MODE: test, EXAMPLE_PAGE_SIZE: 10}
cache_discovered_catalog: false
acceptance_tests:
  client_container_config:
    client_container_dockerfile_path: integration_tests/Dockerfile
    final_teardown_command: [python, teardown.py]
  spec:
    tests:
      - spec_path: source_example/spec.yaml
        config_path: secrets/config.json
        timeout_seconds: 60
        deployment_mode: oss
        backward_compatibility_tests_config: {previous_connector_version: 1.2.0, disable_for_version: 1.3.0}
        auth_default_method: {oauth: false, bypass_reason: the API has API keys only}
  connection:
    tests:
      - {config_path: secrets/config.json, status: succeed, timeout_seconds: 30, deployment_mode: cloud}
      - {config_path: integration_tests/invalid_config.json, status: failed}
      - {config_path: integration_tests/broken_config.json, status: exception}
  discovery:
    tests:
      - config_path: secrets/config.json
        timeout_seconds: 30
        deployment_mode: oss
        backward_compatibility_tests_config: {disable_for_version: 1.3.0}
        validate_primary_keys_data_type: true
  basic_read:
    tests:
      - config_path: secrets/config.json
        configured_catalog_path: integration_tests/configured_catalog.json
        deployment_mode: oss
        empty_streams:
          - {name: audit_log, bypass_reason: the sandbox account has no audit entries}
        expect_records:
          path: integration_tests/expected_records.jsonl
          exact_order: true
          extra_fields: true
          extra_records: false
        validate_schema: true
        validate_stream_statuses: true
        validate_state_messages: true
        validate_primary_keys_data_type: true
        fail_on_extra_columns: false
        validate_data_points: true
        expect_trace_message_on_failure: false
        timeout_seconds: 900
        ignored_fields:
          users: [{name: last_seen, bypass_reason: changes on every read}]
        file_types:
          skip_test: true
          bypass_reason: not a file-based connector
        client_container_config:
          secrets_path: secrets/db.json
          client_container_dockerfile_path: integration_tests/Dockerfile
          setup_command: [python, setup.py]
          teardown_command: [python, teardown.py]
          between_syncs_command: [python, mutate.py]
      - config_path: secrets/config_other.json
        expect_records: {bypass_reason: the second account has no stable data}
        file_types:
          unsupported_types: [{extension: .avro, bypass_reason: no avro in the bucket}]
  full_refresh:
    tests:
      - config_path: secrets/config.json
        configured_catalog_path: integration_tests/configured_catalog.json
        timeout_seconds: 1800
        deployment_mode: cloud
        ignored_fields:
          users: [{name: last_seen, bypass_reason: changes on every read}]
        client_container_config: {setup_command: [python, setup.py]}
  incremental:
    tests:
      - config_path: secrets/config.json
        configured_catalog_path: integration_tests/configured_catalog.json
        future_state:
          future_state_path: integration_tests/abnormal_state.json
          missing_streams: [{name: events, bypass_reason: the API keeps no cursor for events}]
          cursor_format:
            format: "^\\\\d{4}-\\\\d{2}-\\\\d{2}$"
            streams: [{name: users, format: "^\\\\d+$"}]
        timeout_seconds: 3600
        deployment_mode: oss
        skip_comprehensive_incremental_tests: true
        cursor_paths: {users: [updated_at]}
        threshold_days: 2
        client_container_config: {between_syncs_command: [python, mutate.py]}
      - config_path: secrets/config_other.json
        future_state: {bypass_reason: the second account has one page only}
  connector_attributes:
    tests:
      - config_path: secrets/config.json
        timeout_seconds: 60
        streams_without_primary_key: [{name: reports, bypass_reason: aggregated rows}]
        allowed_hosts: {bypass_reason: hosts depend on the region}
        suggested_streams: {bypass_reason: every stream is suggested}
  connector_documentation:
    tests:
      - {config_path: secrets/config.json, timeout_seconds: 60}
"""


def _write(tmp_path, content) -> str:
    path = tmp_path / "acceptance-test-config.yml"
    path.write_text(content if isinstance(content, str) else yaml.safe_dump(content, sort_keys=False))
    return str(path)


def _load(tmp_path, content) -> AcceptanceConfig:
    return AcceptanceConfig.load(_write(tmp_path, content))


def _refused(tmp_path, content) -> str:
    """The message of the error that refuses ``content``; it always names the file."""
    path = _write(tmp_path, content)
    with pytest.raises(AcceptanceConfigError) as error:
        AcceptanceConfig.load(path)
    message = str(error.value)
    assert path in message
    return message


def _high(**changes) -> dict:
    """``HIGH`` with ``changes`` applied: ``{"basic_read.0.expect_records": {...}}``-style paths
    (given with ``__`` for the dots), a value of ``None`` deleting the key."""
    content = copy.deepcopy(HIGH)
    for dotted, value in changes.items():
        *parents, last = dotted.split("__")
        node = content["acceptance_tests"]
        for part in parents:
            node = node["tests"][int(part)] if part.isdigit() else node[part]
        if value is None:
            node.pop(last, None)
        else:
            node[last] = value
    return content


def _skip_reason(param) -> str:
    [mark] = param.marks
    assert mark.name == "skip"
    return mark.kwargs["reason"]


# --- the reported case -----------------------------------------------------------------------


def test_high_strictness_accepts_expect_records_with_only_a_bypass_reason(tmp_path):
    config = _load(tmp_path, _high(basic_read__0__expect_records={"bypass_reason": "the sandbox has no stable data"}))
    [entry] = config.basic_read
    assert entry.expect_records == ExpectRecords(path=None, bypass_reason="the sandbox has no stable data")
    assert entry.skip_reason is None  # the entry's other checks still run


def test_a_bypassed_expect_records_check_is_skipped_with_its_reason(tmp_path):
    config = _load(tmp_path, _high(basic_read__0__expect_records={"bypass_reason": "the sandbox has no stable data"}))
    with pytest.raises(pytest.skip.Exception, match="expect_records is bypassed: the sandbox has no stable data"):
        AcceptanceSuite().test_expected_records(config.basic_read[0], acceptance_reads=None)


# --- expect_records --------------------------------------------------------------------------


def test_expect_records_needs_a_path_or_a_bypass_reason_and_not_both(tmp_path):
    both = _refused(tmp_path, _high(basic_read__0__expect_records={"path": "e.jsonl", "bypass_reason": "x"}))
    assert "acceptance_tests.basic_read.tests[0].expect_records: set 'path' or 'bypass_reason', not both" in both
    neither = _refused(tmp_path, _high(basic_read__0__expect_records={"exact_order": True}))
    assert "expect_records: needs a 'path' (the expected records) or a 'bypass_reason'" in neither


def test_expect_records_options_are_read_with_yaml_and_pydantic_spellings(tmp_path):
    expect = {"path": "records/expected.jsonl", "exact_order": "yes", "extra_fields": "true", "extra_records": 0}
    config = _load(tmp_path, _high(basic_read__0__expect_records=expect))
    assert config.basic_read[0].expect_records == ExpectRecords(
        path=str(tmp_path / "records" / "expected.jsonl"), exact_order=True, extra_fields=True, extra_records=False
    )


def test_extra_fields_needs_exact_order_and_no_extra_records_as_in_cat(tmp_path):
    message = _refused(tmp_path, _high(basic_read__0__expect_records={"path": "e.jsonl", "extra_fields": True}))
    assert "'extra_fields: true' needs 'exact_order: true'" in message
    assert "'extra_fields: true' needs 'extra_records: false'" in message


def test_high_strictness_needs_expect_records_on_every_basic_read_test(tmp_path):
    message = _refused(tmp_path, _high(basic_read__0__expect_records=None))
    assert "basic_read test #1 ('config.json') has no expect_records (give a path, or a bypass_reason)" in message
    config = _load(tmp_path, {**_high(basic_read__0__expect_records=None), "test_strictness_level": "low"})
    assert config.basic_read[0].expect_records is None


# --- sections and their bypass_reason --------------------------------------------------------


def test_a_bypassed_section_satisfies_high_and_is_reported_skipped_with_its_reason(tmp_path):
    config = _load(tmp_path, _high(incremental={"bypass_reason": "the API has no cursor"}))
    assert config.incremental == []
    [param] = _entry_params(config, "incremental")
    assert _skip_reason(param) == "'incremental' is bypassed: the API has no cursor"


def test_a_section_cannot_have_both_tests_and_a_bypass_reason(tmp_path):
    section = {"bypass_reason": "no", "tests": [{"config_path": "config.json"}]}
    message = _refused(tmp_path, _high(full_refresh=section))
    assert "acceptance_tests.full_refresh: set 'tests' or 'bypass_reason', not both" in message


def test_a_section_needs_tests_or_a_bypass_reason(tmp_path):
    message = _refused(tmp_path, _high(full_refresh={}))
    assert "acceptance_tests.full_refresh: needs 'tests' or a 'bypass_reason'" in message


def test_an_empty_tests_list_is_accepted_as_cat_does_and_runs_nothing(tmp_path):
    config = _load(tmp_path, _high(full_refresh={"tests": []}))
    [param] = _entry_params(config, "full_refresh")
    assert _skip_reason(param) == f"'full_refresh' lists no tests in {config.path}"


def test_every_section_is_mandatory_at_high_and_optional_at_low(tmp_path):
    message = _refused(tmp_path, _high(spec=None, incremental=None))
    assert "section 'spec' is missing" in message and "section 'incremental' is missing" in message
    low = {**_high(incremental=None), "test_strictness_level": "low"}
    config = _load(tmp_path, low)
    [param] = _entry_params(config, "incremental")
    assert _skip_reason(param) == f"no 'incremental' section in {config.path}"


def test_connector_attributes_and_documentation_are_optional_at_high(tmp_path):
    config = _load(tmp_path, HIGH)
    assert "connector_attributes" not in config.raw["acceptance_tests"]


# --- a test entry's bypass_reason ------------------------------------------------------------


def test_a_bypassed_entry_is_reported_skipped_and_needs_nothing_else_at_high(tmp_path):
    config = _load(tmp_path, _high(basic_read={"tests": [{"bypass_reason": "the API needs a paid plan"}]}))
    [entry] = config.basic_read
    assert entry.skip_reason == "bypassed: the API needs a paid plan"
    [param] = _entry_params(config, "basic_read")
    assert param.values == (entry,)
    assert _skip_reason(param) == "basic_read:config.json: bypassed: the API needs a paid plan"


def test_entries_that_run_are_plain_params(tmp_path):
    config = _load(tmp_path, HIGH)
    [param] = _entry_params(config, "incremental")
    assert param.values == (config.incremental[0],) and param.marks == () and param.id == "incremental:config.json"


def test_entries_the_cdk_suite_expects_to_fail_are_skipped_by_this_runner(tmp_path):
    tests = [{"config_path": "bad.json", "status": "failed"}, {"config_dict": {"api_key": "x"}}]
    config = _load(tmp_path, _high(full_refresh={"tests": tests}))
    failing, inline = config.full_refresh
    assert failing.skip_reason.startswith("status: failed (airbyte-cdk's standard suite checks that this read fails")
    assert inline.skip_reason.startswith("config_dict without config_path")


# --- future_state ----------------------------------------------------------------------------


def test_a_bypassed_future_state_satisfies_high_and_its_check_is_skipped_with_the_reason(tmp_path):
    config = _load(tmp_path, _high(incremental__0__future_state={"bypass_reason": "cursors are opaque tokens"}))
    [entry] = config.incremental
    assert entry.future_state_path is None and entry.future_state_bypass_reason == "cursors are opaque tokens"
    with pytest.raises(pytest.skip.Exception, match="future_state is bypassed: cursors are opaque tokens"):
        AcceptanceSuite().test_future_state(entry, acceptance_reads=None)


def test_high_strictness_needs_a_future_state_path_or_bypass_reason(tmp_path):
    for future_state in (None, {"missing_streams": []}):
        message = _refused(tmp_path, _high(incremental__0__future_state=future_state))
        assert "incremental test #1 ('config.json') has no future_state" in message


def test_missing_streams_need_a_bypass_reason_at_high(tmp_path):
    future = {"future_state_path": "future.json", "missing_streams": [{"name": "events"}]}
    message = _refused(tmp_path, _high(incremental__0__future_state=future))
    assert "missing_streams item 'events' has no bypass_reason" in message
    future["missing_streams"] = [{"name": "events", "bypass_reason": "no cursor"}]
    assert _load(tmp_path, _high(incremental__0__future_state=future)).incremental[0].missing_streams == ("events",)


def test_the_flat_future_state_path_is_refused_outside_the_legacy_layout(tmp_path):
    message = _refused(tmp_path, _high(incremental__0__future_state=None, incremental__0__future_state_path="f.json"))
    assert "incremental.tests[0].future_state_path: not a key Airbyte's acceptance tests accept" in message


def test_skip_comprehensive_incremental_tests_is_read(tmp_path):
    config = _load(tmp_path, _high(incremental__0__skip_comprehensive_incremental_tests="true"))
    assert config.incremental[0].skip_comprehensive_incremental_tests is True


# --- empty_streams, ignored_fields -----------------------------------------------------------


def test_empty_streams_are_objects_or_names_and_need_a_bypass_reason_at_high(tmp_path):
    streams = [{"name": "audit_log", "bypass_reason": "no audit entries"}, "drafts"]
    message = _refused(tmp_path, _high(basic_read__0__empty_streams=streams))
    assert "empty_streams item 'drafts' has no bypass_reason" in message and "audit_log" not in message
    low = {**_high(basic_read__0__empty_streams=streams), "test_strictness_level": "low"}
    assert _load(tmp_path, low).basic_read[0].empty_streams == ("audit_log", "drafts")


def test_an_empty_stream_needs_a_name(tmp_path):
    message = _refused(tmp_path, _high(basic_read__0__empty_streams=[{"bypass_reason": "why"}]))
    assert "acceptance_tests.basic_read.tests[0].empty_streams[0].name: is required" in message


def test_ignored_fields_are_read_per_stream_and_need_a_bypass_reason_at_high(tmp_path):
    fields = {"users": [{"name": "last_seen", "bypass_reason": "changes on every read"}, {"name": "meta/etag"}]}
    message = _refused(tmp_path, _high(full_refresh__0__ignored_fields=fields))
    assert "ignored_fields.users item 'meta/etag' has no bypass_reason" in message
    fields["users"][1]["bypass_reason"] = "a hash of the response"
    config = _load(tmp_path, _high(full_refresh__0__ignored_fields=fields, basic_read__0__ignored_fields=fields))
    assert config.full_refresh[0].ignored_fields == {"users": ("last_seen", "meta/etag")}
    assert config.basic_read[0].ignored_fields == {"users": ("last_seen", "meta/etag")}


# --- defaults, paths, timeouts, environment --------------------------------------------------


def test_config_path_and_configured_catalog_path_default_as_in_cat(tmp_path):
    config = _load(tmp_path, _high(basic_read__0__config_path=None, incremental__0__config_path=None))
    assert config.basic_read[0].config_path == str(tmp_path / "secrets" / "config.json")
    assert config.basic_read[0].configured_catalog_path is None
    assert config.incremental[0].configured_catalog_path is None  # CAT builds it from discover


def test_without_a_configured_catalog_incremental_reads_every_stream_that_supports_it():
    discovered = {
        "streams": [
            {
                "stream": {"name": "users", "supported_sync_modes": ["full_refresh", "incremental"],
                           "default_cursor_field": ["updated_at"]},
                "sync_mode": "full_refresh",
                "destination_sync_mode": "overwrite",
            },
            {"stream": {"name": "lookups", "supported_sync_modes": ["full_refresh"]},
             "sync_mode": "full_refresh", "destination_sync_mode": "overwrite"},
        ]
    }
    users, lookups = incremental_where_supported(discovered)["streams"]
    assert (users["sync_mode"], users["destination_sync_mode"], users["cursor_field"]) == (
        "incremental", "append", ["updated_at"]
    )
    assert lookups == discovered["streams"][1]


def test_base_path_is_where_relative_paths_start(tmp_path):
    config = _load(tmp_path, {**_high(), "base_path": "connector"})
    assert config.basic_read[0].config_path == str(tmp_path / "connector" / "config.json")
    assert config.basic_read[0].expect_records.path == str(tmp_path / "connector" / "expected.jsonl")
    assert config.root == str(tmp_path)  # the connector reference stays relative to the file


def test_timeout_seconds_or_the_sections_cat_default(tmp_path):
    config = _load(tmp_path, _high(basic_read__0__timeout_seconds=90, full_refresh__0__timeout_seconds=0))
    assert config.basic_read[0].timeout_seconds == 90
    assert config.full_refresh[0].timeout_seconds == DEFAULT_TIMEOUT_SECONDS["full_refresh"]  # 0: CAT's default
    assert config.incremental[0].timeout_seconds == DEFAULT_TIMEOUT_SECONDS["incremental"]
    message = _refused(tmp_path, _high(incremental__0__timeout_seconds=-5))
    assert "incremental.tests[0].timeout_seconds: should be a whole number, 0 or more, not -5" in message


def test_fail_on_extra_columns_is_read(tmp_path):
    assert _load(tmp_path, HIGH).basic_read[0].fail_on_extra_columns is True
    config = _load(tmp_path, _high(basic_read__0__fail_on_extra_columns=False))
    assert config.basic_read[0].fail_on_extra_columns is False


def test_custom_environment_variables_are_the_connectors_environment(tmp_path):
    config = _load(tmp_path, {**HIGH, "custom_environment_variables": {"MODE": "test", "PAGE": 10, "UNSET": None}})
    assert config.environment == {"MODE": "test", "PAGE": "10"}


# --- every CAT key; what is refused ----------------------------------------------------------


def test_every_key_cat_accepts_is_accepted_at_high_and_low(tmp_path):
    config = _load(tmp_path, EVERY_CAT_KEY)
    assert [entry.skip_reason for entry in config.basic_read + config.full_refresh + config.incremental] == [None] * 5
    assert config.incremental[1].future_state_bypass_reason == "the second account has one page only"
    assert config.environment == {"EXAMPLE_MODE": "test", "EXAMPLE_PAGE_SIZE": "10"}
    _load(tmp_path, EVERY_CAT_KEY.replace("test_strictness_level: high", "test_strictness_level: low"))


def test_keys_cat_refuses_are_refused_naming_the_key(tmp_path):
    content = _high(basic_read__0__expect_records={"path": "e.jsonl", "exactorder": True})
    content["acceptance_tests"]["incremental"]["tests"][0]["threshold"] = 3
    content["acceptance_tests"]["smoke"] = {"tests": []}
    content["strictness"] = "high"
    message = _refused(tmp_path, content)
    for key in (
        "strictness: not a key",
        "acceptance_tests.smoke: not a key",
        "acceptance_tests.basic_read.tests[0].expect_records.exactorder: not a key",
        "acceptance_tests.incremental.tests[0].threshold: not a key",
    ):
        assert key in message
    assert "(accepted: bypass_reason, exact_order, extra_fields, extra_records, path)" in message


def test_values_cat_refuses_are_refused(tmp_path):
    content = _high(
        connection__0__status="ok",
        basic_read__0__deployment_mode="prod",
        basic_read__0__file_types={"skip_test": False, "bypass_reason": "x"},
        spec__0__auth_default_method={"oauth": False},
    )
    content["test_strictness_level"] = "medium"
    message = _refused(tmp_path, content)
    for problem in (
        "test_strictness_level: should be one of high, low, not 'medium'",
        "connection.tests[0].status: should be one of succeed, failed, exception, not 'ok'",
        "basic_read.tests[0].deployment_mode: should be one of cloud, oss, not 'prod'",
        "file_types: 'bypass_reason' can only be set when 'skip_test' is true",
        "auth_default_method: 'oauth: false' needs a 'bypass_reason'",
    ):
        assert problem in message


def test_a_file_without_acceptance_tests_or_in_both_layouts_is_refused(tmp_path):
    assert "has no 'acceptance_tests' section" in _refused(tmp_path, {"connector_image": "x"})
    both = {**HIGH, "tests": {"spec": [{"spec_path": "spec.json"}]}}
    assert "has both 'acceptance_tests' and the legacy top-level 'tests'" in _refused(tmp_path, both)


def test_keys_the_cdk_suite_accepts_in_its_sections_are_accepted(tmp_path):
    config = _load(tmp_path, _high(connection__0__config_dict={"api_key": "x"}, discovery__0__empty_streams=[]))
    assert config.raw["acceptance_tests"]["connection"]["tests"][0]["config_dict"] == {"api_key": "x"}
    message = _refused(tmp_path, _high(incremental__0__config_dict={"api_key": "x"}))
    assert "acceptance_tests.incremental.tests[0].config_dict: not a key" in message


# --- the legacy layout -----------------------------------------------------------------------

LEGACY = """
connector_image: airbyte/source-example:dev
tests:
  spec:
    - spec_path: spec.json
  basic_read:
    - config_path: config.json
      empty_streams: [drafts]
  full_refresh:
    - config_path: config.json
      ignored_fields: {users: [last_seen]}
  incremental:
    - config_path: config.json
      configured_catalog_path: catalog.json
      future_state_path: future.json
"""


def test_the_legacy_tests_layout_is_migrated_as_cat_does(tmp_path):
    config = _load(tmp_path, LEGACY)
    assert config.basic_read[0].empty_streams == ("drafts",)
    assert config.full_refresh[0].ignored_fields == {"users": ("last_seen",)}
    assert config.incremental[0].future_state_path == str(tmp_path / "future.json")
    [incremental] = config.raw["acceptance_tests"]["incremental"]["tests"]
    assert incremental["future_state"] == {"future_state_path": "future.json"}


# --- notes: accepted, not checked ------------------------------------------------------------


def test_keys_nothing_here_checks_are_noted_and_logged_once(tmp_path, caplog):
    path = _write(tmp_path, EVERY_CAT_KEY)
    with caplog.at_level(logging.WARNING, logger=acceptance_config.__name__):
        config = AcceptanceConfig.load(path)
        AcceptanceConfig.load(path)
        load_for_standard_suite(path)
    [record] = [r for r in caplog.records if r.name == acceptance_config.__name__]
    assert "not checked by this runner" in record.getMessage()
    noted = {note.split(":")[0] for note in config.notes}
    for key in (
        "acceptance_tests.client_container_config",
        "acceptance_tests.spec.tests[0].deployment_mode",
        "acceptance_tests.basic_read.tests[0].validate_data_points",
        "acceptance_tests.basic_read.tests[0].expect_trace_message_on_failure",
        "acceptance_tests.basic_read.tests[0].file_types",
        "acceptance_tests.incremental.tests[0].future_state.cursor_format",
        "acceptance_tests.connector_attributes",
        "acceptance_tests.basic_read.tests[0].configured_catalog_path",  # CAT refuses it at high
    ):
        assert key in noted, key
    for checked in ("expect_records", "fail_on_extra_columns", "validate_schema", "timeout_seconds", "ignored_fields"):
        assert f"acceptance_tests.basic_read.tests[0].{checked}" not in noted
    for checked in ("threshold_days", "cursor_paths"):
        assert f"acceptance_tests.incremental.tests[0].{checked}" not in noted


def test_validation_flags_are_noted_only_when_they_ask_for_a_check(tmp_path):
    flags = {"basic_read__0__validate_data_points": False, "basic_read__0__validate_state_messages": True}
    config = _load(tmp_path, _high(**flags))
    [note] = [note for note in config.notes if note.startswith("acceptance_tests.basic_read")]
    assert note == (
        "acceptance_tests.basic_read.tests[0].validate_state_messages: not checked by this runner (nor by "
        "airbyte-cdk's standard suite): CAT's check of the STATE messages of the basic read"
    )


# --- airbyte-cdk's standard suite gets a copy it collects ------------------------------------


def _cdk_suite(path):
    return standard_suite_for(lambda: None, path, name="TestCollectOnly")


def test_the_cdk_suite_collects_a_file_with_every_cat_key(tmp_path):
    path = _write(tmp_path, EVERY_CAT_KEY)
    scenarios = _cdk_suite(path).get_scenarios()
    ids = sorted(scenario.id for scenario in scenarios)
    assert ids == ["broken_config", "config", "config_other", "invalid_config"]
    copy_for_cdk = load_for_standard_suite(path)["acceptance_tests"]
    for section in ("spec", "connection", "discovery", "basic_read", "full_refresh"):
        for entry in copy_for_cdk[section]["tests"]:
            assert not cdk_rejected_keys(section) & set(entry), (section, entry)
    assert "expect_records" in cdk_rejected_keys("basic_read") and "timeout_seconds" in cdk_rejected_keys("spec")
    assert copy_for_cdk["incremental"] == yaml.safe_load(EVERY_CAT_KEY)["acceptance_tests"]["incremental"]


def test_the_cdk_copy_is_in_the_shape_the_cdk_reads(tmp_path):
    content = yaml.safe_load(LEGACY)
    content["tests"]["basic_read"].append({"bypass_reason": "needs a paid plan"})
    content["base_path"] = "connector"
    copy_for_cdk = load_for_standard_suite(_write(tmp_path, content))["acceptance_tests"]
    [entry] = copy_for_cdk["basic_read"]["tests"]
    assert entry == {"config_path": os.path.join(str(tmp_path), "connector", "config.json"),
                     "empty_streams": [{"name": "drafts"}]}
    assert _cdk_suite(_write(tmp_path, content)).get_scenarios()


def test_the_cdk_suite_still_refuses_keys_cat_does_not_know(tmp_path):
    path = _write(tmp_path, _high(discovery__0__validate_primary_key=True))
    with pytest.raises(ValueError, match="validate_primary_key"):
        _cdk_suite(path).get_scenarios()


def test_a_catalog_or_future_state_the_config_names_but_that_is_missing_or_broken_is_named():
    """A bare FileNotFoundError (and its traceback) was all a test using one said."""
    from source_framework.testing.catalogs import load_catalog, load_json

    with pytest.raises(ValueError, match="configured_catalog_path '/nowhere/catalog.json' does not exist"):
        load_catalog("/nowhere/catalog.json")
    with tempfile.NamedTemporaryFile("w", suffix=".json") as broken:
        broken.write("{not json")
        broken.flush()
        with pytest.raises(ValueError, match=f"future_state_path '{broken.name}' is not a readable JSON file"):
            load_json(broken.name, "future_state_path")
