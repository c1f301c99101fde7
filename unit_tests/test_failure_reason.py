"""The summary's reason for a failed stream, and one traceback per distinct error on stderr
(issue 51, item 7); the end-to-end run is ``integration_tests/test_failure_output.py``."""

from __future__ import annotations

import io
import logging

import requests
from airbyte_cdk.utils.traced_exception import AirbyteTracedException

from source_framework.runtime.error_log import REASON_LIMIT, RepeatedErrors, failure_reason
from source_framework.runtime.results import ReadResult, StreamResult
from source_framework.runtime.secrets import SecretFilter
from source_framework.runtime.summary import format_summary

SECRET = "sk-live-0123456789abcdef"


def test_the_summary_says_why_a_stream_failed_without_the_secret():
    failed = StreamResult(name="orders")
    failed.failed(requests.HTTPError(f"401 Client Error: Unauthorized for url: https://api.example/orders?key={SECRET}"))
    text = format_summary(ReadResult([StreamResult(name="users"), failed]), 3.0, SecretFilter([SECRET]))
    (line,) = [line for line in text.splitlines() if "failed:" in line]
    assert line.startswith("orders failed: HTTPError: 401 Client Error: Unauthorized for url: https://api.example/orders?key=****")
    assert SECRET not in text and "users failed" not in text


def test_a_reason_is_one_short_line():
    assert failure_reason(KeyError("id")) == "KeyError: 'id'"
    reason = failure_reason(ValueError("first line " + "x" * 300 + "\nsecond line"))
    assert "\n" not in reason and len(reason) == REASON_LIMIT and reason.endswith("...")
    assert failure_reason(KeyError()) == "KeyError"


def test_a_secret_cut_in_half_is_still_masked():
    reason = failure_reason(ValueError("y" * (REASON_LIMIT - 10) + SECRET), SecretFilter([SECRET]))
    assert SECRET[:8] not in reason


def test_an_airbyte_cdk_wrapper_too_long_to_show_gives_its_cause():
    cause = ValueError("HTTP Status Code: 500. Error: Internal server error.")
    error = AirbyteTracedException(
        internal_message=f"Exhausted available request attempts. Exception: {cause}",
        message=f"Exhausted available request attempts. Please see logs for more details. Exception: {cause}",
        exception=cause,
    )
    assert failure_reason(error) == "ValueError: HTTP Status Code: 500. Error: Internal server error."
    short = AirbyteTracedException(message="API rate limit exceeded.", exception=cause)
    assert failure_reason(short) == "API rate limit exceeded."


def test_the_same_error_logged_again_prints_one_counted_line_on_every_handler():
    streams = [io.StringIO(), io.StringIO()]
    logger = logging.getLogger("test_failure_reason")
    logger.propagate = False
    repeats = RepeatedErrors()
    for stream in streams:
        handler = logging.StreamHandler(stream)
        handler.addFilter(repeats)
        logger.addHandler(handler)
    try:
        for attempt in range(4):
            try:
                raise RuntimeError("HTTP 500" if attempt < 3 else "HTTP 503")
            except RuntimeError:
                logger.error("retries exhausted", exc_info=True)
    finally:
        logger.handlers.clear()
    for stream in streams:
        text = stream.getvalue()
        assert text.count("Traceback") == 2  # one per distinct error: the 500 and the 503
        assert "retries exhausted (RuntimeError: the same error 1 more time; its traceback is above)" in text
        assert "retries exhausted (RuntimeError: the same error 2 more times; its traceback is above)" in text
    assert repeats.repeats() == {("RuntimeError", "HTTP 500"): 2, ("RuntimeError", "HTTP 503"): 0}
