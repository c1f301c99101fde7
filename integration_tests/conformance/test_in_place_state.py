"""A stream whose state getter returns its own dict, moved in place as records are read (as
source-faker's and several file-based streams keep theirs), and whose ``read_records`` reads the
``stream_state`` argument.

airbyte-cdk hands ``read_records`` the object the getter returned, so each slice sees the cursor
the slices before it moved; ours handed a copy taken at the start, and read records airbyte-cdk
does not (found in review: 30 records against 11)."""

from __future__ import annotations

import pytest
from airbyte_cdk.models import AirbyteStateMessageSerializer, ConfiguredAirbyteCatalogSerializer
from airbyte_cdk.test.entrypoint_wrapper import read as cdk_read

from integration_tests.conformance.connectors import in_place_state
from source_framework.testing import read as ours_read

CATALOG = {
    "streams": [{
        "stream": {"name": "region_items", "json_schema": in_place_state.SCHEMA, "supported_sync_modes": ["incremental"]},
        "sync_mode": "incremental",
        "destination_sync_mode": "append",
        "cursor_field": ["updatedAt"],
    }]
}


@pytest.mark.parametrize("start", [None, "2025-01-02T00:00:00Z"])
def test_the_stream_state_argument_is_the_live_state_as_under_airbyte_cdk(start):
    state = [] if start is None else [
        {"type": "STREAM", "stream": {"stream_descriptor": {"name": "region_items"}, "stream_state": {"updatedAt": start}}}]
    theirs = cdk_read(in_place_state.InPlaceStateSource(), {}, ConfiguredAirbyteCatalogSerializer.load(CATALOG),
                      [AirbyteStateMessageSerializer.load(message) for message in state] or None)
    ours = ours_read(in_place_state.InPlaceStateSource(), {}, CATALOG, state=state or None, args=["--destination", "stdout"])
    expected = sorted(r.record.data["id"] for r in theirs.records)
    assert len(expected) < len([r for r in in_place_state.RECORDS if r["updatedAt"] > (start or "")])  # the case at hand
    assert sorted(record["id"] for record in ours.records("region_items")) == expected
    final = theirs.state_messages[-1].state.stream.stream_state.__dict__
    assert ours.final_states()["region_items"]["stream"]["stream_state"] == final
