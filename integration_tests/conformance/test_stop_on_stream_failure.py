"""A source that sets ``stop_sync_on_stream_failure`` (airbyte-cdk's switch: stop the sync at the
first stream that fails instead of going on with the next): ours went on and synced the streams
after it (found in review)."""

from __future__ import annotations

import conformance_harness as harness
import pytest
from airbyte_cdk.models import ConfiguredAirbyteCatalogSerializer, ConnectorSpecification
from airbyte_cdk.sources import AbstractSource
from airbyte_cdk.sources.streams import Stream
from airbyte_cdk.test.entrypoint_wrapper import read as cdk_read

from source_framework.testing import read as ours_read

SCHEMA = {"type": "object", "properties": {"id": {"type": "integer"}}}


class Rows(Stream):
    primary_key = "id"

    def __init__(self, name, fails=False):
        self._name, self.fails = name, fails

    @property
    def name(self):
        return self._name

    def get_json_schema(self):
        return SCHEMA

    def read_records(self, sync_mode, cursor_field=None, stream_slice=None, stream_state=None):
        yield {"id": 1}
        if self.fails:
            raise RuntimeError(f"{self._name}: the API answered 500")
        yield {"id": 2}


class StopsOnFailure(AbstractSource):
    def __init__(self, stop):
        self.stop = stop

    @property
    def stop_sync_on_stream_failure(self):
        return self.stop

    def check_connection(self, logger, config):
        return True, None

    def spec(self, logger):
        return ConnectorSpecification(connectionSpecification={"type": "object", "properties": {}})

    def streams(self, config):
        return [Rows("first"), Rows("broken", fails=True), Rows("after")]


CATALOG = {"streams": [
    {"stream": {"name": name, "json_schema": SCHEMA, "supported_sync_modes": ["full_refresh"]},
     "sync_mode": "full_refresh", "destination_sync_mode": "overwrite"}
    for name in ("first", "broken", "after")
]}


def _cdk_statuses(output):
    return [m.trace.stream_status for m in output.trace_messages
            if m.trace.stream_status is not None and m.trace.stream_status.status.name in ("COMPLETE", "INCOMPLETE")]


@pytest.mark.parametrize("stop", [True, False])
@pytest.mark.parametrize("concurrency", ["1", "4"])
def test_the_streams_after_a_failure_are_synced_only_if_the_source_goes_on_as_under_airbyte_cdk(stop, concurrency):
    theirs = cdk_read(StopsOnFailure(stop), {}, ConfiguredAirbyteCatalogSerializer.load(CATALOG), expecting_exception=True)
    ours = ours_read(StopsOnFailure(stop), {}, CATALOG, args=["--destination", "stdout", "--concurrency", concurrency])
    synced = sorted({r.record.stream for r in theirs.records})
    assert synced == (["broken", "first"] if stop else ["after", "broken", "first"])
    assert sorted({record["stream"] for record in ours.record_messages()}) == synced
    assert harness.stream_ends(ours) == [(s.stream_descriptor.name, s.status.name) for s in _cdk_statuses(theirs)]
    assert ours.returncode != 0
