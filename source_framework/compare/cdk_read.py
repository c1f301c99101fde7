"""Run a connector script under airbyte-cdk's own entrypoint, for the compare command's reference rows."""

from __future__ import annotations

import sys

from source_framework.runtime.process import EXIT_BAD_INPUT


def main(argv: list[str]) -> None:
    if not argv or argv[0].startswith("-"):
        sys.stderr.write("usage: python -m source_framework.compare.cdk_read SCRIPT read --config C --catalog K\n")
        sys.exit(EXIT_BAD_INPUT)
    from airbyte_cdk.entrypoint import launch as cdk_launch

    from source_framework.runtime.entrypoint import run_script

    run_script(argv[0], argv[1:], cdk_launch)


if __name__ == "__main__":
    main(sys.argv[1:])
