"""Where a ``Source`` finds its spec and an ``IncrementalHttpStream`` its schema: beside the file
that defines the class, whoever runs it, and where airbyte-cdk looks (``spec.yaml`` too)."""

from __future__ import annotations

import importlib
import json
import logging
import sys
import textwrap

import pytest

from source_framework.helpers.defining_file import defining_file
from source_framework.runtime.entrypoint import run_script

LOGGER = logging.getLogger("test")

SCRIPT = """\
import sys

from source_framework import IncrementalHttpStream, Source, launch


class Things(IncrementalHttpStream):
    url_base = "http://127.0.0.1:1/"
    cursor_field = "n"
    primary_key = None

    def path(self, **kwargs):
        return "things"

    def next_page_token(self, response):
        return None


class Mine(Source):
    def check_connection(self, logger, config):
        return True, None

    def streams(self, config):
        return [Things()]


if __name__ == "__main__":
    launch(Mine(), sys.argv[1:])
"""

SPEC = {"connectionSpecification": {"type": "object", "properties": {"key": {"type": "string"}}}}
SPEC_YAML = "connectionSpecification:\n  type: object\n  properties:\n    key:\n      type: string\n"


def loaded_by_a_tool(folder):
    """The source and its stream as the acceptance runner loads a script: run as ``__main__``,
    after which ``sys.modules["__main__"]`` is the tool's own module again."""
    captured = []
    run_script(str(folder / "main.py"), [], lambda source, args: captured.append(source))
    [source] = captured
    return source


def test_a_script_run_by_a_tool_finds_its_spec_and_schemas_beside_it(tmp_path):
    (tmp_path / "main.py").write_text(SCRIPT)
    (tmp_path / "spec.json").write_text(json.dumps(SPEC))
    (tmp_path / "schemas").mkdir()
    (tmp_path / "schemas" / "things.json").write_text('{"type": "object", "properties": {"n": {"type": "integer"}}}')
    source = loaded_by_a_tool(tmp_path)
    assert sys.modules["__main__"].__dict__.get("Mine") is not type(source)  # the tool's __main__, not the script
    assert defining_file(type(source)) == str(tmp_path / "main.py")
    assert source.spec(LOGGER).connectionSpecification == SPEC["connectionSpecification"]
    [stream] = source.streams({})
    assert stream.get_json_schema()["properties"] == {"n": {"type": "integer"}}


def test_spec_yaml_is_read_as_airbyte_cdk_reads_it_and_both_files_are_refused(tmp_path):
    (tmp_path / "main.py").write_text(SCRIPT)
    (tmp_path / "spec.yaml").write_text(SPEC_YAML)
    source = loaded_by_a_tool(tmp_path)
    assert source.spec(LOGGER).connectionSpecification == SPEC["connectionSpecification"]
    (tmp_path / "spec.json").write_text("{}")
    with pytest.raises(RuntimeError, match=r"both .*spec.json and .*spec.yaml exist; keep one"):
        source.spec(LOGGER)


def test_no_spec_says_where_it_looked(tmp_path):
    (tmp_path / "main.py").write_text(SCRIPT)
    with pytest.raises(FileNotFoundError, match=rf"looked for {tmp_path}/spec.json or spec.yaml;.*set spec_json"):
        loaded_by_a_tool(tmp_path).spec(LOGGER)


def test_a_source_deep_in_a_package_finds_the_spec_at_the_packages_top_as_airbyte_cdk_does(tmp_path, monkeypatch):
    package = tmp_path / "source_deep"
    (package / "sources").mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "sources" / "__init__.py").write_text("")
    (package / "sources" / "source.py").write_text(textwrap.dedent(SCRIPT.split("if __name__")[0]))
    (package / "spec.yaml").write_text(SPEC_YAML)
    monkeypatch.syspath_prepend(str(tmp_path))
    try:
        source = importlib.import_module("source_deep.sources.source").Mine()
        assert source.spec(LOGGER).connectionSpecification == SPEC["connectionSpecification"]
    finally:
        for name in [m for m in sys.modules if m.startswith("source_deep")]:
            del sys.modules[name]
