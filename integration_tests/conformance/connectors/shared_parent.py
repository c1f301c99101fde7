"""Shared incremental parent: the substream lists its parents through the very stream object the
catalog also syncs (as source-github does)."""
from airbyte_cdk.models import ConnectorSpecification
from airbyte_cdk.sources import AbstractSource
from airbyte_cdk.sources.streams import IncrementalMixin, Stream

SCHEMA = {"type": "object", "properties": {"id": {"type": "integer"}, "item": {"type": "integer"}, "updatedAt": {"type": "string"}}}
ITEMS = [{"id": i, "updatedAt": f"2025-01-0{i}T00:00:00Z"} for i in range(1, 6)]
EVENTS = {i: [{"id": 10 * i + k, "item": i, "updatedAt": f"2025-01-0{i}T0{k}:00:00Z"} for k in range(3)] for i in range(1, 6)}


class Items(Stream, IncrementalMixin):
    primary_key, cursor_field = "id", "updatedAt"

    def __init__(self):
        self._state = {}

    @property
    def state(self):
        return self._state

    @state.setter
    def state(self, value):
        self._state = dict(value or {})

    def get_json_schema(self):
        return SCHEMA

    def read_records(self, sync_mode, cursor_field=None, stream_slice=None, stream_state=None):
        since = (stream_state or {}).get("updatedAt", "")
        for item in ITEMS:
            if item["updatedAt"] > since:
                yield item
                self._state = {"updatedAt": max(self._state.get("updatedAt", ""), item["updatedAt"])}


class Events(Stream, IncrementalMixin):
    primary_key, cursor_field = "id", "updatedAt"

    def __init__(self, parent):
        self.parent, self._state = parent, {}

    @property
    def state(self):
        return self._state

    @state.setter
    def state(self, value):
        self._state = {"items": {k: dict(v) for k, v in (value or {}).get("items", {}).items()}}

    def get_json_schema(self):
        return SCHEMA

    def stream_slices(self, sync_mode, cursor_field=None, stream_state=None):
        for parent in self.parent.read_only_records(stream_state):
            yield {"parent": parent}

    def read_records(self, sync_mode, cursor_field=None, stream_slice=None, stream_state=None):
        pid = str(stream_slice["parent"]["id"])
        since = self._state.get("items", {}).get(pid, {}).get("updatedAt", "")
        for event in EVENTS[int(pid)]:
            if event["updatedAt"] > since:
                yield event
                entry = self._state.setdefault("items", {}).setdefault(pid, {})
                entry["updatedAt"] = max(entry.get("updatedAt", ""), event["updatedAt"])


class SharedParentSource(AbstractSource):
    def check_connection(self, logger, config):
        return True, None

    def spec(self, logger):
        return ConnectorSpecification(connectionSpecification={"type": "object", "properties": {}})

    def streams(self, config):
        items = Items()
        return [Events(items), items]
