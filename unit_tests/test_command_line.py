"""Our command line takes everything airbyte-cdk's entrypoint takes (issue: any airbyte-cdk
connector runs on our ``launch`` unchanged, called the way the Airbyte platform calls it)."""

from __future__ import annotations

import argparse
import json
from collections.abc import Mapping
from typing import Any

import pytest
from airbyte_cdk.entrypoint import AirbyteEntrypoint
from airbyte_cdk.models import ConnectorSpecification, FailureType
from airbyte_cdk.sources import AbstractSource
from airbyte_cdk.utils.traced_exception import AirbyteTracedException

from source_framework.runtime.entrypoint import EXIT_BAD_INPUT, EXIT_FAILED, build_parser, run_command
from source_framework.runtime.read_command import concurrency_of
from source_framework.testing import read
from unit_tests.conftest import catalog_of, configured


def cdk_commands():
    """Each airbyte-cdk entrypoint command with an argv naming every one of its options."""
    build_cdk = AirbyteEntrypoint.parse_args  # airbyte-cdk builds its parser inside parse_args
    captured = {}
    original = argparse.ArgumentParser.parse_args

    def capture(self, args=None, namespace=None):
        captured["parser"] = self
        return original(self, args, namespace)

    argparse.ArgumentParser.parse_args = capture
    try:
        build_cdk(["spec"])
    finally:
        argparse.ArgumentParser.parse_args = original
    main = captured["parser"]
    subparsers = next(a for a in main._actions if isinstance(a, argparse._SubParsersAction))
    for command, sub in subparsers.choices.items():
        argv = [command]
        for action in sub._actions:
            if not action.option_strings or action.dest == "help":
                continue
            flag = max(action.option_strings, key=len)
            argv += [flag] if action.nargs == 0 else [flag, f"{action.dest}.json"]
        yield command, argv


@pytest.mark.parametrize("command, argv", list(cdk_commands()), ids=lambda v: v if isinstance(v, str) else "")
def test_every_cdk_entrypoint_flag_is_accepted(command, argv):
    cdk = AirbyteEntrypoint.parse_args(argv)
    ours = build_parser().parse_args(argv)
    assert ours.command == cdk.command == command
    for name, value in vars(cdk).items():
        assert getattr(ours, name) == value, name


def test_the_cdk_flags_are_really_covered():
    commands = dict(cdk_commands())
    assert {"spec", "check", "discover", "read"} <= set(commands)
    assert "--debug" in commands["read"] and "--manifest-path" in commands["read"]


# -- what the source's own code raises outside a stream: a TRACE error, not a traceback ---------

SECRET = "sk-live-0123456789abcdef"
SPEC = {"type": "object", "properties": {"api_key": {"type": "string", "airbyte_secret": True}}}


class Exploding(AbstractSource):
    """A source whose ``spec()`` or ``streams()`` raises, with the config's secret in the error."""

    def __init__(self, raise_in: str, error: Exception) -> None:
        self.raise_in, self.error = raise_in, error

    def spec(self, logger: Any) -> ConnectorSpecification:
        if self.raise_in == "spec":
            raise self.error
        return ConnectorSpecification(connectionSpecification=SPEC)

    def check_connection(self, logger: Any, config: Mapping[str, Any]) -> tuple[bool, Any]:
        return True, None

    def streams(self, config: Mapping[str, Any]) -> list[Any]:
        raise self.error


def plain_error() -> Exception:
    return RuntimeError(f"cannot log in\nwith key {SECRET}")


def traced_config_error() -> Exception:
    return AirbyteTracedException(message=f"the key {SECRET} was revoked", failure_type=FailureType.config_error)


def protocol_lines(text: str) -> list[dict]:
    return [json.loads(line) for line in text.splitlines() if line.strip()]


@pytest.mark.parametrize(
    "command, raise_in, error, failure_type, exit_code",
    [
        ("read", "streams", plain_error, "system_error", EXIT_FAILED),
        ("read", "streams", traced_config_error, "config_error", EXIT_BAD_INPUT),
        ("read", "spec", plain_error, "system_error", EXIT_FAILED),
        ("discover", "streams", plain_error, "system_error", EXIT_FAILED),
        ("discover", "streams", traced_config_error, "config_error", EXIT_BAD_INPUT),
        ("check", "spec", plain_error, "system_error", EXIT_FAILED),
        ("spec", "spec", traced_config_error, "config_error", EXIT_BAD_INPUT),
    ],
)
def test_what_the_sources_own_code_raises_is_a_trace_error_with_secrets_masked(
    command, raise_in, error, failure_type, exit_code, tmp_path, capsys
):
    source = Exploding(raise_in, error())
    config = {"api_key": SECRET}
    if command == "read":
        catalog = catalog_of(configured("numbers", "full_refresh", "overwrite"))
        output = read(source, config, catalog, args=["--destination", "stdout"], workdir=str(tmp_path))
        returncode, messages = output.returncode, output.messages
        stderr = capsys.readouterr().err
    else:
        config_path = tmp_path / "config.json"
        config_path.write_text(json.dumps(config))
        argv = [command] if command == "spec" else [command, "--config", str(config_path)]
        returncode = run_command(source, build_parser().parse_args(argv))
        captured = capsys.readouterr()
        messages, stderr = protocol_lines(captured.out), captured.err

    assert returncode == exit_code
    (trace,) = [m for m in messages if m["type"] == "TRACE" and m["trace"]["type"] == "ERROR"]
    error_message = trace["trace"]["error"]
    assert error_message["failure_type"] == failure_type
    where = "spec()" if raise_in == "spec" and command != "spec" else ("streams()" if raise_in == "streams" else "spec")
    assert f"the source's {where} raised" in error_message["message"]
    assert type(source.error).__name__ in error_message["message"]
    (line,) = [line for line in stderr.splitlines() if line.startswith("error: ")]  # one line, not a traceback
    assert "the source's" in line and "Traceback" not in stderr
    if command != "spec":  # the secret is known from the config
        everything = json.dumps(messages) + stderr
        assert SECRET not in everything and "****" in error_message["message"]


# -- a declarative manifest's concurrency_level bounds ours ----------------------------------


def manifest(concurrency_level: dict | None) -> dict:
    stream = {
        "type": "DeclarativeStream",
        "name": "numbers",
        "primary_key": ["id"],
        "schema_loader": {"type": "InlineSchemaLoader", "schema": {"type": "object", "properties": {"id": {"type": "integer"}}}},
        "retriever": {
            "type": "SimpleRetriever",
            "requester": {"type": "HttpRequester", "url_base": "http://127.0.0.1:1", "path": "/numbers", "http_method": "GET"},
            "record_selector": {"type": "RecordSelector", "extractor": {"type": "DpathExtractor", "field_path": []}},
        },
    }
    declared = {
        "version": "6.44.0",
        "type": "DeclarativeSource",
        "check": {"type": "CheckStream", "stream_names": ["numbers"]},
        "streams": [stream],
        "spec": {"type": "Spec", "connection_specification": {"type": "object", "properties": {}}},
    }
    if concurrency_level is not None:
        declared["concurrency_level"] = {"type": "ConcurrencyLevel", **concurrency_level}
    return declared


@pytest.mark.parametrize(
    "level, config, ours, expected",
    [
        ({"default_concurrency": 2}, {}, 4, 2),
        ({"default_concurrency": 2}, {}, 1, 1),
        ({"default_concurrency": "{{ config['workers'] }}", "max_concurrency": 3}, {"workers": 8}, 4, 3),
        ({"default_concurrency": "{{ config['workers'] }}", "max_concurrency": 3}, {"workers": 8}, 2, 2),
        ({"default_concurrency": "{{ config['workers'] }}", "max_concurrency": 10}, {"workers": 6}, 8, 6),
        (None, {}, 4, 4),
    ],
    ids=["fixed-2", "ours-lower", "interpolated-capped-by-max", "ours-lower-than-max", "interpolated-under-max", "none-declared"],
)
def test_a_manifests_concurrency_level_bounds_the_slices_read_at_once(level, config, ours, expected):
    from airbyte_cdk.sources.declarative.concurrent_declarative_source import ConcurrentDeclarativeSource

    source = ConcurrentDeclarativeSource(source_config=manifest(level), config=config)
    parsed = build_parser().parse_args(["read", "--config", "c.json", "--catalog", "k.json", "--concurrency", str(ours)])
    assert concurrency_of(parsed, config, source) == expected
    # the same bound when the number comes from the config's concurrency_level instead of the flag
    parsed = build_parser().parse_args(["read", "--config", "c.json", "--catalog", "k.json"])
    assert concurrency_of(parsed, {**config, "concurrency_level": ours}, source) == expected
