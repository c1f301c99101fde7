"""Bad input: a clear error naming the file, a non-zero exit, and nothing written.

The commands run in this process (``run_in_process``: the same command line, checks and runtime); one
test runs ``main.py`` in a process of its own, for what only a real process shows (its exit code, no
traceback on its stderr).
"""

from __future__ import annotations

import json
import os

import pytest

from integration_tests.conftest import catalog, config_for, page_converters_of, run_in_process, run_main, write_json
from source_framework.demo.source import DemoSource

pytestmark = pytest.mark.slow  # many syncs and real processes: the quick tier (-m "not slow") leaves it out


@pytest.fixture
def files(tmp_path, demo_api):
    warehouse = tmp_path / "warehouse"
    return {
        "warehouse": warehouse,
        "config": write_json(tmp_path / "config.json", config_for(demo_api, warehouse)),
        "catalog": write_json(tmp_path / "catalog.json", catalog("users", "stores")),
        "tmp": tmp_path,
    }


def read_fails(files, *, config=None, catalog_path=None, state=None):
    args = ["read", "--config", config or files["config"], "--catalog", catalog_path or files["catalog"]]
    if state:
        args += ["--state", state]
    run = run_in_process(*args)
    assert run.returncode == 2, run.stderr
    assert not files["warehouse"].exists(), "bad input must not write anything"
    assert not run.of_type("STATE") and not run.of_type("RECORD")
    errors = [m["trace"]["error"] for m in run.of_type("TRACE") if m["trace"]["type"] == "ERROR"]
    assert errors and errors[0]["failure_type"] == "config_error"
    return run.stderr


def test_malformed_config(files):
    bad = files["tmp"] / "broken.json"
    bad.write_text('{"api_key": "x",')
    stderr = read_fails(files, config=str(bad))
    assert "config file" in stderr and "broken.json" in stderr and "not valid JSON" in stderr


def test_missing_config(files):
    stderr = read_fails(files, config=str(files["tmp"] / "absent.json"))
    assert "absent.json" in stderr and "does not exist" in stderr


def test_config_that_does_not_match_the_spec(files, demo_api):
    config = config_for(demo_api, files["warehouse"])
    config["page_size"] = "lots"
    stderr = read_fails(files, config=write_json(files["tmp"] / "typed.json", config))
    assert "page_size" in stderr or "lots" in stderr


def test_malformed_catalog(files):
    bad = files["tmp"] / "catalog_bad.json"
    bad.write_text("[]")
    stderr = read_fails(files, catalog_path=str(bad))
    assert "catalog_bad.json" in stderr and "streams" in stderr


def test_unknown_stream_in_catalog(files):
    entry = catalog("users")["streams"][0]
    entry["stream"]["name"] = "invoices"
    stderr = read_fails(files, catalog_path=write_json(files["tmp"] / "k.json", {"streams": [entry]}))
    assert "invoices" in stderr and "k.json" in stderr


def test_malformed_state(files):
    bad = files["tmp"] / "state_bad.json"
    bad.write_text("[{]")
    stderr = read_fails(files, state=str(bad))
    assert "state_bad.json" in stderr and "not valid JSON" in stderr


def test_state_of_the_wrong_shape_for_the_stream(files):
    state = write_json(files["tmp"] / "shape.json", {"users": {"states": [1, 2]}})
    stderr = read_fails(files, state=state)
    assert "users" in stderr and "updatedAt" in stderr


def test_cursor_that_cannot_be_parsed(files):
    state = write_json(files["tmp"] / "cursor.json", {"users": {"updatedAt": "yesterday-ish"}})
    stderr = read_fails(files, state=state)
    assert "yesterday-ish" in stderr and "cursor.json" in stderr


def test_a_warehouse_that_cannot_be_created_is_a_clear_error(files, demo_api):
    """A warehouse path through a regular file (or a folder this user cannot write) raised a bare
    NotADirectoryError from the table locks: a traceback, exit 1, no TRACE (found in review)."""
    blocker = files["tmp"] / "not-a-folder"
    blocker.write_text("")
    config = write_json(files["tmp"] / "config-bad-warehouse.json", config_for(demo_api, blocker / "warehouse"))
    run = run_main("read", "--config", config, "--catalog", files["catalog"])
    assert run.returncode == 2, run.stderr
    assert "Traceback" not in run.stderr
    errors = [m["trace"]["error"] for m in run.of_type("TRACE") if m["trace"]["type"] == "ERROR"]
    assert errors and errors[0]["failure_type"] == "config_error"
    assert "not-a-folder" in errors[0]["message"] and "warehouse" in errors[0]["message"]
    assert not run.of_type("STATE") and not run.of_type("RECORD")


@pytest.mark.skipif(not os.path.isdir("/proc/self"), reason="lists processes through /proc (Linux)")
def test_a_destination_section_that_is_not_valid_is_a_clear_error_and_leaves_no_converter_running(files, demo_api):
    """A read starts its first page converter as soon as it has read the config (so that the
    converter is ready by the first commit): a destination the config cannot make closes it again."""
    settings = config_for(demo_api, files["warehouse"])
    settings["destination"]["retention_hours"] = "a while"  # (the demo's spec leaves it free)
    config = write_json(files["tmp"] / "config-bad-destination.json", settings)
    before = page_converters_of(os.getpid())
    run = run_in_process("read", "--config", config, "--catalog", files["catalog"])
    assert run.returncode == 2, run.stderr
    errors = [m["trace"]["error"] for m in run.of_type("TRACE") if m["trace"]["type"] == "ERROR"]
    assert errors and errors[0]["failure_type"] == "config_error"
    assert "config-bad-destination.json" in errors[0]["message"] and "destination section" in errors[0]["message"]
    assert not files["warehouse"].exists(), "bad input must not write anything"
    assert page_converters_of(os.getpid()) == before


def test_a_misspelt_destination_key_is_refused_naming_it_and_what_was_meant(files, demo_api):
    """``warehose`` for ``warehouse``: left unsaid, the tables would land in the default warehouse."""
    settings = config_for(demo_api, files["warehouse"])
    settings["destination"]["warehose"] = str(files["tmp"] / "meant")
    del settings["destination"]["warehouse"]
    config = write_json(files["tmp"] / "config-typo.json", settings)
    stderr = read_fails(files, config=config)
    assert "config-typo.json" in stderr and "'warehose' (did you mean 'warehouse'?)" in stderr, stderr
    assert not (files["tmp"] / "meant").exists()


class FailsInStreams(DemoSource):
    """The demo connector, whose ``streams()`` fails: a source's own code failing in read's set-up."""

    def streams(self, config):
        raise RuntimeError("the source could not list its streams")


@pytest.mark.skipif(not os.path.isdir("/proc/self"), reason="lists processes through /proc (Linux)")
@pytest.mark.parametrize(("failure", "exit_code"), [
    ("unknown stream in the catalog", 2), ("malformed state", 2), ("source fails in streams()", 1),
])
def test_a_read_that_fails_after_the_converter_started_leaves_none_running(files, failure, exit_code):
    """The page converter starts before the catalog, the states and the streams are looked at: each
    of them failing ends the read before any record (bad input: exit code 2; the source's own code:
    1, as airbyte-cdk's system error), nothing written, and closes it."""
    catalog_path, more, source = files["catalog"], [], None
    if failure == "unknown stream in the catalog":
        entry = catalog("users")["streams"][0]
        entry["stream"]["name"] = "invoices"
        catalog_path = write_json(files["tmp"] / "unknown.json", {"streams": [entry]})
    elif failure == "malformed state":
        bad = files["tmp"] / "state_bad.json"
        bad.write_text("[{]")
        more = ["--state", str(bad)]
    else:
        source = FailsInStreams()
    before = page_converters_of(os.getpid())
    run = run_in_process("read", "--config", files["config"], "--catalog", catalog_path, *more, source=source)
    assert run.returncode == exit_code, run.stderr
    assert not run.of_type("STATE") and not run.of_type("RECORD")
    assert not files["warehouse"].exists(), "a read failing in its set-up must not write anything"
    assert page_converters_of(os.getpid()) == before


def test_a_stream_selected_twice_in_the_catalog_is_refused_before_anything_runs(files):
    """A declarative source's streams are synced at once: the two copies of one stream wrote to one
    table at the same time, and failed there ("seq 0 must be greater than the last committed seq 0")."""
    import yaml
    from airbyte_cdk.models import ConfiguredAirbyteCatalogSerializer
    from airbyte_cdk.sources.declarative.concurrent_declarative_source import ConcurrentDeclarativeSource

    connectors = os.path.join(os.path.dirname(os.path.abspath(__file__)), "conformance", "connectors")
    with open(os.path.join(connectors, "manifests", "datetime_cursor.yaml")) as handle:
        manifest = yaml.safe_load(handle)
    with open(os.path.join(connectors, "schemas", "users.json")) as handle:
        manifest["definitions"]["base_stream"]["schema_loader"] = {"type": "InlineSchemaLoader", "schema": json.load(handle)}
    entry = {"stream": {"name": "users", "json_schema": {}, "supported_sync_modes": ["full_refresh", "incremental"]},
             "sync_mode": "incremental", "destination_sync_mode": "append"}
    twice = {"streams": [entry, {**entry, "destination_sync_mode": "append_dedup", "primary_key": [["id"]]}]}
    catalog_path = write_json(files["tmp"] / "twice.json", twice)
    with open(files["config"]) as handle:
        config = json.load(handle)
    source = ConcurrentDeclarativeSource(catalog=ConfiguredAirbyteCatalogSerializer.load(twice), config=config, state=None,
                                         source_config=manifest)
    run = run_in_process("read", "--config", files["config"], "--catalog", catalog_path, "--concurrency", "2", source=source)
    assert run.returncode == 2, run.stderr
    assert not files["warehouse"].exists(), "bad input must not write anything"
    assert not run.of_type("STATE") and not run.of_type("RECORD")
    errors = [m["trace"]["error"] for m in run.of_type("TRACE") if m["trace"]["type"] == "ERROR"]
    assert errors and errors[0]["failure_type"] == "config_error"
    assert "twice.json" in errors[0]["message"] and "'users'" in errors[0]["message"], errors[0]["message"]


@pytest.mark.parametrize("uri", ["s3://bucket/wh", "s3a://bucket/wh", "gs://bucket/wh", "abfss://c@acct.dfs.core.windows.net/wh",
                                 "hdfs://namenode/wh"])
@pytest.mark.parametrize("given", ["flag", "config"])
def test_a_warehouse_uri_the_tables_cannot_reach_is_refused_and_nothing_is_written(files, demo_api, uri, given, monkeypatch):
    """``--warehouse s3://bucket/wh`` exited 0 having written a local folder named ``s3:`` in the
    working directory: the user believed the data was on S3 (issue 50)."""
    monkeypatch.chdir(files["tmp"])  # the working directory, where such a folder would appear
    config = config_for(demo_api, files["warehouse"])
    config["destination"]["table_format"] = "parquet"  # (S3 is reachable by Delta tables: test_object_store.py)
    args = []
    if given == "config":
        config["destination"]["warehouse"] = uri
    else:
        args = ["--warehouse", uri]
    config_path = write_json(files["tmp"] / "config-uri.json", config)
    before = sorted(os.listdir(files["tmp"]))
    for command in (["read", "--config", config_path, "--catalog", files["catalog"], *args],
                    ["state", "set", "--stream", "users", "--cursor", "2025-06-01T00:00:00Z",
                     "--state-file", str(files["tmp"] / "state.json"), "--config", config_path, *args]):
        run = run_in_process(*command)
        assert run.returncode == 2, run.stderr
        assert uri in run.stderr and "local or mounted folder" in run.stderr, run.stderr
        assert not run.of_type("STATE") and not run.of_type("RECORD")
        assert sorted(os.listdir(files["tmp"])) == before, "nothing written, no 's3:' folder"


def test_a_file_uri_warehouse_is_the_folder_it_names(files, demo_api):
    target = files["tmp"] / "by-uri"
    config = config_for(demo_api, files["warehouse"])
    config["destination"]["warehouse"] = f"file://{target}"
    run = run_in_process("read", "--config", write_json(files["tmp"] / "config-file-uri.json", config),
                         "--catalog", write_json(files["tmp"] / "stores.json", catalog("stores")))
    assert run.returncode == 0, run.stderr
    assert os.path.isdir(target / "demo" / "stores") and not os.path.exists(files["tmp"] / "file:")


def test_state_show_of_a_file_that_does_not_exist_is_an_error_naming_it(tmp_path):
    """``state show --state-file typo.json`` printed "no state" and exited 0 (issue 51): a mistyped
    name read as an empty state. An empty file that exists still shows "no state"."""
    missing = tmp_path / "typo.json"
    run = run_in_process("state", "show", "--state-file", str(missing))
    assert run.returncode == 2
    assert str(missing) in run.stderr and "does not exist" in run.stderr
    assert not run.of_type("STATE") and not missing.exists()
    empty = write_json(tmp_path / "empty.json", [])
    shown = run_in_process("state", "show", "--state-file", empty)
    assert shown.returncode == 0 and "no state" in shown.stderr
