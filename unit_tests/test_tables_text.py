"""The text ``main.py tables`` prints for each kind of entry (``runtime/tables_command.py``); the
report itself is checked against real tables in ``integration_tests/test_tables_command.py``."""

from __future__ import annotations

from source_framework.runtime.tables_command import STATE_SHOWN, as_text


def report(*tables):
    return {"warehouse": "/w", "source": "demo", "tables": list(tables)}


def table(name, **changes):
    entry = {
        "stream": name, "namespace": "demo", "path": f"/w/demo/{name}", "exists": True, "format": "delta", "rows": 12,
        "last_commit": {"seq": 3, "committed_at": "2026-01-02T03:04:05.000000Z", "delta_version": 4, "rows": 5, "replace": False},
        "state": {"updatedAt": "2025-06-01T00:00:00Z"}, "pending_reset": False,
        "schema": [{"name": "id", "type": "bigint"}, {"name": "tags", "type": "string (JSON text)"}],
        "values_stored_as_null": {}, "undeclared_fields": {},
    }
    entry.update(changes)
    return entry


def test_a_table_shows_its_rows_last_commit_state_and_schema():
    assert as_text(report(table("users"))) == (
        "warehouse /w (source demo)\n\n"
        "users: Delta table /w/demo/users\n"
        "  rows         12\n"
        "  last commit  #3 at 2026-01-02T03:04:05.000000Z (Delta version 4): 5 rows added\n"
        '  state        {"updatedAt":"2025-06-01T00:00:00Z"}\n'
        "  schema       2 columns\n"
        "    id    bigint\n"
        "    tags  string (JSON text)\n"
    )


def test_each_other_case_says_what_it_is():
    commit = {"seq": 0, "committed_at": "t", "log_batch": 9, "rows": 10, "replace": True}
    text = as_text(report(
        table("stores", format="parquet", last_commit=commit, state={"big": "x" * STATE_SHOWN}, pending_reset=True),
        table("fresh", last_commit=None, state=None, rows=0, schema=[]),
        {"stream": "products", "namespace": "demo", "path": "/w/demo/products", "exists": False},
        {"stream": "x", "namespace": "other", "path": "/w/other/x", "exists": True, "format": "parquet", "error": "ValueError: cut"},
        {"stream": "../y", "namespace": "demo", "error": "UnsafeTableName: outside"},
    ))
    assert "stores: Parquet folder (Spark file sink) /w/demo/stores\n" in text
    assert "  last commit  #0 at t (log batch 9): 10 rows, replacing the table's rows\n" in text
    assert f"... ({STATE_SHOWN + 10} characters; --json shows it whole)\n" in text
    assert "  reset        pending: the stream's next sync from an empty state replaces this table\n" in text
    assert "fresh: Delta table /w/demo/fresh\n  rows         0\n  last commit  none yet (no sync has committed to it)\n" in text
    assert "products: no table (read would write it at /w/demo/products)\n" in text
    assert "other/x: Parquet folder (Spark file sink) /w/other/x\n  error        ValueError: cut\n" in text
    assert "../y: cannot be looked at: UnsafeTableName: outside\n" in text


def test_values_stored_as_null_and_undeclared_fields_are_said_per_field():
    misfits = {"age": {"values": 3, "first_reason": 'expected integer, got string "n/a"'}, "tags": {"values": 1, "first_reason": ""}}
    text = as_text(report(table("users", values_stored_as_null=misfits, undeclared_fields={"nickname": 120})))
    assert text.endswith(
        "    tags  string (JSON text)\n"
        '  misfits      age: 3 values stored as null (expected integer, got string "n/a")\n'
        "               tags: 1 values stored as null\n"
        "               nickname: in 120 rows, not in the schema (no column)\n"
        "               (each row's _sf_meta names them)\n"
    )
    assert "misfits" not in as_text(report(table("users")))  # none: no line
