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


def test_finishing_a_cut_short_deletion_touches_only_that_tables_folders_moved_aside(tmp_path):
    """A table ``delete_table`` moved aside is ``.<table>.deleted-<32 hex>``. Anything else that starts
    so (the lock file of a stream named ``a.deleted-x``: ``.a.deleted-x.lock``) is not one: taking it
    for one failed every open of stream ``a`` with NotADirectoryError (found in review)."""
    import uuid

    from source_framework.destinations.spark.destination import _remove_deleted_leftovers

    table = tmp_path / "a"
    aside = tmp_path / f".a.deleted-{uuid.uuid4().hex}"
    (aside / "_checkpoints").mkdir(parents=True)
    (aside / "_checkpoints" / "00000000.json").write_text("{}")
    other_lock = tmp_path / ".a.deleted-x.lock"
    other_lock.write_text("")
    _remove_deleted_leftovers(str(table))
    assert not aside.exists()
    assert other_lock.exists()


def test_a_name_is_refused_with_a_clear_error_unless_every_file_beside_its_folder_fits():
    """Names of 250-255 bytes passed, then the table's lock file (``.<name>.lock``) or a deletion's
    folder moved aside (``.<name>.deleted-<32 hex>``) failed with a bare ENAMETOOLONG; a lone
    surrogate (valid JSON) failed with UnicodeEncodeError (found in review)."""
    import uuid

    longest = encode_name("n" * 213)
    assert len(f".{longest}.deleted-{uuid.uuid4().hex}".encode()) <= 255
    for name in ("n" * 214, "n" * 250, "a\ud800"):
        with pytest.raises(UnsafeTableName):
            encode_name(name)


# -- object stores (issue 50) ---------------------------------------------------------------------


def test_an_s3_warehouse_is_a_uri_and_its_tables_are_keys_under_it():
    from source_framework.destinations.spark.layout import is_object_store, table_path, warehouse_for

    for given in ("s3://bucket/wh", "s3://bucket/wh/", "S3://bucket/wh"):
        location = warehouse_for(given, "delta")
        assert location == "s3://bucket/wh" and is_object_store(location)
    assert warehouse_for("s3a://bucket", "delta") == "s3a://bucket"
    assert table_path("s3://bucket/wh", "demo", "a/b") == "s3://bucket/wh/demo/a~2Fb"
    assert table_path("s3://bucket/wh", "demo", "..") == "s3://bucket/wh/demo/~2E."


@pytest.mark.parametrize(("warehouse", "table_format", "says"), [
    ("s3://bucket/wh", "parquet", "table_format: delta"),
    ("s3://", "delta", "names no bucket"),
    ("gs://bucket/wh", "delta", "not installed"),
    ("hdfs://namenode/wh", "delta", "local or mounted folder"),
])  # fmt: skip
def test_a_warehouse_no_writer_reaches_is_refused_saying_what_would(warehouse, table_format, says):
    from source_framework.destinations.spark.layout import warehouse_for

    with pytest.raises(ValueError, match=says):
        warehouse_for(warehouse, table_format)
