"""Papercuts a new user found (issue 51 item 9), each through the command line as a user meets it:
``read``, ``state show``, ``state set`` and ``tables`` of the demo connector run in this process
(``run_in_process``), and a declarative manifest read through ``python -m source_framework``'s
``build_source``."""

from __future__ import annotations

import json
import os

from airbyte_cdk.sources.declarative.yaml_declarative_source import YamlDeclarativeSource

from integration_tests.conftest import (
    API_KEY,
    ROOT,
    all_records,
    catalog,
    config_for,
    landed_rows,
    run_in_process,
    table_at,
    write_json,
)
from source_framework.__main__ import build_source
from source_framework.demo.api import DemoApi

FULL_REFRESH_NO_CURSOR = {"__ab_no_cursor_state_message": True}
FULL_REFRESH_COMPLETE = {"__ab_full_refresh_sync_complete": True}


def tables_in_process(*args, source=None):
    """``main.py tables args...`` in this process: (exit code, stdout, stderr)."""
    import contextlib
    import io

    from source_framework.demo.source import DemoSource
    from source_framework.runtime.entrypoint import build_parser, run_command

    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = run_command(source or DemoSource(), build_parser().parse_args(list(args)))
    return code, out.getvalue(), err.getvalue()


def saved_states(path):
    with open(path) as handle:
        return {m["stream"]["stream_descriptor"]["name"]: m["stream"]["stream_state"] for m in json.load(handle)}


def table_ids(spark, path):
    return sorted(row["id"] for row in landed_rows(spark, path))


# -- b. a catalog cursor_field the stream does not use -----------------------------------------


def test_a_catalog_cursor_field_the_source_defined_cursor_overrides_is_warned_about(spark, tmp_path):
    """The catalog names ``createdAt`` as the cursor of ``users``, whose cursor is source-defined
    (``updatedAt``): airbyte-cdk reads it on ``updatedAt`` whatever the catalog says, and so does
    ``read``, but nothing said so. A warning now names the stream and both fields, and the sync,
    resumed, still ends with each user once (the resume's boundary is the cursor the state holds)."""
    warehouse = tmp_path / "warehouse"
    state_file = str(tmp_path / "state.json")
    with DemoApi(records=300, api_key=API_KEY, seed=3).start() as api:
        config = write_json(tmp_path / "config.json", config_for(api, warehouse, state_checkpoint_interval=50))
        named_otherwise = write_json(tmp_path / "catalog.json", catalog("users", overrides={"users": {"cursor_field": ["createdAt"]}}))
        first = run_in_process("read", "--config", config, "--catalog", named_otherwise, "--state-file", state_file)
        assert first.returncode == 0, first.stderr
        warnings = [line for line in first.stderr.splitlines() if line.startswith("WARNING") and "createdAt" in line]
        assert len(warnings) == 1, first.stderr
        assert "users" in warnings[0] and "'updatedAt'" in warnings[0] and "source-defined" in warnings[0]
        assert set(saved_states(state_file)["users"]) == {"updatedAt"}

        again = run_in_process("read", "--config", config, "--catalog", named_otherwise, "--state-file", state_file)
        assert again.returncode == 0, again.stderr
        expected = sorted(record["id"] for record in all_records(api, "users"))
    assert table_ids(spark, os.path.join(str(warehouse), "demo", "users")) == expected

    # The catalog naming the stream's own cursor, or none: nothing to warn about.
    for number, overrides in enumerate(({"cursor_field": ["updatedAt"]}, {"cursor_field": []})):
        with DemoApi(records=20, api_key=API_KEY, seed=3).start() as api:
            config = write_json(tmp_path / "config.json", config_for(api, tmp_path / f"other{number}"))
            same = write_json(tmp_path / "same.json", catalog("users", overrides={"users": overrides}))
            run = run_in_process("read", "--config", config, "--catalog", same)
        assert run.returncode == 0, run.stderr
        assert not [line for line in run.stderr.splitlines() if line.startswith("WARNING")], run.stderr


# -- c. a full refresh's state, shown --------------------------------------------------------


def test_a_full_refresh_state_is_shown_as_words_and_kept_as_airbyte_cdk_writes_it(spark, tmp_path):
    """``state show`` printed ``{"__ab_no_cursor_state_message":true}`` for a full-refresh stream (and
    ``tables`` printed its last commit's state so): airbyte-cdk's marker, which says nothing to a
    person. Both say "full refresh" now; the STATE lines, the state file and ``tables --json`` keep
    airbyte-cdk's form, so that airbyte-cdk reads them back."""
    warehouse = tmp_path / "warehouse"
    state_file = str(tmp_path / "state.json")
    with DemoApi(records=100, api_key=API_KEY, seed=3).start() as api:
        config = write_json(tmp_path / "config.json", config_for(api, warehouse, page_size=20))
        two = write_json(tmp_path / "catalog.json", catalog("users", "products"))
        synced = run_in_process("read", "--config", config, "--catalog", two, "--state-file", state_file)
    assert synced.returncode == 0, synced.stderr
    on_disk = saved_states(state_file)
    assert on_disk["products"] == FULL_REFRESH_COMPLETE  # (the demo's products: airbyte-cdk's resumable full refresh)
    # A full refresh airbyte-cdk does not resume (a stream without pages) ends with the "no cursor" marker.
    with open(state_file) as handle:
        messages = json.load(handle)
    messages.append({"type": "STREAM", "stream": {"stream_descriptor": {"name": "stores"}, "stream_state": FULL_REFRESH_NO_CURSOR}})
    write_json(state_file, messages)
    with open(state_file, "rb") as handle:
        before = handle.read()

    shown = run_in_process("state", "show", "--state-file", state_file)
    assert shown.returncode == 0, shown.stderr
    lines = {line.split()[0]: line for line in shown.stderr.splitlines() if line.strip()}
    assert lines["stores"].split(None, 1)[1] == "(full refresh: no cursor)"
    assert lines["products"].split(None, 1)[1] == "(full refresh: complete, no cursor)"
    assert "updatedAt" in lines["users"]
    assert "__ab_" not in shown.stderr
    printed = {m["state"]["stream"]["stream_descriptor"]["name"]: m["state"]["stream"]["stream_state"] for m in shown.of_type("STATE")}
    assert printed["stores"] == FULL_REFRESH_NO_CURSOR and printed["products"] == FULL_REFRESH_COMPLETE
    with open(state_file, "rb") as handle:
        assert handle.read() == before

    code, text, errors = tables_in_process("tables", "--config", config, "--stream", "products")
    assert code == 0, errors
    state_line = next(line for line in text.splitlines() if line.strip().startswith("state "))
    assert state_line.split(None, 1)[1] == "(full refresh: complete, no cursor)"
    code, text, errors = tables_in_process("tables", "--config", config, "--stream", "products", "--json")
    assert code == 0, errors
    assert json.loads(text)["tables"][0]["state"] == FULL_REFRESH_COMPLETE


# -- f. state set says what it did -------------------------------------------------------------


def test_state_set_says_in_one_line_what_it_set(spark, tmp_path):
    """``state set`` said what it did in two log lines, neither with the state it wrote nor the
    table's commit that holds it. One line on stderr now says all three; stdout stays empty."""
    warehouse = tmp_path / "warehouse"
    state_file = str(tmp_path / "state.json")
    with DemoApi(records=200, api_key=API_KEY, seed=3).start() as api:
        config = write_json(tmp_path / "config.json", config_for(api, warehouse))
        synced = run_in_process("read", "--config", config, "--catalog", write_json(tmp_path / "catalog.json", catalog("users")),
                                "--state-file", state_file)
        assert synced.returncode == 0, synced.stderr
        cursor = sorted(record["updatedAt"] for record in all_records(api, "users"))[150]
    moved = run_in_process("state", "set", "--state-file", state_file, "--config", config, "--stream", "users", "--cursor", cursor)
    assert moved.returncode == 0, moved.stderr
    assert moved.stdout == b""
    said = [line for line in moved.stderr.splitlines() if "users" in line]
    assert len(said) == 1, moved.stderr
    new_state = json.dumps({"updatedAt": cursor}, separators=(",", ":"))
    assert new_state in said[0]
    assert saved_states(state_file)["users"] == {"updatedAt": cursor}
    last = table_at(spark, os.path.join(str(warehouse), "demo", "users")).last_checkpoint()
    assert last.state == {"updatedAt": cursor}
    assert f"commit #{last.seq}" in said[0] and f"Delta version {last.batch_id}" in said[0]  # (the default format)
    assert f"{last.rows} rows" in said[0] and os.path.join(str(warehouse), "demo", "users") in said[0]

    # With --no-table only the state file changes, and the line says so.
    only_file = run_in_process("state", "set", "--state-file", state_file, "--config", config, "--stream", "users",
                               "--cursor", "2025-01-01T00:00:00Z", "--no-table")
    assert only_file.returncode == 0, only_file.stderr
    said = [line for line in only_file.stderr.splitlines() if "users" in line]
    assert len(said) == 1 and '{"updatedAt":"2025-01-01T00:00:00Z"}' in said[0] and "--no-table" in said[0], only_file.stderr


# -- e. a manifest's tables under the manifest's name ------------------------------------------


MANIFEST = os.path.join(ROOT, "bench", "manifests", "orders.yaml")


def manifest_at(folder, name):
    """The benchmark's manifest of the demo API's orders at ``folder/name``, its schema naming the
    columns the test reads."""
    os.makedirs(folder, exist_ok=True)
    path = os.path.join(str(folder), name)
    with open(MANIFEST) as handle:
        text = handle.read()
    columns = "properties:\n          id: {type: integer}\n          updatedAt: {type: string}"
    assert text.count("properties: {}") == 1
    with open(path, "w") as handle:
        handle.write(text.replace("properties: {}", columns))
    return path


def manifest_catalog(tmp_path):
    return write_json(tmp_path / "orders-catalog.json", {"streams": [{
        "stream": {"name": "orders", "json_schema": {}, "supported_sync_modes": ["full_refresh", "incremental"]},
        "sync_mode": "incremental", "destination_sync_mode": "append", "cursor_field": ["updatedAt"]}]})


class YamlDeclarativeSourceOfBefore(YamlDeclarativeSource):
    """A manifest source as the runtime named it before: the CDK class's own name."""

    @property
    def name(self) -> str:
        return "YamlDeclarativeSource"


def test_a_manifests_tables_are_named_after_the_manifest_and_old_tables_are_still_found(spark, tmp_path):
    """A manifest read with ``python -m source_framework shop_orders.yaml read`` landed its tables
    under ``warehouse/YamlDeclarativeSource/``, the CDK class's name, the same for every manifest.
    They land under the manifest's name now (its folder's for airbyte's ``manifest.yaml``), and a
    table an earlier version wrote under the old name is found there by ``read``, ``tables`` and
    ``state``: synced on, never started again beside it."""
    warehouse = tmp_path / "warehouse"
    with DemoApi(records=300, api_key=API_KEY, seed=3).start() as api:
        config_dict = config_for(api, warehouse, concurrency_level=1)
        config = write_json(tmp_path / "config.json", config_dict)
        orders = manifest_catalog(tmp_path)
        expected = sorted(record["id"] for record in all_records(api, "orders"))

        named = manifest_at(tmp_path / "connectors", "shop_orders.yaml")
        run = run_in_process("read", "--config", config, "--catalog", orders, source=build_source(named, {"config": config_dict}))
        assert run.returncode == 0, run.stderr
        assert sorted(os.listdir(warehouse)) == ["shop_orders"]
        assert table_ids(spark, os.path.join(str(warehouse), "shop_orders", "orders")) == expected

        airbyte_layout = manifest_at(tmp_path / "source-shop-orders", "manifest.yaml")
        run = run_in_process("read", "--config", config, "--catalog", orders, source=build_source(airbyte_layout, {"config": config_dict}))
        assert run.returncode == 0, run.stderr
        assert sorted(os.listdir(warehouse)) == ["shop_orders", "source-shop-orders"]

        # A table written under the old name, then read on by this version: the same table, each order once.
        old = tmp_path / "old"
        old_config = config_for(api, old, concurrency_level=1)
        old_config_path = write_json(tmp_path / "old-config.json", old_config)
        state_file = str(tmp_path / "state.json")
        before = run_in_process("read", "--config", old_config_path, "--catalog", orders, "--state-file", state_file,
                                source=YamlDeclarativeSourceOfBefore(path_to_yaml=named, config=old_config))
        assert before.returncode == 0, before.stderr
        assert sorted(os.listdir(old)) == ["YamlDeclarativeSource"]
        old_table = os.path.join(str(old), "YamlDeclarativeSource", "orders")
        commits = len(list(table_at(spark, old_table).committed_checkpoints()))

        code, text, errors = tables_in_process("tables", "--config", old_config_path, "--json",
                                               source=build_source(named, {"config": old_config}))
        assert code == 0, errors
        assert json.loads(text)["tables"][0]["path"] == old_table and json.loads(text)["tables"][0]["exists"]

        after = run_in_process("read", "--config", old_config_path, "--catalog", orders, "--state-file", state_file,
                               source=build_source(named, {"config": old_config}))
        assert after.returncode == 0, after.stderr
        assert sorted(os.listdir(old)) == ["YamlDeclarativeSource"]
        assert table_ids(spark, old_table) == expected
        assert len(list(table_at(spark, old_table).committed_checkpoints())) > commits  # (it synced into it)
        assert old_table in after.stderr

        cursor = sorted(record["updatedAt"] for record in all_records(api, "orders"))[100]
        moved = run_in_process("state", "set", "--state-file", state_file, "--config", old_config_path, "--stream", "orders",
                               "--cursor", cursor, source=build_source(named, {"config": old_config}))
        assert moved.returncode == 0, moved.stderr
        assert sorted(os.listdir(old)) == ["YamlDeclarativeSource"]
        assert len(table_ids(spark, old_table)) == 100
