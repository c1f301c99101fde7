"""Run both acceptance suites against a connector from the shell.

::

    python -m source_framework.testing --connector main.py --acceptance-config acceptance-test-config.yml
    python -m source_framework.testing --connector my_pkg.source:MySource \\
        --acceptance-config path/to/acceptance-test-config.yml -- -x -k incremental

``--connector`` is an entrypoint script (calling ``source_framework.launch``) or ``module:Class``,
relative to the YAML's folder; ``--acceptance-config`` defaults to ``acceptance-test-config.yml``
in the current folder. Everything after ``--`` goes to pytest. ``--only acceptance`` or
``--only standard`` runs one of the two suites. The exit code is pytest's.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import sys

from source_framework.runtime.process import EXIT_BAD_INPUT


def main(argv: list[str] | None = None) -> int:
    try:
        import pytest
    except ImportError:
        sys.stderr.write("error: the acceptance suites run with pytest: pip install 'source_framework[testing]'\n")
        return EXIT_BAD_INPUT
    argv = list(sys.argv[1:] if argv is None else argv)
    pytest_args: list[str] = []
    if "--" in argv:
        cut = argv.index("--")
        argv, pytest_args = argv[:cut], argv[cut + 1 :]
    parser = argparse.ArgumentParser(
        prog="python -m source_framework.testing", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--connector", default="main.py", help="entrypoint script or module:Class (default: main.py)")
    parser.add_argument("--acceptance-config", default="acceptance-test-config.yml", help="the YAML file")
    parser.add_argument("--only", choices=["acceptance", "standard"], help="run one suite only")
    options = parser.parse_args(argv)

    config = os.path.abspath(options.acceptance_config)
    if not os.path.isfile(config):
        parser.error(f"no acceptance test config at {config}")
    os.environ["SOURCE_FRAMEWORK_ACCEPTANCE_CONNECTOR"] = options.connector
    os.environ["SOURCE_FRAMEWORK_ACCEPTANCE_CONFIG"] = config
    # Located, not imported: pytest must import it after the environment is set.
    spec = importlib.util.find_spec("source_framework.testing.cli_suites")
    target = os.path.abspath(str(spec.origin if spec else ""))
    if options.only:
        target += "::" + ("TestAcceptance" if options.only == "acceptance" else "TestStandardSuite")
    args = ["-p", "no:cacheprovider", f"--rootdir={os.path.dirname(config)}", target, *pytest_args]
    return int(pytest.main(args))


if __name__ == "__main__":
    sys.exit(main())
