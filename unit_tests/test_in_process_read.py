"""``source_framework.testing.read``: what a test sees of a read run in its own process."""

from __future__ import annotations

import json
import signal
from collections.abc import Mapping
from typing import Any

import pytest
from airbyte_cdk.models import ConnectorSpecification
from airbyte_cdk.sources import AbstractSource

from source_framework.helpers.faults import SimulatedCrash, crash_at
from source_framework.testing import read
from unit_tests.conftest import CursorStream, catalog_of, configured


class Numbers(AbstractSource):
    def spec(self, logger: Any) -> ConnectorSpecification:
        return ConnectorSpecification(connectionSpecification={"type": "object", "properties": {}})

    def check_connection(self, logger: Any, config: Mapping[str, Any]) -> tuple[bool, Any]:
        return True, None

    def streams(self, config: Mapping[str, Any]) -> list[Any]:
        return [CursorStream([[1, 2, 3], [4, 5, 6], [7, 8]])]


def test_a_simulated_crash_carries_what_the_run_printed_before_it(tmp_path):
    """As the output of a process killed with SIGKILL: the lines out before the kill are what an
    orchestrator holds, and what a test resumes from (before, the crash took them away)."""
    catalog = catalog_of(configured("numbers", "incremental", "append", cursor_field=["n"]))
    with crash_at("state.printed", 2), pytest.raises(SimulatedCrash) as crashed:
        read(Numbers(), {}, catalog, args=["--destination", "stdout"], workdir=str(tmp_path))

    output = crashed.value.output
    assert output.returncode == -signal.SIGKILL
    assert output.records("numbers") == [{"id": i, "n": i + 1} for i in range(6)]
    assert [state["stream"]["stream_state"] for state in output.states()] == [{"n": 3}, {"n": 6}]

    resumed = read(Numbers(), {}, catalog, state=output.states(), args=["--destination", "stdout"], workdir=str(tmp_path))
    assert resumed.returncode == 0  # (this stream reads every record again: it ignores its state)
    assert resumed.final_states()["numbers"]["stream"]["stream_state"] == {"n": 8}


def _settings_seen_by_a_stream(run: Any) -> list[tuple[Any, ...]]:
    """The process-wide settings as the stream's reading saw them, over one run of ``run(source)``."""
    import gc
    import sys

    import requests.models

    seen = []

    class Watched(CursorStream):
        def read_records(self, *args: Any, **kwargs: Any) -> Any:
            seen.append((gc.get_threshold(), sys.getswitchinterval(), requests.models.CONTENT_CHUNK_SIZE))
            yield from super().read_records(*args, **kwargs)

    class Watching(Numbers):
        def streams(self, config: Mapping[str, Any]) -> list[Any]:
            return [Watched([[1, 2]])]

    run(Watching())
    return seen


def test_the_library_leaves_the_process_settings_alone_and_main_py_read_tunes_its_own(tmp_path, monkeypatch):
    """A notebook or an orchestrator calling the library keeps its collector, thread switch interval
    and requests as they are; ``main.py read``, whose process is its own, sets them while it reads
    and puts them back."""
    import gc
    import io
    import sys

    import requests.models

    from source_framework.runtime import entrypoint, read_command
    from source_framework.runtime.process import READING_BODY_STEP, READING_GC_THRESHOLDS, READING_SWITCH_INTERVAL

    catalog = catalog_of(configured("numbers", "incremental", "append", cursor_field=["n"]))
    before = (gc.get_threshold(), sys.getswitchinterval(), requests.models.CONTENT_CHUNK_SIZE)

    in_library = _settings_seen_by_a_stream(
        lambda source: read(source, {}, catalog, args=["--destination", "stdout"], workdir=str(tmp_path)))
    assert in_library == [before]

    # main.py read: no protocol stream handed in, so the process is its own (its stdout and
    # logging set-up stood in for here, to keep the test run's own)
    monkeypatch.setattr(read_command, "private_stdout", io.BytesIO)
    monkeypatch.setattr(read_command, "log_to_stderr", lambda debug=False: None)
    from airbyte_cdk.models import ConfiguredAirbyteCatalogSerializer

    (tmp_path / "catalog.json").write_text(json.dumps(ConfiguredAirbyteCatalogSerializer.dump(catalog)))
    (tmp_path / "config.json").write_text("{}")
    parsed = entrypoint.build_parser().parse_args(
        ["read", "--config", str(tmp_path / "config.json"), "--catalog", str(tmp_path / "catalog.json"),
         "--destination", "stdout", "--quiet"])
    as_command = _settings_seen_by_a_stream(lambda source: entrypoint.run_read(source, parsed))
    assert as_command == [(READING_GC_THRESHOLDS, READING_SWITCH_INTERVAL, READING_BODY_STEP)] != [before]
    assert (gc.get_threshold(), sys.getswitchinterval(), requests.models.CONTENT_CHUNK_SIZE) == before
