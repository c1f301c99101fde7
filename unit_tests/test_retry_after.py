"""``Retry-After`` on a 429 or 503 is the wait (issue 51, item 7): the framework's stream bases
compute the back-off from the header (seconds or an HTTP-date), capped, instead of airbyte-cdk's
exponential back-off (which waited 1, 2, 4 s whatever the API asked). A connector's own
``backoff_time`` is left alone.

A real HTTP server on 127.0.0.1 answers; the waits are the ones airbyte-cdk asks ``time.sleep``
for, recorded instead of slept, so nothing here depends on the clock.
"""

from __future__ import annotations

import email.utils
import json
import threading
import time
from collections.abc import Iterator, Mapping
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
import requests
from airbyte_cdk.models import SyncMode
from airbyte_cdk.sources.streams.http import HttpStream

from source_framework.streams import IncrementalHttpStream, RecordsAtPath
from source_framework.streams.retry import RetryAfterBackoff


class Api(BaseHTTPRequestHandler):
    """Answers the first ``failures`` requests with ``status`` and ``headers``, then one page."""

    failures = 0
    status = 429
    headers_to_send: Mapping[str, str] = {}
    seen = 0
    lock = threading.Lock()

    def do_GET(self) -> None:  # noqa: N802 (http.server's name)
        with Api.lock:
            Api.seen += 1
            failing = Api.seen <= Api.failures
        body = json.dumps({"error": "slow down"} if failing else {"data": [{"id": 1, "updatedAt": "2025-01-01"}]}).encode()
        self.send_response(Api.status if failing else 200)
        for name, value in (Api.headers_to_send if failing else {}).items():
            self.send_header(name, value)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def api() -> Iterator[str]:
    Api.failures, Api.status, Api.headers_to_send, Api.seen = 0, 429, {}, 0
    server = ThreadingHTTPServer(("127.0.0.1", 0), Api)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/"
    finally:
        server.shutdown()
        server.server_close()


@pytest.fixture
def waits(monkeypatch) -> list[float]:
    """The seconds airbyte-cdk (and the ``backoff`` library under it) ask to sleep, not slept; the
    library's own zero-second sleeps (airbyte-cdk sleeps for it, in a callback) are left out.

    Only the test's own thread: a thread an earlier test left in this worker (a server's loop, a
    poller) sleeps as it would. Without that, such a thread spun without sleeping and filled this
    list until the worker ran out of memory (20 GB, once in a full run)."""
    asked: list[float] = []
    real_sleep, test_thread = time.sleep, threading.get_ident()

    def sleep(seconds: float) -> None:
        if threading.get_ident() != test_thread:
            real_sleep(seconds)
        elif seconds:
            asked.append(seconds)

    monkeypatch.setattr(time, "sleep", sleep)
    return asked


def _stream_class(base: type, url: str) -> type:
    class Items(base):  # type: ignore[valid-type, misc]
        primary_key = "id"
        records_path = "data"
        cursor_field = "updatedAt"
        url_base = url

        def path(self, **kwargs: Any) -> str:
            return "items"

        def next_page_token(self, response: requests.Response) -> None:
            return None

    return Items


class FullRefresh(RecordsAtPath, HttpStream):
    pass


def _read(stream: HttpStream) -> list[Any]:
    return list(stream.read_records(sync_mode=SyncMode.full_refresh, stream_slice={}))


@pytest.mark.parametrize("base", [FullRefresh, IncrementalHttpStream], ids=["records-at-path", "incremental"])
def test_a_429_waits_what_retry_after_says(api, waits, base):
    Api.failures, Api.headers_to_send = 3, {"Retry-After": "7"}
    records = _read(_stream_class(base, api)())
    assert len(records) == 1 and Api.seen == 4
    # airbyte-cdk sleeps a second more than the back-off it is given ("fractions of a second")
    assert waits == [8, 8, 8]


def test_a_503_with_an_http_date_waits_until_then(api, waits):
    Api.failures, Api.status = 1, 503
    Api.headers_to_send = {"Retry-After": email.utils.formatdate(time.time() + 30, usegmt=True)}
    _read(_stream_class(FullRefresh, api)())
    (wait,) = waits
    assert 25 <= wait <= 32  # the date is whole seconds; loose on purpose


def test_without_the_header_airbyte_cdk_backs_off_as_before(api, waits):
    Api.failures = 2
    _read(_stream_class(FullRefresh, api)())
    assert len(waits) == 2 and waits[1] > waits[0]  # exponential, the CDK's own


def test_the_back_off_a_stream_computes(api):
    stream = _stream_class(FullRefresh, api)()

    def response(status: int, retry_after: str | None) -> requests.Response:
        made = requests.Response()
        made.status_code = status
        if retry_after is not None:
            made.headers["Retry-After"] = retry_after
        return made

    strategy = stream.get_backoff_strategy()  # what airbyte-cdk's HTTP client asks

    def wait(answer: Any) -> float | None:
        return strategy.backoff_time(answer, attempt_count=1)

    assert wait(response(429, "2")) == 2
    assert wait(response(503, "0.5")) == 0.5
    assert wait(response(429, "86400")) == RetryAfterBackoff.max_retry_after  # capped
    assert wait(response(429, "soon")) is None  # unreadable: the CDK's back-off
    assert wait(response(429, None)) is None
    assert wait(response(500, "3")) is None  # only 429 and 503 mean "come back then"
    assert wait(requests.ConnectionError()) is None
    past = email.utils.formatdate(time.time() - 60, usegmt=True)
    assert wait(response(429, past)) is None  # already passed: retry at once, as the CDK would


@pytest.mark.parametrize("base", [FullRefresh, IncrementalHttpStream], ids=["records-at-path", "incremental"])
def test_a_stream_on_the_framework_s_bases_warns_of_nothing_deprecated(api, waits, base):
    """airbyte-cdk warns of a stream with a ``backoff_time`` (its deprecated adapter): each
    connector's acceptance run ended in "10 warnings". Built and read with warnings as errors."""
    import warnings

    Api.failures, Api.headers_to_send = 1, {"Retry-After": "2"}
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        records = _read(_stream_class(base, api)())
    assert len(records) == 1 and waits == [3]  # (airbyte-cdk adds a second)


def test_a_connector_s_own_backoff_time_wins(api, waits):
    class OwnBackoff:
        def backoff_time(self, response_or_exception: Any) -> float | None:
            return 0.25

    class Before(_stream_class(FullRefresh, api)):  # type: ignore[misc]
        def backoff_time(self, response_or_exception: Any) -> float | None:
            return 0.25

    class After(RecordsAtPath, OwnBackoff, HttpStream):  # a mixin after the framework's base
        primary_key, records_path, url_base = "id", "data", api

        def path(self, **kwargs: Any) -> str:
            return "items"

        def next_page_token(self, response: requests.Response) -> None:
            return None

    Api.headers_to_send = {"Retry-After": "7"}
    for stream in (Before(), After()):
        Api.failures, Api.seen = 1, 0
        waits.clear()
        _read(stream)
        assert waits == [1.25]


def test_the_demo_connector_reads_an_http_date_and_backs_off_from_5xx():
    from source_framework.demo.source import Users

    stream = Users({"api_key": "k", "api_url": "http://127.0.0.1:9/"})
    date = requests.Response()
    date.status_code = 429
    date.headers["Retry-After"] = email.utils.formatdate(time.time() + 30, usegmt=True)
    assert 25 <= stream.backoff_time(date) <= 31  # was float("Sat, ...") -> ValueError, the stream failed
    seconds = requests.Response()
    seconds.status_code, seconds.headers["Retry-After"] = 429, "3"
    assert stream.backoff_time(seconds) == 3
    error = requests.Response()
    error.status_code = 500
    assert stream.backoff_time(error) == 0.5 and stream.backoff_time(requests.ConnectionError()) == 0.5
