"""source_framework: HTTP API connectors as airbyte-cdk streams, landed in Spark tables with exactly-once checkpoints.

A whole connector, for the demo API's users (``python -m source_framework.demo.api --port 8000
--api-key secret`` serves it), saved as ``users.py``::

    import sys

    from source_framework import IncrementalHttpStream, Source, TokenAuthenticator, launch


    class Users(IncrementalHttpStream):
        url_base = "http://127.0.0.1:8000/"
        cursor_field = "updatedAt"          # state = {"updatedAt": <highest value seen>}, kept for you
        primary_key = "id"
        state_checkpoint_interval = 1000    # also checkpoint every 1000 records inside a slice
        records_path = "data"               # the records: each page's {"data": [...]}
        json_schema = {                     # the table's columns (or schemas/users.json beside this file)
            "type": "object",
            "properties": {
                "id": {"type": "integer"},
                "name": {"type": "string"},
                "email": {"type": "string"},
                "updatedAt": {"type": "string", "format": "date-time"},
            },
        }

        def path(self, **kwargs):
            return "users"

        def request_params(self, stream_state=None, next_page_token=None, **kwargs):
            # stream_state is the state the stream started from: fixed while pages are followed
            since = (stream_state or {}).get("updatedAt", "2025-01-01T00:00:00Z")
            return {"since": since, **(next_page_token or {})}

        def next_page_token(self, response):
            token = response.json()["next_cursor"]
            return {"cursor": token} if token else None


    class DemoUsers(Source):
        spec_json = {
            "connectionSpecification": {
                "type": "object",
                "required": ["api_key"],
                "properties": {"api_key": {"type": "string", "airbyte_secret": True}},
            }
        }

        def check_connection(self, logger, config):
            return True, None

        def streams(self, config):
            return [Users(authenticator=TokenAuthenticator(config["api_key"]))]


    if __name__ == "__main__":
        launch(DemoUsers(), sys.argv[1:])

Then ``python users.py read --config config.json --catalog catalog.json --state-file state.json`` with ``{"api_key": "secret"}`` in
``config.json``; the table lands in ``./warehouse/demo_users/users``. Any airbyte-cdk source runs the same way: hand it to ``launch``.
"""

from airbyte_cdk.sources.streams import Stream
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
    RecordsAtPath,
    date_windows,
    page_json,
)

__all__ = [
    "CursorValueError",
    "CursorWentBackwards",
    "DateWindowStream",
    "HttpStream",
    "IncrementalHttpStream",
    "PartitionedIncrementalStream",
    "RecordsAtPath",
    "Source",
    "Stream",
    "TokenAuthenticator",
    "date_windows",
    "launch",
    "page_json",
]
