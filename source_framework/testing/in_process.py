"""Run ``read`` in this process, as ``main.py read`` would, reusing a running Spark session so no JVM starts per run."""

from __future__ import annotations

import io
import json
import os
import signal
import tempfile
import time
from collections.abc import Mapping, Sequence
from typing import Any

import orjson
from airbyte_cdk.models import ConfiguredAirbyteCatalog, ConfiguredAirbyteCatalogSerializer

from source_framework.helpers.faults import SimulatedCrash
from source_framework.testing.connector_runs import ReadOutput


def read(
    source: Any,
    config: Mapping[str, Any],
    catalog: Mapping[str, Any] | ConfiguredAirbyteCatalog,
    state: Any = None,
    *,
    args: Sequence[str] = (),
    workdir: str | None = None,
) -> ReadOutput:
    """``read`` of ``source`` in this process; ``returncode`` is what ``main.py`` would exit with."""
    from source_framework.runtime.entrypoint import build_parser, run_read

    with tempfile.TemporaryDirectory(prefix="sf-read-", dir=workdir) as folder:
        if isinstance(catalog, ConfiguredAirbyteCatalog):
            catalog = ConfiguredAirbyteCatalogSerializer.dump(catalog)
        argv = ["read", "--config", _write(folder, "config", config), "--catalog", _write(folder, "catalog", catalog)]
        if state is not None:
            argv += ["--state", _write(folder, "state", state)]
        argv += list(args)
        parsed = build_parser().parse_args(argv)
        buffer = io.BytesIO()
        started = time.monotonic()
        try:
            returncode = run_read(source, parsed, protocol_out=buffer)
        except SimulatedCrash as crash:
            crash.output = _output(argv, -signal.SIGKILL, buffer, started)
            raise
    return _output(argv, returncode, buffer, started)


def _output(argv: list[str], returncode: int, buffer: io.BytesIO, started: float) -> ReadOutput:
    messages = [_message(line) for line in buffer.getvalue().splitlines() if line.strip()]
    return ReadOutput(argv, returncode, messages, stderr="", seconds=time.monotonic() - started, label="read (in process)")


def _message(line: bytes) -> Any:
    """One protocol line; the standard library reads the lone surrogate escapes orjson refuses."""
    try:
        return orjson.loads(line)
    except orjson.JSONDecodeError:
        return json.loads(line)


def _write(folder: str, name: str, content: Any) -> str:
    path = os.path.join(folder, f"{name}.json")
    with open(path, "w", encoding="utf-8") as handle:
        json.dump(content, handle)
    return path
