"""``main.py catalog --config C``: the configured catalog ``read`` takes, made from ``discover``
(issue 51: it was written by hand, and discover's output fed to read failed)."""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import Any

import pytest
from airbyte_cdk.models import ConnectorSpecification, SyncMode
from airbyte_cdk.sources import AbstractSource
from airbyte_cdk.sources.streams import Stream

from source_framework.runtime.entrypoint import EXIT_BAD_INPUT, EXIT_FAILED, EXIT_OK, build_parser, run_command
from source_framework.runtime.inputs import InputError, load_catalog

SECRET = "sk-live-catalog-0123456789"
SPEC = {
    "type": "object",
    "required": ["api_key"],
    "properties": {"api_key": {"type": "string", "airbyte_secret": True}},
}
SCHEMA = {"type": "object", "properties": {"id": {"type": "integer"}, "updatedAt": {"type": "string"}}}


class Plain(Stream):
    """A stream read in full: no cursor."""

    primary_key = "id"

    def __init__(self, name: str, cursor: str | None = None, key: Any = "id") -> None:
        self._name, self._cursor, self.primary_key = name, cursor, key

    @property
    def name(self) -> str:
        return self._name

    @property
    def cursor_field(self) -> Any:
        return self._cursor or []

    @property
    def supports_incremental(self) -> bool:
        return self._cursor is not None

    def get_json_schema(self) -> Mapping[str, Any]:
        return SCHEMA

    def read_records(self, sync_mode: SyncMode, **kwargs: Any) -> Iterable[Mapping[str, Any]]:
        return []


class Offered(AbstractSource):
    def __init__(self, streams: list[Stream], fail: bool = False) -> None:
        self._streams, self.fail = streams, fail

    def spec(self, logger: Any) -> ConnectorSpecification:
        return ConnectorSpecification(connectionSpecification=SPEC)

    def check_connection(self, logger: Any, config: Mapping[str, Any]) -> tuple[bool, Any]:
        return True, None

    def streams(self, config: Mapping[str, Any]) -> list[Stream]:
        if self.fail:
            raise RuntimeError(f"cannot list streams with key {config['api_key']}")
        return self._streams


def run_catalog(source, tmp_path, capsys, config=None, *flags):
    config_path = tmp_path / "config.json"
    config_path.write_text(json.dumps({"api_key": SECRET} if config is None else config))
    code = run_command(source, build_parser().parse_args(["catalog", "--config", str(config_path), *flags]))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_incremental_where_a_stream_has_a_cursor_full_refresh_elsewhere(tmp_path, capsys):
    source = Offered([Plain("users", cursor="updatedAt"), Plain("products"), Plain("events", cursor="updatedAt", key=None)])
    code, out, err = run_catalog(source, tmp_path, capsys)
    assert code == EXIT_OK, err
    catalog = json.loads(out)
    modes = {s["stream"]["name"]: (s["sync_mode"], s["destination_sync_mode"], s.get("cursor_field"), s["primary_key"])
             for s in catalog["streams"]}
    assert modes == {
        "users": ("incremental", "append", ["updatedAt"], [["id"]]),
        "products": ("full_refresh", "overwrite", None, [["id"]]),
        "events": ("incremental", "append", ["updatedAt"], []),
    }
    assert catalog["streams"][0]["stream"]["json_schema"] == SCHEMA  # discover's stream, whole
    assert "append_dedup" in err  # the other choice is said, not made silently
    (tmp_path / "catalog.json").write_text(out)
    assert [s.stream.name for s in load_catalog(str(tmp_path / "catalog.json")).streams] == ["users", "products", "events"]


def test_output_writes_the_file_and_leaves_stdout_empty(tmp_path, capsys):
    target = tmp_path / "configured_catalog.json"
    code, out, err = run_catalog(Offered([Plain("users", cursor="updatedAt")]), tmp_path, capsys, None, "--output", str(target))
    assert code == EXIT_OK, err
    assert out == "" and str(target) in err
    assert json.loads(target.read_text())["streams"][0]["sync_mode"] == "incremental"


def test_a_config_that_does_not_match_the_spec_is_refused_with_nothing_written(tmp_path, capsys):
    target = tmp_path / "configured_catalog.json"
    code, out, err = run_catalog(Offered([Plain("users")]), tmp_path, capsys, {}, "--output", str(target))
    assert code == EXIT_BAD_INPUT
    assert "does not match the connector's spec" in err and "api_key" in err
    assert out == "" and not target.exists()


def test_what_the_source_raises_is_one_line_with_the_secret_masked(tmp_path, capsys):
    code, out, err = run_catalog(Offered([], fail=True), tmp_path, capsys)
    assert code == EXIT_FAILED
    assert out == "" and "Traceback" not in err
    (line,) = [line for line in err.splitlines() if line.startswith("error: ")]
    assert "the source's discover raised RuntimeError" in line and SECRET not in err and "****" in line


def test_discovers_output_given_to_read_names_the_catalog_command(tmp_path):
    (tmp_path / "discovered.json").write_text(json.dumps({"streams": [{"name": "users", "json_schema": {}}]}))
    with pytest.raises(InputError, match=r"python main.py catalog --config <config> --output <catalog>$"):
        load_catalog(str(tmp_path / "discovered.json"))
