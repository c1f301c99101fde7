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
    """Compact JSON, keys sorted, as UTF-8. Compact: the size limit is on each stream's compact
    state (``inputs.load_state``), so a file written any wider could be refused by the next run.
    A lone surrogate (``"\\ud800"``: valid JSON, but no character UTF-8 can hold) stays the JSON
    escape it came as; JSON text holds such a character only inside a string, where the escape
    reads back as the same string."""
    # dumps, not dump: dump encodes in pure Python, seconds for a state of a few MB
    text = json.dumps(content, separators=(",", ":"), sort_keys=True, ensure_ascii=False)
    return text.encode("utf-8", errors="backslashreplace")


def write_atomically(path: str, data: bytes) -> tuple[int, ...]:
    """Replace ``path`` with ``data``: written to a temporary file, fsynced, renamed over it, so the
    file is always a whole one. Returns what identifies the file written (``_identity``)."""
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
    """A file as written: another writer's file (a new one renamed over it, or it rewritten in
    place) differs in one of these."""
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
    """``_json_text(state_message(...))`` around a state already in JSON (keys sorted as there)."""
    descriptor: dict[str, Any] = {"name": name}
    if namespace:
        descriptor["namespace"] = namespace
    return b'{"stream":{"stream_descriptor":' + _json_text(descriptor) + b',"stream_state":' + state_text + b'},"type":"STREAM"}'


class StateFile:
    """``{stream: state}`` backed by a file in Airbyte's per-stream list form.

    Several commands may use one file at once (a cron ``read`` of some streams, a ``state reset``
    of another), so ``save`` writes only what this object changed since it loaded (or last saved)
    over what the file holds then, under a lock: a read that loaded the file before a reset does
    not write the reset stream's old state back with its next checkpoint.

    ``read`` saves after every STATE line, so a save costs the stream that changed, not the file:
    this object remembers the file it last wrote (each stream's message in JSON) and reads the
    file again only when another command has replaced it since, and each save encodes only the
    streams whose state was replaced in ``states`` since the last. The file is still written
    whole, and fsynced, every time."""

    def __init__(self, path: str, *, unreadable: bool = False) -> None:
        self.path = path
        before = _identity_of(path)
        self.states: dict[str, dict[str, Any]] = load_state(path) if before is not None and not unreadable else {}
        #: each stream's state in JSON as the file held it, as far as we know (loaded, or last saved),
        #: and the object in ``states`` it was taken from (a state is replaced there, never changed)
        self._saved = {name: _json_text(state) for name, state in self.states.items()}
        self._saved_from: dict[str, Any] = dict(self.states)
        self._namespaces: dict[str, str | None] = {}
        self._set_aside = unreadable
        #: the file as this object last read or wrote it: what identifies it, and each stream's message
        self._written: tuple[tuple[int, ...], dict[str, bytes]] | None = None
        if before is not None and not unreadable and _identity_of(path) == before:  # (not replaced while read)
            self._written = (before, {name: _message_text(name, None, text) for name, text in self._saved.items()})

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
            # (streams whose state was replaced or removed: a look at each, not an encoding of each)
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
            self._written = None  # (until the file is written whole)
            written = write_atomically(self.path, b"[" + b",".join(messages[name] for name in sorted(messages)) + b"]\n")
            self._written = (written, messages)

    def _messages_on_disk(self) -> dict[str, bytes]:
        """Each stream's message in the file now: remembered, if the file is still the one this
        object wrote last; else read from it."""
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
