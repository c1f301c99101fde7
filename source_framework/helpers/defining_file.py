"""Where a class was defined: a script run as ``__main__`` by a tool leaves ``sys.modules`` pointing at the tool's module."""

from __future__ import annotations

import inspect
import os
import sys
from typing import Any


def defining_file(cls: type) -> str | None:
    """The source file that defines ``cls`` (via its module, else its functions' code), or None when it cannot be told."""
    module = sys.modules.get(cls.__module__)
    file = getattr(module, "__file__", None)
    if file and _holds(module, cls):
        return os.path.abspath(str(file))
    for value in vars(cls).values():
        code = getattr(_function_of(value), "__code__", None)
        filename = getattr(code, "co_filename", None)
        if filename and os.path.isfile(filename):
            return os.path.abspath(filename)
    # A class made in a function (type(), a factory) is not a module attribute, but the module is still its file.
    if file and cls.__module__ != "__main__":
        return os.path.abspath(str(file))
    return None


def defining_folder(cls: type) -> str | None:
    file = defining_file(cls)
    return os.path.dirname(file) if file else None


def top_package_folder(cls: type) -> str | None:
    """The folder of ``cls``'s top-level package, where airbyte-cdk looks for the spec and ``schemas/`` (None for ``__main__``)."""
    top = cls.__module__.split(".")[0]
    package = sys.modules.get(top)
    if package is None or not getattr(package, "__path__", None) or not getattr(package, "__file__", None):
        return None
    return os.path.dirname(os.path.abspath(str(package.__file__)))


def _holds(module: Any, cls: type) -> bool:
    target: Any = module
    for part in cls.__qualname__.split("."):
        target = getattr(target, part, None)
    return target is cls


def _function_of(value: Any) -> Any:
    if isinstance(value, (staticmethod, classmethod)):
        value = value.__func__
    elif isinstance(value, property):
        value = value.fget
    return inspect.unwrap(value) if callable(value) else value
