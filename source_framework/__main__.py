"""Run an existing airbyte-cdk source on source_framework's runtime, unchanged.

::

    python -m source_framework manifest.yaml read --config config.json --catalog catalog.json --state state.json
    python -m source_framework source_github.source:SourceGithub read --config config.json --catalog catalog.json
"""

from __future__ import annotations

import importlib
import inspect
import os
import sys
from typing import Any

from source_framework.runtime.entrypoint import build_parser, run_command
from source_framework.runtime.inputs import InputError, load_catalog, load_config, load_state
from source_framework.runtime.process import EXIT_BAD_INPUT

USAGE = (
    "usage: python -m source_framework <manifest.yaml | module:SourceClass> <spec|check|discover|catalog|read|state|tables> [flags]\n"
    "       python -m source_framework init NAME"
)


def main(argv: list[str]) -> int:
    if argv[:1] in (["-h"], ["--help"]):
        sys.stderr.write(USAGE + "\n")
        return 0
    if argv[:1] == ["init"]:  # no connector is named "init": a reference has a ':' or ends in .yaml
        from source_framework.scaffold import main as init_main

        return init_main(argv[1:])
    if len(argv) < 2:
        sys.stderr.write(USAGE + "\n")
        return EXIT_BAD_INPUT
    parsed = build_parser().parse_args(argv[1:])
    try:
        source = build_source(argv[0], _inputs(parsed))
    except (InputError, ImportError, AttributeError, TypeError, FileNotFoundError) as error:
        sys.stderr.write(f"error: connector '{argv[0]}': {error}\n")
        return EXIT_BAD_INPUT
    return run_command(source, parsed)


def build_source(reference: str, inputs: dict[str, Any]) -> Any:
    """The source ``reference`` names, constructed with the ``inputs`` its constructor takes (as published ``run.py`` files pass them)."""
    if reference.endswith((".yaml", ".yml")):
        if not os.path.isfile(reference):
            raise FileNotFoundError(f"manifest file '{reference}' does not exist")
        from airbyte_cdk.sources.declarative.yaml_declarative_source import YamlDeclarativeSource

        return YamlDeclarativeSource(path_to_yaml=reference, **inputs)
    module_name, _, class_name = reference.partition(":")
    if not class_name:
        raise InputError("name a manifest (.yaml) or a source class as module:Class")
    if os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())
    source_class = getattr(importlib.import_module(module_name), class_name)
    accepted = inspect.signature(source_class).parameters
    return source_class(**{name: value for name, value in inputs.items() if name in accepted})


def _inputs(parsed: Any) -> dict[str, Any]:
    """``config``, ``catalog`` and ``state`` from the command line's files, each None where none is named."""
    config_path: str | None = getattr(parsed, "config", None)
    catalog_path: str | None = getattr(parsed, "catalog", None)
    state_path: str | None = getattr(parsed, "state", None) or getattr(parsed, "state_file", None)
    has_state = parsed.command == "read" and state_path is not None and os.path.exists(state_path)
    return {
        "config": load_config(config_path) if config_path else None,
        "catalog": load_catalog(catalog_path) if catalog_path else None,
        "state": _state_messages(load_state(state_path)) if has_state and state_path else None,
    }


def _state_messages(states: dict[str, Any]) -> list[Any]:
    from airbyte_cdk.models import AirbyteStateMessageSerializer

    return [
        AirbyteStateMessageSerializer.load(
            {"type": "STREAM", "stream": {"stream_descriptor": {"name": name}, "stream_state": value}}
        )
        for name, value in states.items()
    ]


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
