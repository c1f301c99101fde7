"""Run ``read`` in this process and keep what it printed: for tests that need no process of their own.

The same path as ``main.py read`` (input files, checks, runtime, destination), minus the process:
protocol lines go to a buffer instead of stdout, logging and descriptor 1 are left alone, and a
Spark session already running in the process (a test suite's) is the one the tables are written
with, so no JVM starts per run. As airbyte-cdk's ``entrypoint_wrapper.read``::

    from source_framework.testing import read

    output = read(MySource(), config, catalog, state=previous.final_state_list())
    output.returncode, output.records("users"), output.final_states()

``config`` and ``catalog`` are dicts (a catalog may also be airbyte-cdk's
``ConfiguredAirbyteCatalog``, e.g. from ``CatalogBuilder().build()``); ``state`` is any form
``--state`` takes. ``args`` adds command-line flags (``["--destination", "stdout"]``).

A ``SimulatedCrash`` (``helpers.faults.crash_at``) escapes as a kill would, carrying what the run
printed before it as its ``output`` (``returncode`` -9, a SIGKILLed process's): the lines an
orchestrator would hold, to resume from::

    with crash_at("commit.done", 3), pytest.raises(SimulatedCrash) as killed:
        read(MySource(), config, catalog)
    read(MySource(), config, catalog, state=killed.value.output.states())
"""

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
        argv = ["read", "--config", _write(folder, "config", config), "--catalog", _write(folder, "catalog", _catalog_dict(catalog))]
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
    """One protocol line. orjson refuses a lone surrogate escape (``"\\ud800"``, valid JSON that
    a state may carry); the standard library reads it."""
    try:
        return orjson.loads(line)
    except orjson.JSONDecodeError:
        return json.loads(line)


def _catalog_dict(catalog: Any) -> Any:
    if isinstance(catalog, ConfiguredAirbyteCatalog):
        return ConfiguredAirbyteCatalogSerializer.dump(catalog)
    return catalog


def _write(folder: str, name: str, content: Any) -> str:
    path = os.path.join(folder, f"{name}.json")
    with open(path, "w", encoding="utf-8") as handle:
        json.dump(content, handle)
    return path
