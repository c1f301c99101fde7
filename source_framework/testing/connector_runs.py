"""Run a connector's ``read`` as a subprocess, exactly as a user would, and keep what it printed, in order."""

from __future__ import annotations

import json
import os
import subprocess
import time
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from itertools import count
from typing import Any

from source_framework.runtime.process import EXIT_OK
from source_framework.testing.connector_reference import ConnectorReference

STDERR_TAIL_LINES = 40


class ConnectorRunError(AssertionError):
    """The connector exited non-zero or printed something that is not a protocol message."""


@dataclass
class ReadOutput:
    """Everything one ``read`` printed on stdout, parsed, plus how it ended."""

    args: list[str]
    returncode: int
    messages: list[dict[str, Any]]
    stderr: str
    seconds: float
    label: str = ""

    def records(self, stream: str | None = None) -> list[dict[str, Any]]:
        return [
            m["record"]["data"]
            for m in self.messages
            if m.get("type") == "RECORD" and (stream is None or m["record"]["stream"] == stream)
        ]

    def record_messages(self) -> list[dict[str, Any]]:
        return [m["record"] for m in self.messages if m.get("type") == "RECORD"]

    def states(self) -> list[dict[str, Any]]:
        return [m["state"] for m in self.messages if m.get("type") == "STATE"]

    def final_states(self) -> dict[str, dict[str, Any]]:
        return {stream_of_state(state): state for state in self.states()}

    def final_state_list(self) -> list[dict[str, Any]]:
        """The per-stream list ``--state`` takes: the last STATE of each stream."""
        return list(self.final_states().values())

    def state_positions(self) -> list[int]:
        return [i for i, m in enumerate(self.messages) if m.get("type") == "STATE"]

    def errors(self) -> list[Any]:
        """The messages of the TRACE errors the read reported."""
        return [m["trace"]["error"].get("message") for m in self.messages
                if m.get("type") == "TRACE" and m.get("trace", {}).get("type") == "ERROR"]

    def describe(self) -> str:
        counts = Counter(m.get("type", "?") for m in self.messages)
        summary = ", ".join(f"{n} {t}" for t, n in sorted(counts.items()))
        return f"{self.label or 'read'} ({summary}; {self.seconds:.1f}s)"


def stream_of_state(state: Mapping[str, Any]) -> str:
    return state["stream"]["stream_descriptor"]["name"]


@dataclass
class ConnectorRunner:
    connector: ConnectorReference
    workdir: str
    env: Mapping[str, str] = field(default_factory=dict)
    _files: Any = field(default_factory=lambda: count(1), repr=False)

    def write_json(self, name: str, content: Any) -> str:
        os.makedirs(self.workdir, exist_ok=True)
        path = os.path.join(self.workdir, f"{next(self._files):03d}-{name}.json")
        with open(path, "w", encoding="utf-8") as handle:
            json.dump(content, handle)
        return path

    def run(self, args: Sequence[str], timeout: float, label: str = "") -> ReadOutput:
        command = self.connector.command(*args)
        started = time.monotonic()
        try:
            process = subprocess.run(
                command,
                capture_output=True,
                cwd=self.connector.working_dir or self.workdir,
                timeout=timeout,
                env={**os.environ, **self.connector.environment(), **self.env},
            )
        except subprocess.TimeoutExpired as expired:
            raise ConnectorRunError(
                f"{label or args[0]}: no result after {timeout:.0f}s (timeout_seconds)\n$ {' '.join(command)}\n"
                + _tail(expired.stderr)
            ) from None
        seconds = time.monotonic() - started
        stderr = process.stderr.decode(errors="replace")
        messages = []
        for number, line in enumerate(process.stdout.splitlines(), start=1):
            if not line.strip():
                continue
            try:
                message = json.loads(line)
            except ValueError:
                raise ConnectorRunError(
                    f"{label or args[0]}: stdout line {number} is not a protocol message: {line[:200]!r}"
                ) from None
            messages.append(message)
        output = ReadOutput(list(command), process.returncode, messages, stderr, seconds, label)
        if process.returncode != EXIT_OK:
            errors = output.errors()
            raise ConnectorRunError(
                f"{label or args[0]} exited with {process.returncode}\n$ {' '.join(command)}\n"
                + (f"errors: {errors}\n" if errors else "")
                + _tail(process.stderr)
            )
        return output

    def read(
        self,
        config_path: str,
        catalog: Mapping[str, Any],
        state: Sequence[Mapping[str, Any]] | None = None,
        timeout: float = 600,
        label: str = "read",
    ) -> ReadOutput:
        """A read to stdout (whatever destination the config names), so the records come back as messages."""
        args = ["read", "--config", config_path, "--catalog", self.write_json("catalog", catalog)]
        if state is not None:
            args += ["--state", self.write_json("state", list(state))]
        return self.run([*args, "--destination", "stdout"], timeout=timeout, label=label)

    def discover(self, config_path: str, timeout: float = 600) -> dict[str, Any]:
        output = self.run(["discover", "--config", config_path], timeout=timeout, label="discover")
        for message in output.messages:
            if message.get("type") == "CATALOG":
                return message["catalog"]
        raise ConnectorRunError(f"discover printed no CATALOG message: {output.describe()}")


def _tail(stderr: bytes | None) -> str:
    text = (stderr or b"").decode(errors="replace").rstrip().splitlines()
    return "stderr (last lines):\n" + "\n".join(text[-STDERR_TAIL_LINES:]) if text else "stderr: (empty)"
