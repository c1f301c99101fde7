"""Run a connector script under airbyte-cdk's own entrypoint instead of ours.

::

    python -m source_framework.compare.cdk_read main.py read --config C --catalog K

A connector script ends with ``launch(MySource(), sys.argv[1:])``, ``launch`` being
``source_framework.launch``. Run through the entrypoint's ``run_script``, that call is handed to
``airbyte_cdk.entrypoint.launch`` instead, so the same source objects are read by the CDK's own
``read`` and print the CDK's own schedule of RECORD and STATE messages. The compare command uses
it for its reference rows; nothing of our runtime (checkpoints, Spark) is involved.
"""

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
