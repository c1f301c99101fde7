"""Test runs only (``scripts/test.sh`` puts this folder on ``PYTHONPATH``): in every Python process the tests
start, ``inspect`` parses a module's source once for all the classes it looks up in it, not once per class.

Why: importing airbyte-cdk builds serpyco-rs serializers, which read the attribute docstrings of about a hundred
protocol classes through ``inspect.getsource``; on Python 3.11 each call parses the whole module again, a
quarter of a ``main.py`` process's start (Python 3.13 finds a class without parsing). What ``inspect`` answers
is unchanged: the same source gives the same tree, walked as its ``_ClassFinder`` walks it.
"""

import ast
import functools
import inspect
import sys
import types

if sys.version_info < (3, 13) and hasattr(inspect, "_ClassFinder") and hasattr(inspect, "ClassFoundException"):

    @functools.lru_cache(maxsize=8)
    def _parse(source, *args, **kwargs):
        return ast.parse(source, *args, **kwargs)

    @functools.lru_cache(maxsize=8)
    def _class_lines(tree):
        """Each class's qualified name in ``tree`` and the 0-based line ``inspect`` gives for it (its first
        decorator's, else its own), found in ``_ClassFinder``'s order: the first definition of a name wins."""
        found = {}

        def walk(node, stack):
            for child in ast.iter_child_nodes(node):
                if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    walk(child, [*stack, child.name, "<locals>"])
                elif isinstance(child, ast.ClassDef):
                    found.setdefault(".".join([*stack, child.name]), (child.decorator_list or [child])[0].lineno - 1)
                    walk(child, [*stack, child.name])
                else:
                    walk(child, stack)

        walk(tree, [])
        return found

    class _ClassFinder:
        def __init__(self, qualname):
            self.qualname = qualname

        def visit(self, tree):
            line = _class_lines(tree).get(self.qualname)
            if line is not None:
                raise inspect.ClassFoundException(line)

    inspect.ast = types.SimpleNamespace(**{**vars(ast), "parse": _parse})
    inspect._ClassFinder = _ClassFinder
