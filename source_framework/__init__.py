"""source_framework: HTTP API connectors as airbyte-cdk streams, landed in Spark tables
with exactly-once checkpoints.

A connector in a few lines::

    import sys
    from source_framework import IncrementalHttpStream, Source, TokenAuthenticator, launch

    class Users(IncrementalHttpStream):
        url_base = "http://127.0.0.1:8000/"
        cursor_field = "updatedAt"
        primary_key = "id"
        state_checkpoint_interval = 1000

        def path(self, **kwargs):
            return "users"

        def request_params(self, stream_state=None, next_page_token=None, **kwargs):
            # stream_state is the state the stream started from: fixed while pages are followed
            since = (stream_state or {}).get("updatedAt", "2025-01-01T00:00:00Z")
            return {"since": since, **(next_page_token or {})}

        def next_page_token(self, response):
            token = response.json()["next_cursor"]
            return {"cursor": token} if token else None

        def parse_response(self, response, **kwargs):
            yield from response.json()["data"]

    class MySource(Source):
        spec_json = {"connectionSpecification": {"type": "object", "properties": {}}}

        def check_connection(self, logger, config):
            return True, None

        def streams(self, config):
            return [Users()]

    if __name__ == "__main__":
        launch(MySource(), sys.argv[1:])
"""

from airbyte_cdk.sources.streams.http import HttpStream
from airbyte_cdk.sources.streams.http.requests_native_auth import TokenAuthenticator

from source_framework.runtime.entrypoint import launch
from source_framework.sources import Source
from source_framework.streams import (
    CursorValueError,
    CursorWentBackwards,
    DateWindowStream,
    IncrementalHttpStream,
    PartitionedIncrementalStream,
    date_windows,
)

__all__ = [
    "CursorValueError",
    "CursorWentBackwards",
    "DateWindowStream",
    "HttpStream",
    "IncrementalHttpStream",
    "PartitionedIncrementalStream",
    "Source",
    "TokenAuthenticator",
    "date_windows",
    "launch",
]
