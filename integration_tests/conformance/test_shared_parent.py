"""A substream that lists its parents through the very stream object the catalog also syncs (as
source-github shares ``pull_requests`` with its substreams), listed before that parent.

airbyte-cdk gives a stream its state just before it reads that stream, so the substream lists
every parent. Ours gave every stream its state while checking the input, before reading any: the
substream listed only the parents updated since the parent's state, and an event new on an old
parent was never read, in this sync or any later one (found in review)."""

from __future__ import annotations

from airbyte_cdk.models import AirbyteStateMessageSerializer, ConfiguredAirbyteCatalogSerializer
from airbyte_cdk.test.entrypoint_wrapper import read as cdk_read

from integration_tests.conformance.connectors import shared_parent
from source_framework.testing import read as ours_read

CATALOG = {
    "streams": [
        {
            "stream": {"name": name, "json_schema": shared_parent.SCHEMA, "supported_sync_modes": ["incremental"]},
            "sync_mode": "incremental",
            "destination_sync_mode": "append",
            "cursor_field": ["updatedAt"],
        }
        for name in ("events", "items")
    ]
}


def test_a_parent_shared_with_a_substream_read_first_lists_every_parent_as_under_airbyte_cdk(monkeypatch):
    first = cdk_read(shared_parent.SharedParentSource(), {}, ConfiguredAirbyteCatalogSerializer.load(CATALOG))
    final = {m.state.stream.stream_descriptor.name: m.state.stream.stream_state.__dict__ for m in first.state_messages}
    state = [{"type": "STREAM", "stream": {"stream_descriptor": {"name": name}, "stream_state": value}} for name, value in final.items()]
    events = {**shared_parent.EVENTS, 3: [*shared_parent.EVENTS[3], {"id": 999, "item": 3, "updatedAt": "2025-03-01T00:00:00Z"}]}
    monkeypatch.setattr(shared_parent, "EVENTS", events)  # a new event on an old parent

    theirs = cdk_read(shared_parent.SharedParentSource(), {}, ConfiguredAirbyteCatalogSerializer.load(CATALOG),
                      [AirbyteStateMessageSerializer.load(message) for message in state])
    ours = ours_read(shared_parent.SharedParentSource(), {}, CATALOG, state=state, args=["--destination", "stdout"])
    assert sorted(r.record.data["id"] for r in theirs.records if r.record.stream == "events") == [999]
    assert sorted(record["id"] for record in ours.records("events")) == [999]
    assert ours.final_states()["events"]["stream"]["stream_state"]["items"]["3"] == {"updatedAt": "2025-03-01T00:00:00Z"}
