"""``python -m source_framework init NAME`` refuses what it must, before it writes anything.

What it writes, and that it passes its own acceptance tests, is tested with real processes in
``integration_tests/test_scaffold_acceptance.py``.
"""

from __future__ import annotations

import pytest

from source_framework.__main__ import main as framework_main
from source_framework.runtime.process import EXIT_BAD_INPUT
from source_framework.scaffold import ScaffoldError, names_for


@pytest.mark.parametrize(
    "name",
    ["", "My-Api", "1api", "-api", "api-", "a--b", "a_-b", "a/b", "../x", ".", "..", "a b", "api.py", "x" * 65, "ünï"],
)
def test_an_invalid_name_is_refused_and_nothing_is_written(name, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    assert framework_main(["init", "--", name]) == EXIT_BAD_INPUT  # "--": "-api" is a name here, not a flag
    err = capsys.readouterr().err
    assert f"invalid connector name {name!r}" in err and "lowercase letters" in err
    assert list(tmp_path.iterdir()) == []


def test_a_name_whose_module_would_shadow_an_installed_one_is_refused(tmp_path, monkeypatch, capsys):
    """``framework`` would write ``source_framework.py`` beside ``main.py``: its own ``from
    source_framework import launch`` would then import that file instead of the framework."""
    monkeypatch.chdir(tmp_path)
    assert framework_main(["init", "framework"]) == EXIT_BAD_INPUT
    assert "source_framework.py would shadow the installed module source_framework" in capsys.readouterr().err
    assert list(tmp_path.iterdir()) == []


def test_an_existing_folder_that_is_not_empty_is_refused_and_left_as_it_was(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "shop").mkdir()
    (tmp_path / "shop" / "notes.txt").write_text("mine")
    assert framework_main(["init", "shop"]) == EXIT_BAD_INPUT
    assert f"folder {tmp_path / 'shop'} exists and is not empty" in capsys.readouterr().err
    assert [p.name for p in tmp_path.iterdir()] == ["shop"]  # no half-made project beside it
    assert [p.name for p in (tmp_path / "shop").iterdir()] == ["notes.txt"]
    assert (tmp_path / "shop" / "notes.txt").read_text() == "mine"


def test_a_file_of_that_name_is_refused(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "shop").write_text("a file")
    assert framework_main(["init", "shop"]) == EXIT_BAD_INPUT
    assert "exists and is not a folder" in capsys.readouterr().err


def test_init_without_a_name_says_how_to_call_it(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(SystemExit) as exited:
        framework_main(["init"])
    assert exited.value.code == EXIT_BAD_INPUT
    assert "usage: python -m source_framework init" in capsys.readouterr().err


@pytest.mark.parametrize(
    "name, module, source_class, source_name",
    [
        ("shop", "source_shop", "SourceShop", "shop"),
        ("source-shop", "source_shop", "SourceShop", "shop"),
        ("my_api2", "source_my_api2", "SourceMyApi2", "my_api2"),
        ("source", "source_source", "SourceSource", "source"),
    ],
)
def test_the_names_in_the_code_come_from_the_connectors_name(name, module, source_class, source_name):
    names = names_for(name)
    assert (names.module, names.source_class, names.source_name) == (module, source_class, source_name)


def test_names_for_says_why_a_name_is_invalid():
    with pytest.raises(ScaffoldError, match="invalid connector name 'A'"):
        names_for("A")
