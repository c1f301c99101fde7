"""HTTP front of the demo API; never writes to stdout, which carries a connector's protocol messages."""

from __future__ import annotations

import hmac
import socket
import sys
import threading
import time
import traceback
from collections import Counter
from contextlib import suppress
from functools import partialmethod
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

import orjson

from source_framework.demo.api.data import DemoData
from source_framework.demo.api.faults import Faults
from source_framework.demo.api.routes import ApiError, DataRoutes

Response = tuple[int, Any, dict[str, str]]


class Rendered(bytes):
    """A payload already serialised to JSON (a cached page): sent as it is."""


class DemoApi:
    """A deterministic SaaS-like API on ``host:port`` from a daemon thread; ``port=0`` picks a free port."""

    def __init__(
        self,
        records: int = 10_000,
        seed: int = 42,
        api_key: str | None = None,
        host: str = "127.0.0.1",
        port: int = 0,
        faults: Faults | None = None,
        generation: int = 0,
        touch_count: int | None = None,
        stores: int = 10,
        verbose: bool = False,
        cache_pages: bool = False,
    ) -> None:
        """``cache_pages``: answer repeated requests with the serialised page until data changes, so benchmarks measure the client."""
        self.data = DemoData(records=records, seed=seed, stores=stores, generation=generation, touch_count=touch_count)
        self.api_key = api_key
        self.host = host
        self.verbose = verbose
        self._requested_port = port
        self._routes = DataRoutes(self.data)
        self._lock = threading.Lock()
        self._faults = faults or Faults()
        self._fault_requests = 0  # data requests since the faults were last set
        self._requests = 0
        self._in_flight = 0
        self._max_in_flight = 0  # data requests answered at the same time, at most (concurrent clients)
        self._by_path: Counter[str] = Counter()
        self._status_counts: Counter[str] = Counter()
        self._server: _Server | None = None
        self._thread: threading.Thread | None = None
        self._pages: dict[tuple[str, str, bool], Rendered] | None = {} if cache_pages else None

    def start(self) -> DemoApi:
        """Bind and serve in a daemon thread; returns self so ``with DemoApi().start() as api`` works."""
        if self._server is not None:
            return self
        server = _Server((self.host, self._requested_port), self)
        self._server = server
        self._thread = threading.Thread(
            target=server.serve_forever, kwargs={"poll_interval": 0.1}, name=f"demo-api-{self.port}", daemon=True
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop serving and drop open keep-alive connections so their threads end too."""
        server, self._server = self._server, None
        if server is None:
            return
        server.shutdown()
        server.server_close()
        server.close_connections()
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None

    def __enter__(self) -> DemoApi:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    @property
    def port(self) -> int:
        if self._server is None:
            raise RuntimeError("DemoApi is not started")
        return self._server.server_address[1]

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    def touch(self, stream: str, count: int) -> list[int]:
        ids = self.data.touch(stream, count)
        if self._pages is not None:
            self._pages.clear()
        return ids

    @property
    def faults(self) -> Faults:
        return self._faults

    def set_faults(self, faults: Faults) -> None:
        with self._lock:
            self._faults = faults
            self._fault_requests = 0

    def stats(self) -> dict[str, Any]:
        with self._lock:
            return {
                "requests": self._requests,
                "max_in_flight": self._max_in_flight,
                "by_path": dict(self._by_path),
                "status_counts": dict(self._status_counts),
            }

    def reset_stats(self) -> None:
        with self._lock:
            self._requests = 0
            self._max_in_flight = 0
            self._by_path.clear()
            self._status_counts.clear()

    def respond(self, method: str, target: str, headers: Any, body: bytes) -> Response:
        parts = urlsplit(target)
        path = parts.path.rstrip("/") or "/"
        if path.startswith("/_admin/"):
            return self._admin(method, path, body)
        with self._lock:
            self._fault_requests += 1
            faults = self._faults
            fault = faults.fault_for(self._fault_requests)
            self._in_flight += 1
            self._max_in_flight = max(self._max_in_flight, self._in_flight)
        try:
            if faults.delay_ms:
                time.sleep(faults.delay_ms / 1000)
            response = fault or self._data(method, path, parts.query, headers, faults)
        finally:
            with self._lock:
                self._in_flight -= 1
        with self._lock:
            self._requests += 1
            self._by_path[path] += 1
            self._status_counts[str(response[0])] += 1
        return response

    def _data(self, method: str, path: str, query: str, headers: Any, faults: Faults) -> Response:
        if self.api_key is not None:
            expected = f"Bearer {self.api_key}".encode()
            if not hmac.compare_digest(headers.get("Authorization", "").encode(), expected):
                return 401, {"error": "invalid api key"}, {}
        if method != "GET":
            return 405, {"error": f"{method} not allowed on {path}"}, {"Allow": "GET"}
        key = (path, query, faults.unsorted_pages)
        if self._pages is not None and key in self._pages:
            return 200, self._pages[key], {}
        params = parse_qs(query, keep_blank_values=True)
        try:
            payload = self._routes.handle(path, params, unsorted_pages=faults.unsorted_pages)
        except ApiError as error:
            return error.status, {"error": error.message}, {}
        if self._pages is None:
            return 200, payload, {}
        page = self._pages[key] = Rendered(orjson.dumps(payload))
        return 200, page, {}

    def _admin(self, method: str, path: str, body: bytes) -> Response:
        """Test controls: no auth, not counted, never faulted."""
        try:
            if path == "/_admin/stats" and method == "GET":
                return 200, self.stats(), {}
            if path == "/_admin/faults" and method == "GET":
                return 200, self._faults.to_dict(), {}
            if path == "/_admin/faults" and method == "POST":
                self.set_faults(self._faults.updated(_json_object(body)))
                return 200, self._faults.to_dict(), {}
            if path == "/_admin/touch" and method == "POST":
                request = _json_object(body)
                stream, count = request.get("stream"), request.get("count")
                if not isinstance(stream, str) or isinstance(count, bool) or not isinstance(count, int):
                    raise ValueError('body must be {"stream": "users|orders|products", "count": N}')
                return 200, {"ids": self.touch(stream, count)}, {}
            if path == "/_admin/reset_stats" and method == "POST":
                self.reset_stats()
                return 200, {"ok": True}, {}
        except (ValueError, TypeError) as error:
            return 400, {"error": str(error)}, {}
        if path in ("/_admin/stats", "/_admin/faults", "/_admin/touch", "/_admin/reset_stats"):
            return 405, {"error": f"{method} not allowed on {path}"}, {}
        return 404, {"error": f"no such endpoint: {path}"}, {}


def _json_object(body: bytes) -> dict[str, Any]:
    try:
        value = orjson.loads(body or b"{}")
    except orjson.JSONDecodeError:
        raise ValueError("body must be JSON") from None
    if not isinstance(value, dict):
        raise ValueError("body must be a JSON object")
    return value


class _Server(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, address: tuple[str, int], api: DemoApi) -> None:
        self.api = api
        self._connections: set[socket.socket] = set()
        self._connections_lock = threading.Lock()
        super().__init__(address, _Handler)

    def track(self, connection: socket.socket, open_: bool) -> None:
        with self._connections_lock:
            if open_:
                self._connections.add(connection)
            else:
                self._connections.discard(connection)

    def close_connections(self) -> None:
        with self._connections_lock:
            connections, self._connections = self._connections, set()
        for connection in connections:
            with suppress(OSError):
                connection.shutdown(socket.SHUT_RDWR)

    def handle_error(self, request: Any, client_address: Any) -> None:
        """Clients hanging up mid-request is normal here; only report it when verbose."""
        if self.api.verbose:
            super().handle_error(request, client_address)


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive; every response carries Content-Length
    disable_nagle_algorithm = True  # headers and body go out as two writes: don't wait for ACKs
    server_version = "DemoAPI/1.0"
    server: _Server

    def setup(self) -> None:
        super().setup()
        self.server.track(self.connection, True)

    def finish(self) -> None:
        try:
            super().finish()
        finally:
            self.server.track(self.connection, False)

    def _handle(self, method: str) -> None:
        # Always consume the body, or its bytes would be read as the next request on this connection.
        try:
            length = int(self.headers.get("Content-Length") or 0)
        except ValueError:
            length = -1
        if length < 0:
            self.close_connection = True
            self._send(400, {"error": "invalid Content-Length"}, {})
            return
        body = self.rfile.read(length) if length else b""
        try:
            status, payload, headers = self.server.api.respond(method, self.path, self.headers, body)
        except Exception as error:  # a bug must still produce a JSON answer, not a dropped connection
            if self.server.api.verbose:
                traceback.print_exc(file=sys.stderr)
            status, payload, headers = 500, {"error": f"internal error: {type(error).__name__}"}, {}
        self._send(status, payload, headers)

    do_GET = partialmethod(_handle, "GET")
    do_POST = partialmethod(_handle, "POST")
    do_PUT = partialmethod(_handle, "PUT")
    do_PATCH = partialmethod(_handle, "PATCH")
    do_DELETE = partialmethod(_handle, "DELETE")

    def _send(self, status: int, payload: Any, headers: dict[str, str]) -> None:
        body = payload if isinstance(payload, Rendered) else orjson.dumps(payload)
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        for name, value in headers.items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:
        if self.server.api.verbose:
            sys.stderr.write(f"demo-api {self.address_string()} {format % args}\n")
