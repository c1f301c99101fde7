"""Run both acceptance suites against a connector from the shell.

::

    python -m source_framework.testing --connector main.py --acceptance-config acceptance-test-config.yml
    python -m source_framework.testing --connector my_pkg.source:MySource \\
        --acceptance-config path/to/acceptance-test-config.yml -- -x -k incremental

``--connector`` is an entrypoint script (calling ``source_framework.launch``) or ``module:Class``,
relative to the YAML's folder (a script path not there, relative to the current folder);
``--acceptance-config`` defaults to ``acceptance-test-config.yml`` in the current folder, else
beside the ``--connector`` script (``--connector my-api/main.py`` from the folder above it).
Everything after ``--`` goes to pytest. ``--only acceptance`` or
``--only standard`` runs one of the two suites. The exit code is pytest's.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import sys

from source_framework.runtime.process import EXIT_BAD_INPUT

ACCEPTANCE_YAML = "acceptance-test-config.yml"


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
    parser.add_argument(
        "--acceptance-config",
        help=f"the YAML file (default: {ACCEPTANCE_YAML} in the current folder, else beside the --connector script)",
    )
    parser.add_argument("--only", choices=["acceptance", "standard"], help="run one suite only")
    options = parser.parse_args(argv)

    config = os.path.abspath(options.acceptance_config or default_yaml(options.connector))
    if not os.path.isfile(config):
        parser.error(f"no acceptance test config at {config}")
    os.environ["SOURCE_FRAMEWORK_ACCEPTANCE_CONNECTOR"] = connector_from(options.connector, os.path.dirname(config))
    os.environ["SOURCE_FRAMEWORK_ACCEPTANCE_CONFIG"] = config
    # Located, not imported: pytest must import it after the environment is set.
    spec = importlib.util.find_spec("source_framework.testing.cli_suites")
    target = os.path.abspath(str(spec.origin if spec else ""))
    if options.only:
        target += "::" + ("TestAcceptance" if options.only == "acceptance" else "TestStandardSuite")
    folder = os.path.dirname(config)
    # Otherwise pytest takes settings from the folders above (the framework's pytest.ini in an editable install).
    args = ["-p", "no:cacheprovider", f"--rootdir={folder}", "-c", pytest_settings(folder), target, *pytest_args]
    return int(pytest.main(args))


def default_yaml(connector: str) -> str:
    if not os.path.isfile(ACCEPTANCE_YAML) and connector.endswith(".py") and os.path.isfile(connector):
        beside = os.path.join(os.path.dirname(connector), ACCEPTANCE_YAML)
        if os.path.isfile(beside):
            return beside
    return ACCEPTANCE_YAML


def connector_from(connector: str, yaml_folder: str) -> str:
    """A script path relative to the current folder (as a shell's are) made absolute; else ``connector`` as given."""
    is_path = connector.endswith(".py") or "/" in connector or os.sep in connector
    beside_yaml = os.path.isabs(connector) or os.path.isfile(os.path.join(yaml_folder, connector))
    return os.path.abspath(connector) if is_path and not beside_yaml and os.path.isfile(connector) else connector


def pytest_settings(folder: str) -> str:
    sections = {"pytest.ini": None, ".pytest.ini": None, "pyproject.toml": "[tool.pytest.ini_options]",
                "tox.ini": "[pytest]", "setup.cfg": "[tool:pytest]"}
    current = os.path.abspath(folder)
    while True:
        for name, section in sections.items():
            path = os.path.join(current, name)
            if os.path.isfile(path) and (section is None or _holds(path, section)):
                return path
        parent = os.path.dirname(current)
        if parent == current:
            return os.devnull
        current = parent


def _holds(path: str, section: str) -> bool:
    try:
        with open(path, encoding="utf-8", errors="replace") as handle:
            return any(line.strip() == section for line in handle)
    except OSError:
        return False


if __name__ == "__main__":
    sys.exit(main())
