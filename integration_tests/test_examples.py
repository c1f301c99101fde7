"""The package docstring's and the README's connector example run as written.

The example is the first thing a new user copies: it must be the same in both places, run as a
script (``python users.py discover|read``), and land its records where the README says.
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import subprocess
import sys
import textwrap

import pytest

import source_framework
from integration_tests.conftest import ROOT, read_table
from source_framework.demo.api import DemoApi
from source_framework.testing import read

API_KEY = "secret"
CATALOG = {
    "streams": [
        {
            "stream": {"name": "users", "json_schema": {}, "supported_sync_modes": ["full_refresh", "incremental"]},
            "sync_mode": "incremental",
            "destination_sync_mode": "append",
            "cursor_field": ["updatedAt"],
        }
    ]
}


def docstring_example() -> str:
    block = source_framework.__doc__.split("saved as ``users.py``::\n\n", 1)[1].split("\n\nThen ", 1)[0]
    return textwrap.dedent(block).rstrip() + "\n"


def readme_example() -> str:
    with open(os.path.join(ROOT, "README.md"), encoding="utf-8") as handle:
        section = handle.read().split("## Writing a connector", 1)[1]
    return re.search(r"```python\n(.*?)```", section, re.S).group(1).rstrip() + "\n"


@pytest.fixture(scope="module")
def api_on_8000():
    """The demo API where the example expects it: 127.0.0.1:8000."""
    try:
        api = DemoApi(records=300, api_key=API_KEY, seed=3, port=8000).start()
    except OSError as error:
        pytest.fail(f"the example talks to 127.0.0.1:8000, which is taken on this machine: {error}")
    yield api
    api.stop()


@pytest.fixture
def users_script(tmp_path):
    path = tmp_path / "users.py"
    path.write_text(docstring_example())
    (tmp_path / "config.json").write_text(json.dumps({"api_key": API_KEY}))
    (tmp_path / "catalog.json").write_text(json.dumps(CATALOG))
    return path


def run_script(script, *args):
    return subprocess.run([sys.executable, str(script), *args], capture_output=True, cwd=script.parent, timeout=120)


def test_the_readme_shows_the_docstring_example():
    assert readme_example() == docstring_example()


def test_the_example_discovers_and_reads_as_a_script(api_on_8000, users_script):
    discover = run_script(users_script, "discover", "--config", "config.json")
    assert discover.returncode == 0, discover.stderr.decode()
    catalog = next(json.loads(line)["catalog"] for line in discover.stdout.splitlines() if b'"CATALOG"' in line)
    (users,) = catalog["streams"]
    assert users["name"] == "users" and set(users["json_schema"]["properties"]) >= {"id", "updatedAt"}

    run = run_script(users_script, "read", "--config", "config.json", "--catalog", "catalog.json", "--destination", "stdout")
    assert run.returncode == 0, run.stderr.decode()
    messages = [json.loads(line) for line in run.stdout.splitlines()]
    ids = sorted(m["record"]["data"]["id"] for m in messages if m["type"] == "RECORD")
    assert ids == list(range(1, 301))
    assert [m for m in messages if m["type"] == "STATE"][-1]["state"]["stream"]["stream_state"]["updatedAt"]


def test_the_example_lands_its_table_where_the_readme_says(spark, api_on_8000, users_script, tmp_path, monkeypatch):
    spec = importlib.util.spec_from_file_location("users_example", users_script)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    monkeypatch.chdir(tmp_path)  # the default warehouse is ./warehouse
    output = read(module.DemoUsers(), {"api_key": API_KEY}, CATALOG)
    assert output.returncode == 0, output.messages
    table = read_table(spark, str(tmp_path / "warehouse" / "demo_users" / "users"))
    assert sorted(row.id for row in table.select("id").collect()) == list(range(1, 301))


def test_a_script_stream_without_a_schema_gets_a_clear_error(tmp_path):
    code = docstring_example()
    code = re.sub(r"    json_schema = \{.*?\n    \}\n", "", code, flags=re.S)
    assert "json_schema" not in code
    script = tmp_path / "users.py"
    script.write_text(code)
    (tmp_path / "config.json").write_text(json.dumps({"api_key": API_KEY}))
    run = run_script(script, "discover", "--config", "config.json")
    assert run.returncode == 2
    error = run.stderr.decode()
    assert "stream 'users' has no JSON schema" in error and "schemas/users.json" in error
    assert "get_json_schema()" in error and "Traceback" not in error

    (tmp_path / "schemas").mkdir()
    (tmp_path / "schemas" / "users.json").write_text(json.dumps({"type": "object", "properties": {"id": {"type": "integer"}}}))
    run = run_script(script, "discover", "--config", "config.json")
    assert run.returncode == 0, run.stderr.decode()  # found beside the script
