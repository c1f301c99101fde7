"""Orders from the demo API, incrementally: python main.py read --config C --catalog K --state-file S"""
import datetime as dt
import json
import os
import sys

import requests

from source_framework import DateWindowStream, Source, TokenAuthenticator, launch


class Orders(DateWindowStream):
    url_base = "http://127.0.0.1:8000/"   # replaced by the config's api_url
    primary_key = "id"
    cursor_field = "updatedAt"            # the state is the highest updatedAt read so far
    window_step = dt.timedelta(days=30)   # one slice, and one checkpoint, per 30 days
    state_checkpoint_interval = 1000      # and a checkpoint every 1000 records inside a window
    records_path = "data"                 # each page's records: {"data": [...], "page": 1, ...}

    def __init__(self, config):
        super().__init__(start_date=config["start_date"], authenticator=TokenAuthenticator(config["api_key"]))
        self.url_base = config["api_url"].rstrip("/") + "/"

    def path(self, **kwargs):
        return "orders"

    def request_params(self, stream_slice=None, next_page_token=None, **kwargs):
        # windows come from the state (or start_date) up to now; pages are numbered from 1
        return {"start": stream_slice["start"], "end": stream_slice["end"], "per_page": 500, **(next_page_token or {})}

    def next_page_token(self, response):
        body = response.json()
        return {"page": body["page"] + 1} if body["page"] < body["total_pages"] else None

    def get_json_schema(self):
        with open(os.path.join(os.path.dirname(__file__), "orders.json")) as schema:
            return json.load(schema)


class Shop(Source):  # its tables go to <warehouse>/shop/<stream>; spec.json sits beside this file
    def check_connection(self, logger, config):
        url, auth = config["api_url"].rstrip("/") + "/me", TokenAuthenticator(config["api_key"])
        response = requests.get(url, headers=auth.get_auth_header(), timeout=10)
        return response.ok, None if response.ok else f"HTTP {response.status_code}"

    def streams(self, config):
        return [Orders(config)]


if __name__ == "__main__":
    launch(Shop(), sys.argv[1:])
