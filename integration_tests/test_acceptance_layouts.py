"""The acceptance runner on the connector layouts the README shows, run as a user runs it.

``python -m source_framework.testing --connector main.py`` from the connector's folder: the
standard suite loads ``main.py`` in the test process, where ``__main__`` is the runner's module,
not the connector's. The spec and the schemas must still be found beside ``main.py`` (issue 51:
it looked for ``source_framework/testing/spec.json`` and failed 6 tests).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys

import pytest

from integration_tests.conftest import API_KEY, ROOT

TUTORIAL = os.path.join(ROOT, "examples", "orders_connector")

# spec, connection and discovery as in the README's "Your connector's", at the default strictness:
# these need no expected records, and the standard suite runs every one of them.
ACCEPTANCE_YAML = """\
connector_image: my-connector:dev
acceptance_tests:
  spec:
    tests:
      - spec_path: spec.json
        config_path: config.json
  connection:
    tests:
      - config_path: config.json
        status: succeed
  discovery:
    tests:
      - config_path: config.json
  basic_read:
    tests:
      - config_path: config.json
"""


def run_runner(folder: str) -> subprocess.CompletedProcess[str]:
    """The runner's standard suite, from the connector's folder, with the command's defaults."""
    return subprocess.run(
        [sys.executable, "-m", "source_framework.testing", "--connector", "main.py", "--only", "standard",
         "--", "-q", "-p", "no:warnings", "-p", "no:randomly", "-p", "no:xdist"],
        cwd=folder, capture_output=True, text=True, timeout=600,
    )


def assert_all_passed(process: subprocess.CompletedProcess[str]) -> None:
    output = process.stdout[-4000:] + process.stderr[-2000:]
    assert process.returncode == 0, output
    assert " passed" in process.stdout and "failed" not in process.stdout and "error" not in process.stdout, output


def test_the_tutorial_connector_with_its_spec_beside_main_py_passes_the_standard_suite(demo_api, tmp_path):
    """The tutorial's own files: ``Shop`` defined in ``main.py``, ``spec.json`` beside it."""
    folder = tmp_path / "orders_connector"
    folder.mkdir()
    for name in ("main.py", "spec.json", "orders.json"):
        shutil.copy(os.path.join(TUTORIAL, name), folder / name)
    config = {"api_url": demo_api.url, "api_key": API_KEY, "start_date": "2025-01-01T00:00:00Z"}
    (folder / "config.json").write_text(json.dumps(config))
    (folder / "acceptance-test-config.yml").write_text(ACCEPTANCE_YAML)
    assert_all_passed(run_runner(str(folder)))


README_USERS = '''\
import sys

import pytest

from source_framework import IncrementalHttpStream, Source, TokenAuthenticator, launch


class Users(IncrementalHttpStream):
    url_base = "{url}/"
    cursor_field = "updatedAt"
    primary_key = "id"
    records_path = "data"

    def path(self, **kwargs):
        return "users"

    def request_params(self, stream_state=None, next_page_token=None, **kwargs):
        since = (stream_state or {{}}).get("updatedAt", "2025-01-01T00:00:00Z")
        return {{"since": since, **(next_page_token or {{}})}}

    def next_page_token(self, response):
        token = response.json()["next_cursor"]
        return {{"cursor": token}} if token else None


class DemoUsers(Source):
    spec_json = {{
        "connectionSpecification": {{
            "type": "object",
            "required": ["api_key"],
            "properties": {{"api_key": {{"type": "string", "airbyte_secret": True}}}},
        }}
    }}

    def check_connection(self, logger, config):
        return True, None

    def streams(self, config):
        return [Users(authenticator=TokenAuthenticator(config["api_key"]))]


if __name__ == "__main__":
    launch(DemoUsers(), sys.argv[1:])
'''


def test_a_streams_schema_in_schemas_beside_main_py_is_found(demo_api, tmp_path):
    """The README's ``users.py`` as ``main.py``, its schema in ``schemas/users.json`` beside it (as
    the comment on ``json_schema`` offers) instead of inline; the spec stays on the class."""
    folder = tmp_path / "users_connector"
    (folder / "schemas").mkdir(parents=True)
    (folder / "main.py").write_text(README_USERS.format(url=demo_api.url))
    with open(os.path.join(ROOT, "source_framework", "demo", "schemas", "users.json"), encoding="utf-8") as handle:
        (folder / "schemas" / "users.json").write_text(handle.read())
    (folder / "config.json").write_text(json.dumps({"api_key": API_KEY}))
    (folder / "acceptance-test-config.yml").write_text(ACCEPTANCE_YAML)
    assert_all_passed(run_runner(str(folder)))


@pytest.mark.parametrize("yaml", [[], ["--acceptance-config", "tiny/acceptance-test-config.yml"]], ids=["default yaml", "yaml named"])
def test_the_runner_takes_a_connector_path_from_the_folder_it_is_run_in(yaml, tmp_path):
    """``--connector tiny/main.py`` from the folder above the connector: the script is found where
    the path says, and its YAML beside it (both were looked for only relative to the YAML, and
    the YAML only in the current folder)."""
    shutil.copytree(os.path.join(ROOT, "integration_tests", "tiny_connector"), tmp_path / "tiny")
    process = subprocess.run(
        [sys.executable, "-m", "source_framework.testing", "--connector", "tiny/main.py", *yaml,
         "--", "-q", "-p", "no:xdist", "-p", "no:warnings", "-k", "test_spec or test_check or test_future_state"],
        cwd=tmp_path, capture_output=True, text=True, timeout=300,
    )
    assert process.returncode == 0, process.stdout[-3000:] + process.stderr[-3000:]
    assert "4 passed" in process.stdout, process.stdout[-2000:]
