"""README, "Running an existing Airbyte connector": ``python -m source_framework <connector> ...``
runs a published-style source unchanged, named either way:

- ``module:Class``: here ``connectors.concurrent_adapter:SourceShopConcurrent``, whose constructor
  requires ``(catalog, config, state)`` without defaults, as source-stripe's ``SourceStripe``;
  it is built as its ``run.py`` builds it (the files the command line names, None for the rest);
- ``manifest.yaml``: the declarative manifest of ``connectors.declarative_datetime``.

``spec``, ``check`` and ``discover`` run in this process (``source_framework.__main__.main``);
``read`` runs as the README's command, a process of its own landing records in Spark, whose tables
must hold exactly what airbyte-cdk's own ``read`` of the same connector emits.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import conformance_harness as harness
import pytest

from source_framework.__main__ import build_source, main
from source_framework.destinations.spark.destination import SparkDestination
from source_framework.runtime.destination_setup import default_namespace
from source_framework.testing import table_checks

FORMS = {
    "module:Class": ("connectors.concurrent_adapter:SourceShopConcurrent", "concurrent_adapter"),
    "manifest.yaml": (os.path.join("connectors", "manifests", "datetime_cursor.yaml"), "declarative_datetime"),
}


@pytest.fixture(scope="module")
def small_api():
    api = harness.ShopApi(records=40, api_key=harness.API_KEY, seed=harness.SEED, stores=harness.STORES).start()
    try:
        yield api
    finally:
        api.stop()


@pytest.fixture
def in_conformance_folder(monkeypatch):
    """Where a connector's files are found from (the manifest names its schemas relative to it)."""
    monkeypatch.chdir(harness.HERE)


def run_main(argv, capsys):
    returncode = main(argv)
    out = capsys.readouterr().out
    return returncode, [json.loads(line) for line in out.splitlines() if line.strip()]


@pytest.mark.parametrize("form", list(FORMS))
def test_python_m_source_framework_runs_a_connector_named_either_way(form, small_api, tmp_path, spark, capsys, in_conformance_folder):
    reference, style = FORMS[form]
    config = harness.source_config(small_api)
    catalog = harness.configured_catalog(style, config)
    warehouse = str(tmp_path / "warehouse")
    config_path, catalog_path = tmp_path / "config.json", tmp_path / "catalog.json"
    config_path.write_text(json.dumps({**config, "destination": {"type": "spark", "warehouse": warehouse, "spark_master": "local[1]"}}))
    catalog_path.write_text(json.dumps(catalog))

    returncode, messages = run_main([reference, "spec"], capsys)
    assert returncode == 0 and [m["spec"]["connectionSpecification"]["required"] for m in messages if m["type"] == "SPEC"]

    returncode, messages = run_main([reference, "check", "--config", str(config_path)], capsys)
    assert returncode == 0
    assert [m["connectionStatus"]["status"] for m in messages if m["type"] == "CONNECTION_STATUS"] == ["SUCCEEDED"]

    returncode, messages = run_main([reference, "discover", "--config", str(config_path)], capsys)
    assert returncode == 0
    (discovered,) = [m["catalog"] for m in messages if m["type"] == "CATALOG"]
    assert sorted(s["name"] for s in discovered["streams"]) == sorted(s["stream"]["name"] for s in catalog["streams"])

    command = [sys.executable, "-m", "source_framework", reference, "read", "--config", str(config_path), "--catalog", str(catalog_path)]
    process = subprocess.run(command, capture_output=True, text=True, cwd=harness.HERE, timeout=300)
    assert process.returncode == 0, process.stderr[-3000:]
    lines = [json.loads(line) for line in process.stdout.splitlines() if line.strip()]
    assert {m["type"] for m in lines} <= {"STATE", "TRACE", "LOG"}, "stdout carries protocol messages only"
    assert {m["state"]["stream"]["stream_descriptor"]["name"] for m in lines if m["type"] == "STATE"} == set(harness.infos(catalog))

    expected = harness.cdk_read(style, config, catalog)
    assert expected.ok() and expected.records(), expected.describe()
    source_name = default_namespace(build_source(reference, {"config": None, "catalog": None, "state": None}))
    tables = table_checks.read_tables(spark, SparkDestination(warehouse, default_namespace=source_name), harness.infos(catalog))
    harness.check_tables_equal_records(tables, expected, harness.infos(catalog))
