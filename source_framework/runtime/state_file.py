"""A state file kept up to date by ``read --state-file``, and the ``state`` commands on it.

The file holds the per-stream list that ``read`` prints (and ``--state`` reads). ``read`` loads
it at start and rewrites it after every STATE line, atomically (write, fsync, rename), so a
killed run leaves either the old or the new file, never half of one::

    python main.py read --config c.json --catalog k.json --state-file state.json   # again and again
    python main.py state show  --state-file state.json
    python main.py state reset --state-file state.json --config c.json [--stream users] [--tables]
    python main.py state set   --state-file state.json --config c.json --stream users --cursor 2025-06-01T00:00:00Z
"""

from __future__ import annotations

import copy
import fcntl
import json
import logging
import os
import tempfile
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from typing import Any

from source_framework.runtime.inputs import InputError, load_state

logger = logging.getLogger("source_framework")


def write_json_atomically(path: str, content: Any) -> None:
    """Write ``content`` as compact JSON (one line): the size limit is on each stream's compact
    state (``inputs.load_state``), so a file written any wider could be refused by the next run.

    Text is written as UTF-8, except a lone surrogate (``"\\ud800"``: valid JSON, but no character
    UTF-8 can hold), which stays the JSON escape it came as; JSON text holds such a character only
    inside a string, where the escape reads back as the same string."""
    directory = os.path.dirname(os.path.abspath(path))
    os.makedirs(directory, exist_ok=True)
    handle, temporary = tempfile.mkstemp(prefix=".state-", suffix=".tmp", dir=directory)
    try:
        with os.fdopen(handle, "w", encoding="utf-8", errors="backslashreplace") as file:
            # dumps, not dump: dump encodes in pure Python, seconds for a state of a few MB
            file.write(json.dumps(content, separators=(",", ":"), sort_keys=True, ensure_ascii=False) + "\n")
            file.flush()
            os.fsync(file.fileno())
        os.replace(temporary, path)
    except BaseException:
        if os.path.exists(temporary):
            os.remove(temporary)
        raise


def state_message(name: str, namespace: str | None, stream_state: Mapping[str, Any]) -> dict[str, Any]:
    descriptor: dict[str, Any] = {"name": name}
    if namespace:
        descriptor["namespace"] = namespace
    return {"type": "STREAM", "stream": {"stream_descriptor": descriptor, "stream_state": dict(stream_state)}}


class StateFile:
    """``{stream: state}`` backed by a file in Airbyte's per-stream list form.

    Several commands may use one file at once (a cron ``read`` of some streams, a ``state reset``
    of another), so ``save`` writes only what this object changed since it loaded (or last saved)
    over what the file holds then, under a lock: a read that loaded the file before a reset does
    not write the reset stream's old state back with its next checkpoint."""

    def __init__(self, path: str, *, unreadable: bool = False) -> None:
        self.path = path
        self.states: dict[str, dict[str, Any]] = load_state(path) if os.path.exists(path) and not unreadable else {}
        self._saved = copy.deepcopy(self.states)  # what the file held of each stream, as far as we know
        self._namespaces: dict[str, str | None] = {}
        self._set_aside = unreadable

    @classmethod
    def replacing_unreadable(cls, path: str) -> StateFile:
        """An empty state for a file that cannot be read (``--on-bad-state resync``): the first
        ``save`` keeps the unreadable file as ``<file>.corrupt`` and starts a new one."""
        return cls(path, unreadable=True)

    def changed_on_disk(self, names: Iterable[str]) -> bool:
        """Whether another command changed the state of any of ``names`` in the file since it was
        loaded (an unreadable file being replaced counts as unchanged)."""
        if self._set_aside:
            return False
        with _locked(self.path):
            try:
                current = load_state(self.path) if os.path.exists(self.path) else {}
            except InputError:
                return True  # unreadable now: reading it again says why
        return any(current.get(name) != self._saved.get(name) for name in names)

    def update(self, name: str, namespace: str | None, stream_state: Mapping[str, Any]) -> None:
        self.states[name] = dict(stream_state)
        self._namespaces[name] = namespace
        self.save()

    def remove(self, name: str) -> None:
        self.states.pop(name, None)

    def save(self) -> None:
        with _locked(self.path):
            if self._set_aside and os.path.exists(self.path):
                os.replace(self.path, self.path + ".corrupt")
                logger.warning("the unreadable state file was kept as %s", self.path + ".corrupt")
            self._set_aside = False
            current = load_state(self.path) if os.path.exists(self.path) else {}
            for name in self._saved.keys() | self.states.keys():
                if name not in self.states:
                    current.pop(name, None)
                    self._saved.pop(name, None)
                elif self.states[name] != self._saved.get(name):
                    current[name] = self.states[name]
                    self._saved[name] = copy.deepcopy(self.states[name])
            write_json_atomically(self.path, self.messages(current))

    def messages(self, states: Mapping[str, Mapping[str, Any]] | None = None) -> list[dict[str, Any]]:
        states = self.states if states is None else states
        return [state_message(name, self._namespaces.get(name), value) for name, value in sorted(states.items())]


@contextmanager
def _locked(path: str) -> Iterator[None]:
    """Hold ``.<file name>.lock`` beside the state file (the kernel releases it if the process dies)."""
    directory, name = os.path.split(os.path.abspath(path))
    os.makedirs(directory, exist_ok=True)
    fd = os.open(os.path.join(directory, f".{name}.lock"), os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)
