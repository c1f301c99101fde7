"""What ``read`` checks in a stream's state before printing it: JSON, under ``MAX_STATE_BYTES``, no config secret."""

from __future__ import annotations

import copy
import logging
from collections.abc import Mapping
from typing import Any

import orjson

from source_framework.runtime.inputs import MAX_STATE_BYTES
from source_framework.runtime.output import ProtocolOutput, to_json
from source_framework.runtime.resume import brief

logger = logging.getLogger("source_framework.read")

WARN_STATE_BYTES = 1024 * 1024


class StateRefused(Exception):
    """A state the runtime will not print: over the size limit, not JSON, or holding a secret."""


class StateCheck:
    """Refuses a stream's states that cannot be printed; warns once when one grows large."""

    def __init__(self, stream: str, output: ProtocolOutput) -> None:
        self.name = stream
        self.output = output  # its secrets are read at each check: the entrypoint may set them late
        self._warned_size = False

    def __call__(self, state: Mapping[str, Any], encoded: bytes | None) -> None:
        """Refuse a state that is not JSON, too large, or carries a config secret; ``encoded`` is its JSON if known."""
        if encoded is None:
            problem = json_problem(state)
            if problem:
                raise StateRefused(
                    f"stream '{self.name}': its state is not JSON-serialisable: {problem}. A stream's state must "
                    f"hold only objects, lists, strings, numbers, booleans and null (format date-times as strings)"
                )
            encoded = to_json(state)  # measured as the STATE line and the state file will hold it
        if len(encoded) > MAX_STATE_BYTES:
            raise StateRefused(
                f"stream '{self.name}': its state is {len(encoded) / 1e6:.1f} MB, over the "
                f"{MAX_STATE_BYTES // 2**20} MB limit (too many partitions or too large a cursor?)"
            )
        if len(encoded) > WARN_STATE_BYTES and not self._warned_size:
            self._warned_size = True
            logger.warning("stream %s: its state is %.1f MB; states over 10 MB are refused", self.name, len(encoded) / 1e6)
        if self.output.secrets.contains_secret(encoded.decode("utf-8", "replace")):
            raise StateRefused(f"stream '{self.name}': its state contains a secret value from the config; refusing to emit it")


def json_state(state: Any) -> tuple[dict[str, Any], bytes | None]:
    """A copy of ``state`` as its STATE line carries it (orjson, read back), and that JSON; None where orjson cannot
    write it, for ``json_problem`` to name."""
    try:
        encoded = orjson.dumps(state or {})
    except TypeError:
        return copy.deepcopy(dict(state or {})), None
    return dict(orjson.loads(encoded)), encoded


def json_problem(value: Any) -> str | None:
    """Where ``value`` holds something JSON cannot carry, or None; walks a stack so deep nesting is no RecursionError."""
    pending = [("state", value)]
    while pending:
        path, item = pending.pop()
        if item is None or isinstance(item, (str, bool, int)):
            continue
        if isinstance(item, float):
            if item != item or item in (float("inf"), float("-inf")):
                return f"{path} is {item}"
        elif isinstance(item, Mapping):
            for key, child in item.items():
                if not isinstance(key, str):
                    return f"{path} has the key {key!r}, which is not a string"
                pending.append((f"{path}.{key}", child))
        elif isinstance(item, (list, tuple)):
            pending.extend((f"{path}[{index}]", child) for index, child in enumerate(item))
        else:
            return f"{path} is a {type(item).__module__}.{type(item).__qualname__} ({brief(item, 60)})"
    return None
