"""A state getter that hands out the stream's own dict, which ``read_records`` moves in place, and
``read_records`` filtering on the ``stream_state`` argument: under airbyte-cdk that argument is
the very object the getter returned, so later slices see the cursor the earlier ones moved."""
from airbyte_cdk.models import ConnectorSpecification
from airbyte_cdk.sources import AbstractSource
from airbyte_cdk.sources.streams import IncrementalMixin, Stream

SCHEMA = {"type": "object", "properties": {"id": {"type": "integer"}, "region": {"type": "string"},
                                           "updatedAt": {"type": "string"}}}
REGIONS = ("ap", "eu", "us")
# Every region's records span the same days, so a later region has records older than the
# cursor an earlier one reached.
RECORDS = [{"id": 10 * day + index, "region": region, "updatedAt": f"2025-01-0{day}T00:00:00Z"}
           for day in range(1, 6) for index, region in enumerate(REGIONS)]


class RegionItems(Stream, IncrementalMixin):
    primary_key, cursor_field = "id", "updatedAt"

    def __init__(self):
        self._state = {}

    @property
    def state(self):
        return self._state

    @state.setter
    def state(self, value):
        self._state = value  # keeps the object it is given

    def get_json_schema(self):
        return SCHEMA

    def stream_slices(self, sync_mode, cursor_field=None, stream_state=None):
        return [{"region": region} for region in REGIONS]

    def read_records(self, sync_mode, cursor_field=None, stream_slice=None, stream_state=None):
        since = (stream_state or {}).get("updatedAt", "")
        for record in RECORDS:
            if record["region"] == stream_slice["region"] and record["updatedAt"] > since:
                yield record
                if record["updatedAt"] > self._state.get("updatedAt", ""):
                    self._state["updatedAt"] = record["updatedAt"]  # in place


class InPlaceStateSource(AbstractSource):
    def check_connection(self, logger, config):
        return True, None

    def spec(self, logger):
        return ConnectorSpecification(connectionSpecification={"type": "object", "properties": {}})

    def streams(self, config):
        return [RegionItems()]
