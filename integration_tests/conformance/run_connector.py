"""Run one conformance connector the way its ``run.py`` would, under either entrypoint.

    python run_connector.py STYLE ours read --config C --catalog K [--state S] [flags...]
    python run_connector.py STYLE cdk  read --config C --catalog K [--state S]

``ours`` hands the source to ``source_framework.launch`` (records land in Spark tables),
``cdk`` to ``airbyte_cdk.entrypoint.launch`` (records printed as RECORD messages). The
source is built as published connectors' ``run.py`` files build theirs: declarative ones get
the config, catalog and state read from the same files the command line names.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from typing import Any

from airbyte_cdk.sources.source import Source


def build(style: str, args: list[str]) -> Any:
    module = importlib.import_module(f"connectors.{style}")
    # Only the three files: airbyte-cdk's own extract_* refuse the flags only ours takes.
    files = argparse.ArgumentParser(add_help=False)
    for flag in ("--config", "--catalog", "--state"):
        files.add_argument(flag)
    named, _ = files.parse_known_args(args)
    return module.build_source(
        Source.read_config(named.config) if named.config else None,
        Source.read_catalog(named.catalog) if named.catalog else None,
        Source.read_state(named.state) if named.state else None,
    )


def main(argv: list[str]) -> None:
    style, entrypoint, args = argv[0], argv[1], argv[2:]
    source = build(style, args)
    if entrypoint == "cdk":
        from airbyte_cdk.entrypoint import launch

        launch(source, args)
    elif entrypoint == "ours":
        from source_framework import launch

        launch(source, args)
    else:
        raise SystemExit(f"unknown entrypoint {entrypoint!r}: cdk or ours")


if __name__ == "__main__":
    main(sys.argv[1:])
