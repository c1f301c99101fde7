"""``python -m source_framework init NAME`` makes a connector that passes its own acceptance tests.

Everything runs as the user runs it, each in a process of its own: ``init`` in an empty folder,
the demo API the scaffold's README starts (on a free port, the config pointed at it), the
acceptance runner from the connector's folder with its defaults, and ``read``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections import Counter

import pytest

#: users the API serves: 4 checkpoints at the scaffold's interval of 500, so 3 reads from
#: intermediate STATEs; the expected records hold for any number.
USERS = 2000


def run(args: list[str], cwd, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, *args], cwd=cwd, capture_output=True, text=True, timeout=timeout)


@pytest.fixture
def shop(tmp_path):
    """``init shop`` in an empty folder, as a user runs it."""
    made = run(["-m", "source_framework", "init", "shop"], cwd=tmp_path)
    assert made.returncode == 0, made.stderr
    assert f"made the shop connector in {tmp_path / 'shop'}" in made.stdout
    return tmp_path / "shop"


@pytest.fixture
def api_for(tmp_path):
    """Start the demo API with the key a connector's config holds, and point its configs at it."""
    processes = []

    def start(connector) -> str:
        configs = connector / "integration_tests"
        key = json.loads((configs / "config.json").read_text())["api_key"]
        assert f"python -m source_framework.demo.api --port 8000 --api-key {key}" in (connector / "README.md").read_text()
        process = subprocess.Popen(
            [sys.executable, "-m", "source_framework.demo.api", "--port", "0", "--api-key", key, "--records", str(USERS)],
            cwd=tmp_path, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
        )
        processes.append(process)
        line = process.stderr.readline() if process.stderr else ""
        assert line.startswith("demo API listening on "), line
        url = line.split()[-1]
        for name in ("config.json", "invalid_config.json"):
            config = json.loads((configs / name).read_text())
            (configs / name).write_text(json.dumps({**config, "api_url": url}))
        return url

    yield start
    for process in processes:
        process.terminate()
        process.wait(timeout=30)


def test_init_writes_a_connector_project_whose_code_meets_the_repositorys_style(shop):
    files = sorted(str(path.relative_to(shop)) for path in shop.rglob("*") if path.is_file())
    assert files == [
        ".gitignore", "README.md", "acceptance-test-config.yml",
        "integration_tests/abnormal_state.json", "integration_tests/config.json",
        "integration_tests/configured_catalog.json", "integration_tests/expected_records.jsonl",
        "integration_tests/invalid_config.json", "integration_tests/test_acceptance.py",
        "main.py", "pytest.ini", "schemas/products.json", "schemas/users.json", "source_shop.py", "spec.json",
    ]
    for path in files:
        assert "{{" not in (shop / path).read_text(), f"{path} keeps a template placeholder"
    # The rules this repository holds itself to, from the connector's own folder (its modules first-party).
    style = run(["-m", "ruff", "check", "--isolated", "--select", "E,W,F,I,UP,B", "--line-length", "140", "."], cwd=shop)
    assert style.returncode == 0, style.stdout + style.stderr


def test_the_configured_catalog_is_the_one_main_py_catalog_makes_from_discover(shop):
    made = run(["main.py", "catalog", "--config", "integration_tests/config.json"], cwd=shop)
    assert made.returncode == 0, made.stderr
    shipped = json.loads((shop / "integration_tests" / "configured_catalog.json").read_text())
    assert json.loads(made.stdout) == shipped
    modes = {s["stream"]["name"]: (s["sync_mode"], s["destination_sync_mode"]) for s in shipped["streams"]}
    assert modes == {"products": ("full_refresh", "overwrite"), "users": ("incremental", "append")}


@pytest.mark.slow
def test_the_scaffold_passes_its_own_acceptance_tests_and_reads(shop, api_for):
    api_for(shop)
    # The runner as its README says: from the connector's folder, every default (main.py, the YAML there).
    tested = run(["-m", "source_framework.testing", "--", "-v", "-p", "no:randomly"], cwd=shop, timeout=1200)
    report = tested.stdout[-6000:] + tested.stderr[-3000:]
    assert tested.returncode == 0, report
    assert "warning" not in tested.stdout.splitlines()[-1], report  # nothing a newcomer must look into
    for test in ("test_spec", "test_check['config'", "test_check['invalid_config'", "test_discover['config'",
                 "test_basic_read['config'", "test_expected_records", "test_two_reads_are_identical",
                 "test_two_sequential_reads", "test_read_from_intermediate_state", "test_future_state",
                 "test_spark_tables_equal_records", "test_spark_rerun_adds_no_rows"):
        assert [line for line in tested.stdout.splitlines() if test in line and "PASSED" in line], f"{test} did not pass\n{report}"
    assert "SKIPPED" not in "".join(line for line in tested.stdout.splitlines() if "intermediate_state" in line), report

    # read, as the README's first sync: every record of both streams, the users checkpointed.
    read = run(["main.py", "read", "--config", "integration_tests/config.json",
                "--catalog", "integration_tests/configured_catalog.json", "--destination", "stdout"], cwd=shop)
    assert read.returncode == 0, read.stderr[-3000:]
    messages = [json.loads(line) for line in read.stdout.splitlines()]
    records = Counter(m["record"]["stream"] for m in messages if m["type"] == "RECORD")
    states = [m["state"]["stream"] for m in messages if m["type"] == "STATE"]
    assert records == {"users": USERS, "products": USERS // 10}
    users_states = [s["stream_state"] for s in states if s["stream_descriptor"]["name"] == "users"]
    assert len(users_states) == USERS // 500
    assert users_states[-1]["updatedAt"] == max(
        m["record"]["data"]["updatedAt"] for m in messages if m["type"] == "RECORD" and m["record"]["stream"] == "users"
    )

    # And its own test module, for python -m pytest integration_tests: both suites collected.
    collected = run(["-m", "pytest", "integration_tests", "--collect-only", "-q", "-p", "no:randomly"], cwd=shop)
    assert collected.returncode == 0, collected.stdout[-3000:]
    assert "TestStandardSuite" in collected.stdout and "TestAcceptance" in collected.stdout


def test_init_into_an_empty_folder_uses_it(tmp_path):
    (tmp_path / "shop").mkdir()
    made = run(["-m", "source_framework", "init", "shop"], cwd=tmp_path)
    assert made.returncode == 0, made.stderr
    assert (tmp_path / "shop" / "main.py").is_file()
    assert sorted(os.listdir(tmp_path)) == ["shop"]  # nothing left beside it


def test_init_refuses_a_folder_that_is_not_empty_with_a_non_zero_exit(tmp_path):
    (tmp_path / "shop").mkdir()
    (tmp_path / "shop" / "main.py").write_text("# mine\n")
    refused = run(["-m", "source_framework", "init", "shop"], cwd=tmp_path)
    assert refused.returncode == 2
    assert refused.stderr.startswith(f"error: folder {tmp_path / 'shop'} exists and is not empty")
    assert refused.stdout == ""
    assert (tmp_path / "shop" / "main.py").read_text() == "# mine\n"
    assert sorted(os.listdir(tmp_path)) == ["shop"]
    assert sorted(os.listdir(tmp_path / "shop")) == ["main.py"]


def test_init_says_how_to_call_it_when_the_name_is_invalid(tmp_path):
    refused = run(["-m", "source_framework", "init", "My Shop"], cwd=tmp_path)
    assert refused.returncode == 2
    assert "invalid connector name 'My Shop'" in refused.stderr
    assert os.listdir(tmp_path) == []
