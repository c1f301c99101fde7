"""Where tables live: names become safe folder names, reversibly, and never outside the warehouse."""

from __future__ import annotations

import os

import pytest

from source_framework.destinations.spark.layout import UnsafeTableName, decode_name, encode_name, table_path


@pytest.mark.parametrize(
    "name, folder",
    [
        ("users", "users"),
        ("store_orders-v2", "store_orders-v2"),
        ("a.b", "a.b"),
        ("..", "~2E."),
        (".", "~2E"),
        ("../../x", "~2E.~2F..~2Fx"),
        ("/etc", "~2Fetc"),
        ("my stream", "my~20stream"),
        ("50%", "50~25"),
        ("k=v", "k~3Dv"),
        ("~", "~7E"),
        ("café", "caf~C3~A9"),
        ("_hidden", "_hidden"),
    ],
)
def test_names_become_one_safe_folder_and_back(name, folder):
    assert encode_name(name) == folder
    assert decode_name(folder) == name
    assert "/" not in folder and folder not in (".", "..")


@pytest.mark.parametrize("bad", ["", None, "x" * 300])
def test_empty_or_too_long_names_are_refused(bad):
    with pytest.raises(UnsafeTableName):
        encode_name(bad)


def test_a_stream_named_dot_dot_stays_inside_the_warehouse(tmp_path):
    warehouse = tmp_path / "warehouse"
    path = table_path(str(warehouse), "demo", "..")
    assert os.path.dirname(path) == str(warehouse / "demo") and os.path.basename(path) == "~2E."
    assert table_path(str(warehouse), "..", "users") == str(warehouse / "~2E." / "users")
    assert table_path(str(warehouse), "demo", "/abs/path").startswith(str(warehouse) + os.sep)


def test_a_folder_linking_outside_the_warehouse_is_refused(tmp_path):
    warehouse, elsewhere = tmp_path / "warehouse", tmp_path / "elsewhere"
    (warehouse).mkdir()
    elsewhere.mkdir()
    os.symlink(elsewhere, warehouse / "demo")
    with pytest.raises(UnsafeTableName, match="outside the warehouse"):
        table_path(str(warehouse), "demo", "users")


def test_a_symlinked_warehouse_resolves_to_the_real_folder(tmp_path):
    real = tmp_path / "real"
    real.mkdir()
    os.symlink(real, tmp_path / "link")
    assert table_path(str(tmp_path / "link"), "demo", "users") == str(real / "demo" / "users")
