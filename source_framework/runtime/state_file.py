"""A state file kept up to date by ``read --state-file``, and the ``state`` commands on it.

It is rewritten atomically after every STATE line, so a killed run leaves either the old or the new file.
"""

from __future__ import annotations

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


def _json_text(content: Any) -> bytes:
    """Compact sorted JSON as UTF-8: the size limit is on compact states, so a wider file could be refused next run."""
    # dumps, not dump: dump encodes in pure Python, far slower for a large state
    text = json.dumps(content, separators=(",", ":"), sort_keys=True, ensure_ascii=False)
    return text.encode("utf-8", errors="backslashreplace")


def write_atomically(path: str, data: bytes) -> tuple[int, ...]:
    """Replace ``path`` with ``data`` via a fsynced temporary file and a rename; returns the written file's identity."""
    directory = os.path.dirname(os.path.abspath(path))
    os.makedirs(directory, exist_ok=True)
    handle, temporary = tempfile.mkstemp(prefix=".state-", suffix=".tmp", dir=directory)
    try:
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(handle, view):]
            os.fsync(handle)
            written = _identity(os.fstat(handle))
        finally:
            os.close(handle)
        os.replace(temporary, path)
    except BaseException:
        if os.path.exists(temporary):
            os.remove(temporary)
        raise
    return written


def _identity(stat: os.stat_result) -> tuple[int, ...]:
    """A file as written: another writer's file differs in one of these."""
    return stat.st_dev, stat.st_ino, stat.st_size, stat.st_mtime_ns


def _identity_of(path: str) -> tuple[int, ...] | None:
    try:
        return _identity(os.stat(path))
    except FileNotFoundError:
        return None


def state_message(name: str, namespace: str | None, stream_state: Mapping[str, Any]) -> dict[str, Any]:
    descriptor: dict[str, Any] = {"name": name}
    if namespace:
        descriptor["namespace"] = namespace
    return {"type": "STREAM", "stream": {"stream_descriptor": descriptor, "stream_state": dict(stream_state)}}


def _message_text(name: str, namespace: str | None, state_text: bytes) -> bytes:
    descriptor: dict[str, Any] = {"name": name}
    if namespace:
        descriptor["namespace"] = namespace
    return b'{"stream":{"stream_descriptor":' + _json_text(descriptor) + b',"stream_state":' + state_text + b'},"type":"STREAM"}'


class StateFile:
    """``{stream: state}`` in a file of Airbyte's per-stream list form; ``save`` writes, under a lock, only what this
    object changed, so a read that loaded the file before a ``state reset`` does not write the old state back."""

    def __init__(self, path: str, *, unreadable: bool = False) -> None:
        self.path = path
        before = _identity_of(path)
        self.states: dict[str, dict[str, Any]] = load_state(path) if before is not None and not unreadable else {}
        #: each stream's state in JSON as the file holds it as far as we know, and the ``states`` object it came from
        self._saved = {name: _json_text(state) for name, state in self.states.items()}
        self._saved_from: dict[str, Any] = dict(self.states)
        self._namespaces: dict[str, str | None] = {}
        self._set_aside = unreadable
        #: the file as this object last read or wrote it: its identity, and each stream's message
        self._written: tuple[tuple[int, ...], dict[str, bytes]] | None = None
        if before is not None and not unreadable and _identity_of(path) == before:  # (not replaced while read)
            self._written = (before, {name: _message_text(name, None, text) for name, text in self._saved.items()})

    @classmethod
    def replacing_unreadable(cls, path: str) -> StateFile:
        """An empty state for an unreadable file (``--on-bad-state resync``); ``save`` keeps it as ``<file>.corrupt``."""
        return cls(path, unreadable=True)

    def changed_on_disk(self, names: Iterable[str]) -> bool:
        """Whether another command changed the state of any of ``names`` in the file since it was loaded."""
        if self._set_aside:
            return False
        with _locked(self.path):
            try:
                current = load_state(self.path) if os.path.exists(self.path) else {}
            except InputError:
                return True  # unreadable now: reading it again says why
        return any((_json_text(current[name]) if name in current else None) != self._saved.get(name) for name in names)

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
            messages = self._messages_on_disk()
            replaced = [name for name in self.states.keys() | self._saved_from.keys()
                        if self.states.get(name) is not self._saved_from.get(name)]
            for name in replaced:
                if name not in self.states:
                    messages.pop(name, None)
                    self._saved.pop(name, None)
                    self._saved_from.pop(name, None)
                    continue
                text = _json_text(self.states[name])
                if text != self._saved.get(name):
                    messages[name] = _message_text(name, self._namespaces.get(name), text)
                    self._saved[name] = text
                self._saved_from[name] = self.states[name]
            self._written = None
            written = write_atomically(self.path, b"[" + b",".join(messages[name] for name in sorted(messages)) + b"]\n")
            self._written = (written, messages)

    def _messages_on_disk(self) -> dict[str, bytes]:
        identity = _identity_of(self.path)
        if self._written is not None and self._written[0] == identity:
            return self._written[1]
        current = load_state(self.path) if identity is not None else {}
        return {name: _message_text(name, self._namespaces.get(name), _json_text(state)) for name, state in current.items()}

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
