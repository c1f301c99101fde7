"""Which config values are secrets, and how they are kept out of states, logs and errors
(issue 11: a false match must never fail a sync; a real secret never leaks, not even escaped).

The ``read`` tests run the whole command in this process (``source_framework.testing.read``)
over a source without HTTP whose one stream yields ``config["values"]`` and keeps the last one
as its state, with ``--destination stdout``: no Spark, no subprocess.
"""

from __future__ import annotations

import io
import json
import logging
import re
import sys
from collections.abc import Mapping
from typing import Any
from urllib.parse import quote, quote_plus

import pytest
from airbyte_cdk.models import ConfiguredAirbyteCatalogSerializer, ConnectorSpecification
from airbyte_cdk.sources import AbstractSource
from airbyte_cdk.sources.streams import Stream
from airbyte_cdk.test.catalog_builder import CatalogBuilder

from source_framework.runtime.entrypoint import EXIT_BAD_INPUT, EXIT_FAILED, EXIT_OK, build_parser, run_read
from source_framework.runtime.secrets import (
    MIN_SECRET_LENGTH,
    MaskingLogFilter,
    SecretFilter,
    find_secrets,
    is_secret_name,
)
from source_framework.testing import read
from unit_tests.conftest import CursorStream, stream_builder

LONG_SECRET = "s3cr3t-key-0f9a7c"
SECRET_STRING = {"type": "string", "airbyte_secret": True}
API_KEY_SPEC = {
    "type": "object",
    "required": ["api_key"],
    "properties": {"api_key": {"type": "string", "airbyte_secret": True}, "values": {"type": "array"}},
}


class ValuesSource(AbstractSource):
    """One stream, ``values``, of the config's ``values`` (the state keeps the last one), under the
    spec a test gives: a source of its own, since what is secret comes from the spec."""

    def __init__(self, connection_specification: Mapping[str, Any]) -> None:
        self._specification = connection_specification

    def spec(self, logger: logging.Logger) -> ConnectorSpecification:
        return ConnectorSpecification(connectionSpecification=self._specification)

    def check_connection(self, logger, config):
        return True, None

    def streams(self, config: Mapping[str, Any]) -> list[Stream]:
        return [CursorStream([config.get("values", [])], name="values")]


CATALOG = CatalogBuilder().with_stream(stream_builder("values")).build()


def spec_with_api_key(**constraints: Any) -> Mapping[str, Any]:
    """``API_KEY_SPEC`` with more constraints on ``api_key`` (for config errors that quote it)."""
    properties = {**API_KEY_SPEC["properties"], "api_key": {"type": "string", "airbyte_secret": True, **constraints}}
    return {**API_KEY_SPEC, "properties": properties}


def read_values(config: Mapping[str, Any], spec: Mapping[str, Any] = API_KEY_SPEC):
    return read(ValuesSource(spec), config, CATALOG, args=["--destination", "stdout", "--quiet"])


def stream_states(output) -> list[Any]:
    return [state["stream"]["stream_state"] for state in output.states()]


def trace_errors(output) -> list[Mapping[str, Any]]:
    return [m["trace"]["error"] for m in output.messages if m["type"] == "TRACE" and m["trace"]["type"] == "ERROR"]


def without_path(message: str) -> str:
    """A config error names the config file (a temporary one here): the rest is compared."""
    assert re.match(r"config file '[^']+' ", message), message
    return re.sub(r"^config file '[^']+' ", "config file ", message)


# -- which values are secrets ----------------------------------------------------------------


def test_spec_secrets_count_whatever_their_type_length_or_place():
    spec = {
        "type": "object",
        "properties": {
            "api_key": {"type": "string", "airbyte_secret": True},
            "pin": {"type": "integer", "airbyte_secret": True},
            "extra_keys": {"type": "array", "items": {"type": "string", "airbyte_secret": True}},
            "credentials": {
                "type": "object",
                "oneOf": [
                    {"properties": {"auth": {"const": "token"}, "token": {"type": "string", "airbyte_secret": True}}},
                    {"properties": {"auth": {"const": "basic"}, "password": {"type": "string", "airbyte_secret": True}}},
                ],
            },
        },
    }
    config = {"api_key": "k", "pin": 1234, "extra_keys": ["first-extra-key", "x2"], "credentials": {"auth": "token", "token": "t"}}
    assert sorted(find_secrets(config, spec)) == sorted(["k", "1234", "first-extra-key", "x2", "t"])


@pytest.mark.parametrize(
    "name",
    ["api_key", "apiKey", "X-API-KEY", "apikey", "password", "db_password", "passphrase", "secret", "client_secret",
     "token", "access_token", "refresh_token", "accessToken", "private_key", "secret_access_key", "credentials"],
)
def test_names_that_clearly_are_secrets(name):
    assert is_secret_name(name)
    assert find_secrets({"nested": [{name: LONG_SECRET}]}, {}) == [LONG_SECRET]


@pytest.mark.parametrize(
    "name, value",
    [
        ("token_ttl_minutes", 5),
        ("max_tokens", 4096),
        ("secret_rotation_days", 30),
        ("token_url", "https://auth.example.com/oauth/token"),
        ("token_type", "Bearer-with-a-long-name"),
        ("password_min_length", 12),
        ("primary_key", "customer_identifier"),
        ("access_key_id", "AKIAIOSFODNN7EXAMPLE"),
    ],
)
def test_names_that_only_mention_a_secret_are_not_secrets(name, value):
    assert not is_secret_name(name)
    assert find_secrets({name: value}, {}) == []


def test_secret_names_are_found_in_lists_and_objects_judged_by_their_own_names():
    config = {
        "credentials": {"auth_type": "OAuth2.0-with-refresh", "client_secret": "client-" + LONG_SECRET},
        "api_keys": ["first-" + LONG_SECRET, {"label": "second key, for backups", "key": "x"}],
        "accounts": [{"name": "main account", "password": "pw-" + LONG_SECRET}],
    }
    assert sorted(find_secrets(config, {})) == sorted(["client-" + LONG_SECRET, "first-" + LONG_SECRET, "pw-" + LONG_SECRET])


def test_a_secret_name_needs_a_string_of_a_reasonable_length():
    short = "x" * (MIN_SECRET_LENGTH - 1)
    assert find_secrets({"password": short, "token": 12345678901, "api_key": True}, {}) == []
    assert find_secrets({"password": short + "y"}, {}) == [short + "y"]


# -- the false match of issue 11 no longer fails a sync ----------------------------------------


def test_a_number_under_a_token_like_name_never_fails_the_sync(caplog):
    config = {"api_key": LONG_SECRET, "token_ttl_minutes": 5, "values": [100, 250, 500]}
    with caplog.at_level(logging.INFO):
        output = read_values(config)
    assert output.returncode == EXIT_OK, trace_errors(output)
    assert stream_states(output) == [{"n": 500}]
    assert [record["n"] for record in output.records("values")] == [100, 250, 500]
    assert "****" not in caplog.text


def log_line(masking: MaskingLogFilter, message: str, *args: Any) -> str:
    record = logging.LogRecord("read", logging.INFO, __file__, 1, message, args, None)
    assert masking.filter(record)
    return record.getMessage()


def test_a_short_spec_secret_is_masked_in_logs_without_garbling_them():
    masking = MaskingLogFilter(SecretFilter(find_secrets({"api_key": "c"}, API_KEY_SPEC)))
    assert log_line(masking, "checkpoint %d committed for %s", 500, "c-store") == "checkpoint 500 committed for c-store"
    assert log_line(masking, "config rejected: %r is too short", "c") == "config rejected: '****' is too short"


# -- real secrets are still kept out --------------------------------------------------------------


def test_a_state_holding_a_long_secret_is_refused():
    output = read_values({"api_key": LONG_SECRET, "values": ["a", "page-" + LONG_SECRET + "-2"]})
    assert output.returncode == EXIT_FAILED
    assert stream_states(output) == []
    assert "contains a secret value" in trace_errors(output)[0]["message"]


def test_a_state_that_is_a_short_spec_secret_is_refused():
    output = read_values({"api_key": "ab", "values": ["abc", "ab"]})
    assert output.returncode == EXIT_FAILED
    assert stream_states(output) == []
    assert "contains a secret value" in trace_errors(output)[0]["message"]


def test_a_state_that_merely_contains_the_letters_of_a_short_secret_is_emitted():
    output = read_values({"api_key": "ab", "values": ["cab", "tab"]})
    assert output.returncode == EXIT_OK, trace_errors(output)
    assert stream_states(output) == [{"n": "tab"}]


def test_long_secrets_are_masked_wherever_they_occur_in_any_escaped_form():
    secret = 'pa"ss\\wörd 42?/'
    masking = SecretFilter([secret])
    texts_and_masked = [
        (f"raw {secret} end", "raw **** end"),
        ("json " + json.dumps({"password": secret}), 'json {"password": "****"}'),
        ("json " + json.dumps({"password": secret}, ensure_ascii=False), 'json {"password": "****"}'),
        ("repr " + repr({"password": secret}), "repr {'password': '****'}"),
        ("query https://x/y?key=" + quote_plus(secret) + "&page=2", "query https://x/y?key=****&page=2"),
        ("path https://x/y/" + quote(secret) + "/z", "path https://x/y/****/z"),
        ("encoded " + quote(secret, safe=""), "encoded ****"),
    ]
    for text, masked in texts_and_masked:
        assert masking.mask(text) == masked
        assert masking.contains_secret(text)


def test_short_spec_secrets_are_masked_only_as_whole_values():
    masking = SecretFilter(["k"])
    text = "checkpoint k: {\"api_key\": \"k\"} {'api_key': 'k'} https://x/y?api_key=k&page=2 &key=k"
    assert masking.mask(text) == (
        "checkpoint k: {\"api_key\": \"****\"} {'api_key': '****'} https://x/y?api_key=****&page=2 &key=****"
    )
    assert not masking.contains_secret("checkpoint k: kk 'kk' =kk")


@pytest.mark.parametrize("text", ['{"n": "ab"}', '{"n": "cab"}', "x=ab", "ab", "'ab' is too short", "a b"])
def test_contains_secret_is_true_exactly_when_mask_would_change_the_text(text):
    masking = SecretFilter(["ab", LONG_SECRET])
    assert masking.contains_secret(text) == (masking.mask(text) != text)


# -- config errors (issue 13) --------------------------------------------------------------------


def assert_secret_absent(secret: str, output, stderr: str) -> None:
    forms = {secret, json.dumps(secret)[1:-1], repr(secret)[1:-1]}
    printed = json.dumps(output.messages) + json.dumps(output.messages, ensure_ascii=False) + stderr
    for form in forms:
        assert form not in printed, f"{form!r} printed"


def test_a_config_error_quoting_an_escaped_secret_does_not_show_it(capsys):
    secret = "key\\with\\backslashes-0f9a7c"
    output = read_values({"api_key": secret}, spec_with_api_key(pattern="^[a-z0-9-]+$"))
    assert output.returncode == EXIT_BAD_INPUT
    (error,) = trace_errors(output)
    assert error["failure_type"] == "config_error"
    assert without_path(error["message"]) == (
        "config file does not match the connector's spec: Config validation error: '****' does not match '^[a-z0-9-]+$'"
    )
    assert_secret_absent(secret, output, capsys.readouterr().err)


def test_a_config_error_quoting_a_short_secret_masks_it_and_nothing_else(capsys):
    output = read_values({"api_key": "c"}, spec_with_api_key(minLength=8))
    assert output.returncode == EXIT_BAD_INPUT
    expected = "config file does not match the connector's spec: Config validation error: '****' is too short"
    message = trace_errors(output)[0]["message"]
    assert without_path(message) == expected
    assert capsys.readouterr().err == f"error: {message}\n"


def test_a_config_error_quoting_a_whole_oneof_object_does_not_show_its_secret(capsys):
    spec = {
        "type": "object",
        "properties": {
            "credentials": {
                "type": "object",
                "oneOf": [
                    {"required": ["auth", "token"], "properties": {"auth": {"const": "token"}, "token": SECRET_STRING}},
                    {"required": ["auth", "password"], "properties": {"auth": {"const": "basic"}, "password": SECRET_STRING}},
                ],
            }
        },
    }
    secret = "tok-" + LONG_SECRET
    output = read_values({"credentials": {"auth": "oauth", "token": secret}}, spec)
    assert output.returncode == EXIT_BAD_INPUT
    assert without_path(trace_errors(output)[0]["message"]) == (
        "config file does not match the connector's spec: Config validation error: "
        "{'auth': 'oauth', 'token': '****'} is not valid under any of the given schemas"
    )
    assert_secret_absent(secret, output, capsys.readouterr().err)


def test_a_config_file_that_cannot_be_loaded_does_not_show_its_secret(tmp_path, capsys):
    """Before the config is loaded no secret is known: the errors of ``load_config`` must not quote it."""
    (tmp_path / "catalog.json").write_text(json.dumps(ConfiguredAirbyteCatalogSerializer.dump(CATALOG)))
    for content in (f'{{"api_key": "{LONG_SECRET}", }}', f'["{LONG_SECRET}"]', f'{{"api_key": "{LONG_SECRET}"\xff}}'):
        (tmp_path / "config.json").write_bytes(content.encode("latin-1"))
        parsed = build_parser().parse_args(
            ["read", "--config", str(tmp_path / "config.json"), "--catalog", str(tmp_path / "catalog.json"), "--destination", "stdout"]
        )
        protocol = io.BytesIO()
        assert run_read(ValuesSource(API_KEY_SPEC), parsed, protocol_out=protocol) == EXIT_BAD_INPUT
        stderr = capsys.readouterr().err
        assert "config file" in stderr
        assert LONG_SECRET not in stderr and LONG_SECRET.encode() not in protocol.getvalue()


def test_a_logged_traceback_is_masked_too():
    """airbyte-cdk logs a request's failure with its traceback (``exc_info``: "Retries exhausted with
    backoff exception."), which the handler's formatter adds after the filters ran: a URL carrying
    ``?api_key=...`` reached stderr in clear (found in review)."""
    secret = "SUPERSECRETVALUE123"
    masking = MaskingLogFilter(SecretFilter(find_secrets({"api_key": secret}, API_KEY_SPEC)))
    try:
        raise ConnectionError(f"Max retries exceeded with url: /items?api_key={secret}")
    except ConnectionError:
        record = logging.LogRecord("airbyte", logging.ERROR, __file__, 1, "Retries exhausted.", (), sys.exc_info(),
                                   sinfo=f"Stack (most recent call last): calling /items?api_key={secret}")
    assert masking.filter(record)
    text = logging.Formatter("%(message)s").format(record)
    assert "Retries exhausted." in text and "ConnectionError" in text and "/items?api_key=" in text
    assert secret not in text


def test_check_masks_a_secret_the_sources_connection_status_quotes(tmp_path, capsys):
    """airbyte-cdk masks its log lines, not the CONNECTION_STATUS it prints: a ``check_connection``
    returning a requests error put ``?api_key=...`` on stdout (found in review)."""
    from source_framework.runtime.entrypoint import run_command

    secret = "SUPERSECRETVALUE123"

    class FailsToConnect(ValuesSource):
        def check_connection(self, logger, config):
            return False, f"ConnectionError: Max retries exceeded with url: /ping?api_key={config['api_key']}"

    config = tmp_path / "config.json"
    config.write_text(json.dumps({"api_key": secret}))
    run_command(FailsToConnect(API_KEY_SPEC), build_parser().parse_args(["check", "--config", str(config)]))
    out = capsys.readouterr().out
    status = [json.loads(line) for line in out.splitlines() if '"CONNECTION_STATUS"' in line]
    assert status and status[0]["connectionStatus"]["status"] == "FAILED"
    assert "/ping?api_key=" in status[0]["connectionStatus"]["message"]
    assert secret not in out


def test_a_secret_the_connector_registers_while_it_runs_is_masked_too():
    """airbyte-cdk's Oauth2Authenticator registers the access token it obtains (``add_to_secrets``)
    and airbyte-cdk masks it from then on; so do we, in every form, and states holding it are refused."""
    from airbyte_cdk.utils.airbyte_secrets_utils import add_to_secrets, update_secrets

    secrets = SecretFilter(["config-secret-123"])
    update_secrets(list(secrets.secrets))
    try:
        assert secrets.mask("token at-runtime-token-0123456789") == "token at-runtime-token-0123456789"
        add_to_secrets("at-runtime-token-0123456789")
        assert secrets.mask("token at-runtime-token-0123456789 and config-secret-123") == "token **** and ****"
        assert secrets.mask("?t=at-runtime-token-0123456789&x") == "?t=****&x"
        assert secrets.contains_secret('{"token": "at-runtime-token-0123456789"}')
    finally:
        update_secrets([])
