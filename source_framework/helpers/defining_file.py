"""Where a class was defined: the folder its spec and schemas sit beside.

``sys.modules[cls.__module__]`` is not always the module that defined ``cls``. A connector script
run by a tool (the acceptance runner's ``run_script``: ``runpy.run_path(..., run_name="__main__")``)
defines its classes in ``__main__``, and once the script has run, ``sys.modules["__main__"]`` is
the tool's own module again: the spec was looked for in ``source_framework/testing/`` (issue 51).
"""

from __future__ import annotations

import inspect
import os
import sys
from typing import Any


def defining_file(cls: type) -> str | None:
    """The source file that defines ``cls``, or None when it cannot be told.

    The module named by ``cls.__module__`` when it still holds ``cls`` under its qualified name;
    else the file the class body's own functions were compiled from (a class in a script that
    ran as ``__main__``, or in a module executed without being registered in ``sys.modules``);
    else that module's file, unless it is ``__main__``.
    """
    module = sys.modules.get(cls.__module__)
    file = getattr(module, "__file__", None)
    if file and _holds(module, cls):
        return os.path.abspath(str(file))
    for value in vars(cls).values():
        code = getattr(_function_of(value), "__code__", None)
        filename = getattr(code, "co_filename", None)
        if filename and os.path.isfile(filename):
            return os.path.abspath(filename)
    # A class made in a function of its module (type(), a factory) is not one of its attributes,
    # but the module is still its file; a tool's __main__ never is.
    if file and cls.__module__ != "__main__":
        return os.path.abspath(str(file))
    return None


def defining_folder(cls: type) -> str | None:
    """The folder of ``defining_file(cls)``."""
    file = defining_file(cls)
    return os.path.dirname(file) if file else None


def top_package_folder(cls: type) -> str | None:
    """The folder of the top-level package of ``cls``'s module, where airbyte-cdk looks for
    ``spec.yaml``/``spec.json`` and ``schemas/`` (None for a plain module or ``__main__``)."""
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
    """The plain function behind a method, static or class method, or property getter (behind
    its decorators' wrappers, which may come from another file)."""
    if isinstance(value, (staticmethod, classmethod)):
        value = value.__func__
    elif isinstance(value, property):
        value = value.fget
    return inspect.unwrap(value) if callable(value) else value
