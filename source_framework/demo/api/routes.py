"""The demo API's data endpoints, free of sockets and threads so the API's contract reads in one place."""

from __future__ import annotations

import base64
import binascii
import re
from typing import Any

from source_framework.demo.api.data import DemoData, parse_timestamp

DEFAULT_LIMIT = 100
MAX_LIMIT = 1000
_STORE_ORDERS = re.compile(r"^/stores/([^/]+)/orders$")
_CURSOR_PREFIX = "v1"

Params = dict[str, list[str]]


class ApiError(Exception):
    """A request the API refuses; ``status`` and ``message`` become the JSON error response."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


def encode_cursor(updated_at: int, record_id: int) -> str:
    raw = f"{_CURSOR_PREFIX}:{updated_at}:{record_id}".encode()
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode()


def decode_cursor(token: str) -> tuple[int, int]:
    try:
        raw = base64.urlsafe_b64decode(token + "=" * (-len(token) % 4)).decode()
        prefix, updated_at, record_id = raw.split(":")
        if prefix != _CURSOR_PREFIX:
            raise ValueError(prefix)
        return int(updated_at), int(record_id)
    except (ValueError, binascii.Error, UnicodeDecodeError):
        raise ApiError(400, "invalid cursor") from None


class DataRoutes:
    def __init__(self, data: DemoData) -> None:
        self.data = data

    def handle(self, path: str, params: Params, *, unsorted_pages: bool = False) -> dict[str, Any]:
        if path == "/users":
            return self.users(params, unsorted_pages=unsorted_pages)
        if path == "/orders":
            return self.orders(params)
        if path == "/stores":
            return {"data": self.data.stores()}
        if path == "/products":
            return self.products(params)
        if path == "/me":
            return {"ok": True}
        match = _STORE_ORDERS.match(path)
        if match:
            return self.store_orders(match.group(1), params)
        raise ApiError(404, f"no such endpoint: {path}")

    def users(self, params: Params, *, unsorted_pages: bool = False) -> dict[str, Any]:
        cursor = _text(params, "cursor")
        after = decode_cursor(cursor) if cursor else None
        page, last_key = self.data.users_page(
            since=_timestamp(params, "since"),
            until=_timestamp(params, "until"),
            after=after,
            limit=_integer(params, "limit", DEFAULT_LIMIT, minimum=1, maximum=MAX_LIMIT),
        )
        if unsorted_pages:
            page.reverse()  # the cursor still resumes after the page's last record in key order
        return {"data": page, "next_cursor": encode_cursor(*last_key) if last_key else None}

    def orders(self, params: Params) -> dict[str, Any]:
        page = _integer(params, "page", 1, minimum=1)
        per_page = _integer(params, "per_page", DEFAULT_LIMIT, minimum=1, maximum=MAX_LIMIT)
        records, total = self.data.orders_page(
            start=_timestamp(params, "start"), end=_timestamp(params, "end"), page=page, per_page=per_page
        )
        return {
            "data": records,
            "page": page,
            "per_page": per_page,
            "total_pages": -(-total // per_page),
            "total": total,
        }

    def store_orders(self, store_text: str, params: Params) -> dict[str, Any]:
        try:
            store_id = int(store_text)
        except ValueError:
            raise ApiError(404, f"no such store: {store_text}") from None
        offset = _integer(params, "offset", 0, minimum=0)
        try:
            records, more = self.data.store_orders(
                store_id,
                since=_timestamp(params, "since"),
                offset=offset,
                limit=_integer(params, "limit", DEFAULT_LIMIT, minimum=1, maximum=MAX_LIMIT),
            )
        except KeyError:
            raise ApiError(404, f"no such store: {store_id}") from None
        return {"data": records, "next_offset": offset + len(records) if more else None}

    def products(self, params: Params) -> dict[str, Any]:
        records = self.data.products_page(
            offset=_integer(params, "offset", 0, minimum=0),
            limit=_integer(params, "limit", DEFAULT_LIMIT, minimum=1, maximum=MAX_LIMIT),
        )
        return {"data": records, "total": self.data.products_count}


def _text(params: Params, name: str) -> str | None:
    values = params.get(name)
    return values[0] if values else None


def _timestamp(params: Params, name: str) -> int | None:
    text = _text(params, name)
    if text is None or text == "":
        return None
    try:
        return parse_timestamp(text)
    except ValueError:
        raise ApiError(400, f"{name} must be an ISO-8601 timestamp, got {text!r}") from None


def _integer(params: Params, name: str, default: int, *, minimum: int, maximum: int | None = None) -> int:
    """An integer parameter; below ``minimum`` is an error, above ``maximum`` is capped (as SaaS APIs do)."""
    text = _text(params, name)
    if text is None or text == "":
        return default
    try:
        value = int(text)
    except ValueError:
        raise ApiError(400, f"{name} must be an integer, got {text!r}") from None
    if value < minimum:
        raise ApiError(400, f"{name} must be >= {minimum}, got {value}")
    return min(value, maximum) if maximum is not None else value
