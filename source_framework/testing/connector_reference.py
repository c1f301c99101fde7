"""Point the acceptance tests at a connector: an entrypoint script or a ``module:Class``."""

from __future__ import annotations

import importlib
import os
import sys
from dataclasses import dataclass
from typing import Any

from source_framework.runtime.process import EXIT_BAD_INPUT


@dataclass(frozen=True)
class ConnectorReference:
    """A connector the tests run: ``script`` (absolute path) or ``target`` (``module:Class``)."""

    script: str | None = None
    target: str | None = None
    base_dir: str | None = None

    @classmethod
    def parse(cls, reference: str, base_dir: str | None = None) -> ConnectorReference:
        """``main.py`` / ``path/to/entry.py`` (relative to ``base_dir``) or ``module:Class``."""
        if not reference:
            raise ValueError("no connector given: pass a script path or module:Class")
        if reference.endswith(".py") or os.sep in reference or "/" in reference:
            path = reference if os.path.isabs(reference) else os.path.join(base_dir or os.getcwd(), reference)
            path = os.path.abspath(path)
            if not os.path.isfile(path):
                raise FileNotFoundError(f"connector script '{path}' does not exist")
            return cls(script=path)
        if ":" not in reference:
            raise ValueError(f"connector '{reference}' is neither a script path (*.py) nor module:Class")
        return cls(target=reference, base_dir=os.path.abspath(base_dir) if base_dir else None)

    def __str__(self) -> str:
        return self.script or self.target or "?"

    def command(self, *args: str) -> list[str]:
        if self.script:
            return [sys.executable, self.script, *args]
        return [sys.executable, "-m", "source_framework.testing.connector_reference", str(self.target), *args]

    @property
    def working_dir(self) -> str | None:
        """Where the subprocess runs: the script's folder (its imports may rely on it)."""
        return os.path.dirname(self.script) if self.script else self.base_dir

    def environment(self) -> dict[str, str]:
        if not self.base_dir:
            return {}
        return {"PYTHONPATH": os.pathsep.join(p for p in (self.base_dir, os.environ.get("PYTHONPATH")) if p)}

    def load_source(self) -> Any:
        if self.target:
            if self.base_dir and self.base_dir not in sys.path:
                sys.path.insert(0, self.base_dir)
            return _load_class(self.target)()
        return _capture_source_from_script(str(self.script))


def _load_class(target: str) -> Any:
    module_name, _, attribute = target.partition(":")
    module = importlib.import_module(module_name)
    try:
        return getattr(module, attribute)
    except AttributeError:
        raise ImportError(f"module '{module_name}' has no attribute '{attribute}'") from None


def _capture_source_from_script(script: str) -> Any:
    from source_framework.runtime.entrypoint import run_script

    captured: list[Any] = []
    run_script(script, [], lambda source, args: captured.append(source))
    if not captured:
        raise RuntimeError(f"'{script}' did not call source_framework.launch(source, argv) when run as __main__")
    return captured[0]


def main(argv: list[str]) -> None:
    """``python -m source_framework.testing.connector_reference module:Class <command> [args]``."""
    from source_framework import launch

    if not argv or ":" not in argv[0]:
        sys.stderr.write("usage: python -m source_framework.testing.connector_reference module:Class <command> [args]\n")
        sys.exit(EXIT_BAD_INPUT)
    launch(_load_class(argv[0])(), argv[1:])


if __name__ == "__main__":
    main(sys.argv[1:])
