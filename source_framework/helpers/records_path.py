"""Where a page's records are in its JSON body, read the same way by the stream and the page converter (which loads this file alone)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any


def records_path_keys(path: str | Sequence[str] | None) -> tuple[str, ...] | None:
    """``records_path`` as a tuple of keys (``"a.b"`` -> ``("a", "b")``, ``""`` -> ``()``); None where no path is set."""
    if path is None:
        return None
    if isinstance(path, str):
        return tuple(key for key in path.split(".") if key)
    return tuple(path)


def records_at(body: Any, path: Sequence[str]) -> list[Any]:
    """The records at ``path`` in a parsed body, as airbyte-cdk's ``DpathExtractor`` finds them; a ``TypeError`` if misshaped."""
    value = body
    for depth, key in enumerate(path):
        if not isinstance(value, Mapping):
            where = ".".join(path[:depth]) or "the body"
            raise TypeError(f"records_path {'.'.join(path)!r}: {where} is a JSON {_kind(value)}, not an object")
        value = value.get(key)
        if value is None:
            return []
    if isinstance(value, list):
        return value
    if isinstance(value, Mapping):
        return [value]
    raise TypeError(f"records_path {'.'.join(path)!r}: the value there is a JSON {_kind(value)}, not a list of records")


def _kind(value: Any) -> str:
    return {list: "array", str: "string", bool: "boolean", int: "number", float: "number"}.get(type(value), "value")
