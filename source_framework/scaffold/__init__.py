"""``python -m source_framework init NAME``: a connector project, made in a hidden folder and renamed so failures leave nothing."""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass

from source_framework.runtime.process import EXIT_BAD_INPUT, EXIT_FAILED, EXIT_OK

HERE = os.path.dirname(os.path.abspath(__file__))
TEMPLATE = os.path.join(HERE, "template")
DEMO_SCHEMAS = os.path.join(os.path.dirname(HERE), "demo", "schemas")
STREAMS = ("products", "users")
#: lowercase words joined by single '-' or '_': a folder, a module and a Docker image name alike
NAME_PATTERN = re.compile(r"[a-z][a-z0-9]*(?:[-_][a-z0-9]+)*")
MAX_NAME_LENGTH = 64


class ScaffoldError(Exception):
    """What ``init`` refuses or cannot do, said to the user as it is."""

    def __init__(self, message: str, exit_code: int = EXIT_BAD_INPUT) -> None:
        super().__init__(message)
        self.exit_code = exit_code


@dataclass(frozen=True)
class Names:
    name: str  # the folder and the Docker image: my-api
    module: str  # the source module: source_my_api
    source_class: str  # SourceMyApi
    source_name: str  # the tables' folder in the warehouse: my_api

    def replace_in(self, text: str) -> str:
        for key, value in vars(self).items():
            text = text.replace("{{" + key + "}}", value)
        return text


def names_for(name: str) -> Names:
    if not NAME_PATTERN.fullmatch(name) or len(name) > MAX_NAME_LENGTH:
        raise ScaffoldError(
            f"invalid connector name {name!r}: use lowercase letters and digits, starting with a letter, words "
            f"joined by a single '-' or '_', at most {MAX_NAME_LENGTH} characters (e.g. my-api or source-my-api)"
        )
    words = re.split(r"[-_]", name)
    if words[0] == "source" and len(words) > 1:
        words = words[1:]  # Airbyte's source-github is the github source
    source_name = "_".join(words)
    return Names(name, f"source_{source_name}", "Source" + "".join(w.capitalize() for w in words), source_name)


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m source_framework init",
        description="Write a new connector project in the folder NAME: main.py, a source with one full-refresh and "
        "one incremental stream, spec.json, schemas/, integration_tests/ and acceptance-test-config.yml.",
    )
    parser.add_argument("name", metavar="NAME", help="the connector's name and folder, e.g. my-api")
    options = parser.parse_args(argv)
    try:
        target = init(options.name, os.getcwd())
    except ScaffoldError as error:
        sys.stderr.write(f"error: {error}\n")
        return error.exit_code
    with open(os.path.join(target, "integration_tests", "config.json"), encoding="utf-8") as handle:
        key = json.load(handle)["api_key"]
    sys.stdout.write(
        f"made the {options.name} connector in {target}\n\n"
        f"Next, with the demo API running (python -m source_framework.demo.api --port 8000 --api-key {key}):\n"
        f"  cd {os.path.relpath(target)}\n"
        "  python main.py check --config integration_tests/config.json\n"
        "  python -m source_framework.testing      # its acceptance tests\n"
        "README.md there says how to make it read your API.\n"
    )
    return EXIT_OK


def init(name: str, parent: str) -> str:
    names = names_for(name)
    if importlib.util.find_spec(names.module) is not None:
        raise ScaffoldError(
            f"{names.module}.py would shadow the installed module {names.module} (the connector's imports would find "
            "one instead of the other): choose another name"
        )
    target = os.path.join(os.path.abspath(parent), name)
    _check_target(target)
    try:
        staging = tempfile.mkdtemp(prefix=f".{name}-init-", dir=os.path.dirname(target))
    except OSError as error:
        raise ScaffoldError(f"cannot write in {os.path.dirname(target)}: {error.strerror}", EXIT_FAILED) from None
    try:
        os.chmod(staging, 0o777 & ~_umask())  # mkdtemp's folder is private; the project is not
        _write_files(names, staging)
        _write_catalog(staging)
        os.rename(staging, target)  # replaces an empty folder, never a non-empty one
    except OSError as error:
        raise ScaffoldError(f"cannot write the new connector into {target}: {error}", EXIT_FAILED) from None
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return target


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def _check_target(target: str) -> None:
    if os.path.lexists(target) and not os.path.isdir(target):
        raise ScaffoldError(f"{target} exists and is not a folder: choose another name, or move it away")
    if os.path.isdir(target) and os.listdir(target):
        raise ScaffoldError(f"folder {target} exists and is not empty: init writes only into a new or empty folder")


def _write_files(names: Names, root: str) -> None:
    for folder, _, files in os.walk(TEMPLATE):
        relative = os.path.relpath(folder, TEMPLATE)
        os.makedirs(os.path.join(root, relative), exist_ok=True)
        for file in files:
            with open(os.path.join(folder, file), encoding="utf-8") as handle:
                text = names.replace_in(handle.read())
            with open(os.path.join(root, relative, _target_name(file, names)), "w", encoding="utf-8") as handle:
                handle.write(text)
    os.makedirs(os.path.join(root, "schemas"))
    for stream in STREAMS:
        shutil.copyfile(os.path.join(DEMO_SCHEMAS, f"{stream}.json"), os.path.join(root, "schemas", f"{stream}.json"))


def _target_name(file: str, names: Names) -> str:
    file = file.removesuffix(".tmpl")
    return {"gitignore": ".gitignore", "source.py": f"{names.module}.py"}.get(file, file)


def _write_catalog(root: str) -> None:
    """The configured catalog, made as a user makes it: the new ``main.py catalog``, in a process of its own."""
    try:
        process = subprocess.run(
            [sys.executable, "main.py", "catalog", "--config", os.path.join("integration_tests", "config.json"),
             "--output", os.path.join("integration_tests", "configured_catalog.json")],
            cwd=root, capture_output=True, text=True, env={**os.environ, "PYTHONDONTWRITEBYTECODE": "1"}, timeout=300,
        )
    except subprocess.TimeoutExpired:
        raise ScaffoldError("the new connector's main.py catalog did not end within 300 s", EXIT_FAILED) from None
    if process.returncode != 0:
        raise ScaffoldError(f"the new connector's main.py catalog failed:\n{process.stderr.strip()}", EXIT_FAILED)
