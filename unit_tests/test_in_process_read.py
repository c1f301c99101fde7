"""``source_framework.testing.read``: what a test sees of a read run in its own process."""

from __future__ import annotations

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
