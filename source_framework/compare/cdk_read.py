"""Run a connector script under airbyte-cdk's own entrypoint instead of ours.

::

    python -m source_framework.compare.cdk_read main.py read --config C --catalog K

A connector script ends with ``launch(MySource(), sys.argv[1:])``, ``launch`` being
``source_framework.launch``. Here that name is bound to ``airbyte_cdk.entrypoint.launch``
before the script runs, so the same source objects are read by the CDK's ``AbstractSource.read``
and print the CDK's own schedule of RECORD and STATE messages. The compare command uses it for
its reference rows; nothing of our runtime (checkpoints, Spark) is involved.
"""

from __future__ import annotations

import runpy
import sys
from typing import Any, List


def cdk_launch(source: Any, args: List[str]) -> None:
    from airbyte_cdk.entrypoint import launch

    launch(source, args)


def main(argv: List[str]) -> None:
    if not argv or argv[0].startswith("-"):
        sys.stderr.write("usage: python -m source_framework.compare.cdk_read SCRIPT read --config C --catalog K\n")
        sys.exit(2)
    import source_framework
    from source_framework.runtime import entrypoint

    # Scripts import the name from either place; rebind both before the script's import runs.
    source_framework.launch = cdk_launch
    entrypoint.launch = cdk_launch
    sys.argv = list(argv)
    runpy.run_path(argv[0], run_name="__main__")


if __name__ == "__main__":
    main(sys.argv[1:])
