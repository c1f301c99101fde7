"""A tiny HTTP API for the tiny connector: 150 notes and 5 authors, the same on every start.

``GET /notes?min_version=V&page=P`` returns the notes with ``version >= V`` in version order,
40 per page, with ``next_page`` (null on the last page); ``GET /authors`` returns all authors.
Every request needs the header ``X-Api-Key: tiny-key`` (401 otherwise).
"""

from __future__ import annotations

import datetime as dt
import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlparse

API_KEY = "tiny-key"
PAGE_SIZE = 40
START = dt.datetime(2025, 3, 1, tzinfo=dt.UTC)

AUTHORS = [{"id": i, "name": name} for i, name in enumerate(["Ada", "Grace", "Edsger", "Barbara", "Donald"], start=1)]
NOTES = [
    {
        "id": i,
        "title": f"note {i}",
        "author_id": AUTHORS[i % len(AUTHORS)]["id"],
        "tags": ["even" if i % 2 == 0 else "odd"] + (["round"] if i % 10 == 0 else []),
        "version": i * 10,
        "updated_at": (START + dt.timedelta(hours=7 * i)).strftime("%Y-%m-%dT%H:%M:%SZ"),
    }
    for i in range(1, 151)
]


class _Handler(BaseHTTPRequestHandler):
    def log_message(self, *args):  # keep the connector's stdout and stderr quiet
        pass

    def do_GET(self):
        if self.headers.get("X-Api-Key") != API_KEY:
            return self._send(401, {"error": "bad api key"})
        url = urlparse(self.path)
        query = {key: values[0] for key, values in parse_qs(url.query).items()}
        if url.path == "/authors":
            return self._send(200, {"data": AUTHORS})
        if url.path == "/notes":
            matching = [n for n in NOTES if n["version"] >= int(query.get("min_version", 0))]
            page = int(query.get("page", 1))
            chunk = matching[(page - 1) * PAGE_SIZE : page * PAGE_SIZE]
            more = page * PAGE_SIZE < len(matching)
            return self._send(200, {"data": chunk, "next_page": page + 1 if more else None})
        return self._send(404, {"error": "not found"})

    def _send(self, status, body):
        payload = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)


def start() -> str:
    """Serve on a free 127.0.0.1 port in a daemon thread; return the base URL."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return f"http://127.0.0.1:{server.server_address[1]}"
