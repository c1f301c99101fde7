"""Tests for the demo API, against a real server on 127.0.0.1.

The connector tests trust this API as ground truth, so these pin down what it promises:
determinism, each pagination style visiting every record exactly once, filter boundaries,
touched records moving, faults on schedule, and errors as JSON.
"""

from __future__ import annotations

import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
import requests

import source_framework.demo.api as api_package
from source_framework.demo.api import DemoApi, Faults
from source_framework.demo.api.data import T0, format_timestamp

PROJECT_ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture
def session():
    with requests.Session() as http:
        yield http


def get(session: requests.Session, api: DemoApi, path: str, **params) -> dict:
    response = session.get(api.url + path, params=params, timeout=10)
    assert response.status_code == 200, response.text
    assert response.headers["Content-Type"] == "application/json"
    return response.json()


def all_users(session, api, limit=97, **filters) -> list[dict]:
    """Every user matching ``filters``, following next_cursor to the end."""
    records, cursor = [], None
    while True:
        params = dict(filters, limit=limit)
        if cursor:
            params["cursor"] = cursor
        page = get(session, api, "/users", **params)
        records.extend(page["data"])
        cursor = page["next_cursor"]
        if cursor is None:
            return records
        assert len(page["data"]) == limit


def all_orders(session, api, per_page=89, **filters) -> list[dict]:
    """Every order matching ``filters``, walking page numbers; checks the page arithmetic."""
    first = get(session, api, "/orders", per_page=per_page, **filters)
    total, total_pages = first["total"], first["total_pages"]
    assert total_pages == (total + per_page - 1) // per_page
    records = list(first["data"])
    for page in range(2, total_pages + 1):
        body = get(session, api, "/orders", page=page, per_page=per_page, **filters)
        assert (body["page"], body["per_page"], body["total"]) == (page, per_page, total)
        records.extend(body["data"])
    assert len(records) == total
    return records


def all_store_orders(session, api, store_id, limit=41, **filters) -> list[dict]:
    records, offset = [], 0
    while offset is not None:
        body = get(session, api, f"/stores/{store_id}/orders", offset=offset, limit=limit, **filters)
        records.extend(body["data"])
        offset = body["next_offset"]
    return records


def keys(records) -> list[tuple[str, int]]:
    return [(record["updatedAt"], record["id"]) for record in records]


def test_same_knobs_serve_identical_bytes_and_seed_changes_data(session):
    with DemoApi(records=500, seed=7).start() as one, DemoApi(records=500, seed=7).start() as two:
        for path, params in [
            ("/users", {"limit": 50, "since": "2025-06-01T00:00:00Z"}),
            ("/orders", {"page": 3, "per_page": 20}),
            ("/stores", {}),
            ("/stores/4/orders", {"limit": 5}),
            ("/products", {"offset": 10, "limit": 10}),
        ]:
            first = session.get(one.url + path, params=params).content
            assert first == session.get(two.url + path, params=params).content, path
        with DemoApi(records=500, seed=8).start() as other:
            assert get(session, other, "/users")["data"] != get(session, one, "/users")["data"]


def test_cursor_paging_visits_every_user_once_in_updated_order(session):
    with DemoApi(records=1234).start() as api:
        users = all_users(session, api)
    assert [user["id"] for user in users] == list(range(1, 1235))
    assert keys(users) == sorted(keys(users))
    user = users[0]
    assert set(user) == {"id", "name", "email", "address", "company", "job", "createdAt", "updatedAt"}
    assert set(user["address"]) == {"street", "city", "zip", "country"}
    assert set(user["company"]) == {"name", "industry"}
    assert user["updatedAt"] == "2025-01-01T00:00:00Z" and user["createdAt"] <= user["updatedAt"]


def test_since_is_inclusive_and_until_exclusive(session):
    with DemoApi(records=300).start() as api:
        users = all_users(session, api, limit=1000)
        since, until = users[40]["updatedAt"], users[120]["updatedAt"]
        window = all_users(session, api, limit=33, since=since, until=until)
        assert [u["id"] for u in window] == [u["id"] for u in users[40:120]]
        # One second either side moves each boundary by exactly one record (step > 1 s here).
        since_plus = format_timestamp(T0 + 40 * api.data.step + 1)
        assert all_users(session, api, since=since_plus, until=until)[0]["id"] == 42
        assert get(session, api, "/users", until="2025-01-01T00:00:00Z")["data"] == []
        assert get(session, api, "/users", since="2030-01-01T00:00:00+00:00")["data"] == []
        # Offsets and fractions are accepted; fractional bounds round up to the next second.
        assert get(session, api, "/users", since="2025-01-01T01:00:00+01:00", limit=1)["data"][0]["id"] == 1
        assert get(session, api, "/users", since="2025-01-01T00:00:00.5Z", limit=1)["data"][0]["id"] == 2


def test_orders_page_arithmetic_covers_each_matching_order_once(session):
    with DemoApi(records=1000).start() as api:
        everything = all_orders(session, api, per_page=1000)
        assert [o["id"] for o in everything] == list(range(1, 1001))
        start, end = everything[100]["updatedAt"], everything[801]["updatedAt"]
        window = all_orders(session, api, per_page=89, start=start, end=end)
        assert [o["id"] for o in window] == list(range(101, 802))
        assert keys(window) == sorted(keys(window))
        beyond = get(session, api, "/orders", page=99, per_page=89, start=start, end=end)
        assert beyond["data"] == [] and beyond["total"] == 701 and beyond["total_pages"] == 8
        order = everything[0]
        assert order["storeId"] == 1 and order["status"] in {"pending", "paid", "shipped", "cancelled"}
        assert 1 <= len(order["items"]) <= 3
        assert order["amount"] == round(sum(i["quantity"] * i["price"] for i in order["items"]), 2)


def test_store_orders_are_the_orders_of_that_store(session):
    with DemoApi(records=400, stores=10).start() as api:
        orders = all_orders(session, api, per_page=1000)
        stores = get(session, api, "/stores")["data"]
        assert [store["id"] for store in stores] == list(range(1, 11))
        for store in stores:
            expected = [o for o in orders if o["storeId"] == store["id"]]
            assert all_store_orders(session, api, store["id"]) == expected
        since = orders[200]["updatedAt"]
        expected = [o for o in orders if o["storeId"] == 3 and o["updatedAt"] >= since]
        assert all_store_orders(session, api, 3, limit=7, since=since) == expected
        for unknown in ("11", "0", "abc"):
            response = session.get(f"{api.url}/stores/{unknown}/orders")
            assert response.status_code == 404 and "error" in response.json()


def test_products_offset_paging(session):
    with DemoApi(records=2000).start() as api:
        products, offset = [], 0
        while True:
            body = get(session, api, "/products", offset=offset, limit=30)
            assert body["total"] == 200
            if not body["data"]:
                break
            products.extend(body["data"])
            offset += len(body["data"])
        assert [p["id"] for p in products] == list(range(1, 201))
        assert products[4]["updatedAt"] == "2025-01-01T05:00:00Z"
        assert set(products[0]) == {"id", "name", "category", "price", "sku", "updatedAt"}


def test_touch_moves_records_to_the_end_exactly_once(session):
    with DemoApi(records=500).start() as api:
        before = all_users(session, api, limit=1000)
        latest = max(user["updatedAt"] for user in before)
        touched = api.touch("users", 7)
        assert len(set(touched)) == 7
        after_latest = format_timestamp(T0 + 499 * api.data.step + 1)  # one second after `latest`
        changed = all_users(session, api, limit=3, since=after_latest)
        assert sorted(u["id"] for u in changed) == sorted(touched)
        assert keys(changed) == sorted(keys(changed)) and all(u["updatedAt"] > latest for u in changed)
        # since == latest is inclusive: it also returns the record that held the latest time, if untouched.
        inclusive = {u["id"] for u in all_users(session, api, since=latest)}
        assert inclusive == set(touched) | ({500} - set(touched))
        after = all_users(session, api, limit=64)
        assert Counter(u["id"] for u in after) == Counter(range(1, 501))
        assert keys(after) == sorted(keys(after))
        old = {u["id"]: u for u in before}
        for user in changed:
            assert user["createdAt"] == old[user["id"]]["createdAt"]
        # Orders: the per-store view follows the move too.
        order_ids = api.touch("orders", 5)
        orders = all_orders(session, api, per_page=70)
        assert Counter(o["id"] for o in orders) == Counter(range(1, 501))
        assert [o["id"] for o in orders[-5:]] == order_ids
        store_id = orders[-1]["storeId"]
        assert all_store_orders(session, api, store_id)[-1]["id"] == order_ids[-1]
        # Touching again re-moves an already-moved record without duplicating it.
        api.touch("users", 500)
        assert Counter(u["id"] for u in all_users(session, api, limit=1000)) == Counter(range(1, 501))


def test_generation_replays_touch_rounds(session):
    with DemoApi(records=300, touch_count=9).start() as live, DemoApi(records=300, touch_count=9, generation=1).start() as replay:
        for stream in ("users", "orders", "products"):
            assert len(live.touch(stream, 9)) == 9
        assert all_users(session, live) == all_users(session, replay)
        assert all_orders(session, live) == all_orders(session, replay)
        assert get(session, live, "/products", limit=1000) == get(session, replay, "/products", limit=1000)
        live_products = {p["id"]: p for p in get(session, live, "/products", limit=1000)["data"]}
        moved = [p for p in live_products.values() if p["updatedAt"] >= "2026-01-01T00:00:00Z"]
        assert len(moved) == 9


def test_admin_touch_faults_and_stats(session):
    with DemoApi(records=100, api_key="secret").start() as api:
        ids = session.post(api.url + "/_admin/touch", json={"stream": "orders", "count": 3}).json()["ids"]
        assert len(ids) == 3
        assert session.post(api.url + "/_admin/touch", json={"stream": "stores", "count": 1}).status_code == 400
        faults = session.post(api.url + "/_admin/faults", json={"delay_ms": 1}).json()
        assert faults == Faults(delay_ms=1).to_dict() and api.faults == Faults(delay_ms=1)
        assert session.post(api.url + "/_admin/faults", json={"nope": 1}).status_code == 400
        session.get(api.url + "/me", headers={"Authorization": "Bearer secret"})
        session.get(api.url + "/me")
        stats = session.get(api.url + "/_admin/stats").json()
        assert stats == {"requests": 2, "max_in_flight": 1, "by_path": {"/me": 2}, "status_counts": {"200": 1, "401": 1}}
        assert session.post(api.url + "/_admin/reset_stats").json() == {"ok": True}
        assert api.stats()["requests"] == 0


def test_api_key_is_required_on_data_endpoints(session):
    with DemoApi(records=10, api_key="s3cret").start() as api:
        for headers in ({}, {"Authorization": "Bearer wrong"}, {"Authorization": "s3cret"}):
            response = session.get(api.url + "/users", headers=headers)
            assert response.status_code == 401
            assert response.json() == {"error": "invalid api key"}
        good = {"Authorization": "Bearer s3cret"}
        assert session.get(api.url + "/me", headers=good).json() == {"ok": True}
        assert session.get(api.url + "/stores", headers=good).status_code == 200


def test_every_nth_request_is_rate_limited_with_retry_after(session):
    with DemoApi(records=10, faults=Faults(rate_limit_every=3, retry_after=2)).start() as api:
        statuses = []
        for _ in range(7):
            response = session.get(api.url + "/users")
            session.get(api.url + "/_admin/stats")  # admin requests are not counted
            statuses.append(response.status_code)
            if response.status_code == 429:
                assert response.headers["Retry-After"] == "2"
                assert "error" in response.json()
        assert statuses == [200, 200, 429, 200, 200, 429, 200]
        api.set_faults(Faults(rate_limit_every=1, retry_after=0.5))
        assert session.get(api.url + "/users").headers["Retry-After"] == "0.5"
        assert api.stats()["status_counts"] == {"200": 5, "429": 3}


def test_every_nth_request_fails_with_alternating_5xx(session):
    with DemoApi(records=10, faults=Faults(error_every=2)).start() as api:
        statuses = [session.get(api.url + "/orders").status_code for _ in range(8)]
        assert statuses == [200, 500, 200, 503, 200, 500, 200, 503]


class _ServerClock:
    """The demo server's ``time`` module, its sleeps recorded instead of waited. Only the server's:
    patching ``time.sleep`` itself recorded every thread's (py4j's finalizer thread, left by a test
    that started Spark in the same worker, sleeps 1 s in a loop: it spun, 25,000 times)."""

    def __init__(self) -> None:
        self.slept: list[float] = []

    def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)

    def __getattr__(self, name: str) -> Any:
        return getattr(time, name)


def test_delay_and_unsorted_pages(session, monkeypatch):
    clock = _ServerClock()
    monkeypatch.setattr("source_framework.demo.api.server.time", clock)  # the delay asked for, not waited
    with DemoApi(records=50, faults=Faults(delay_ms=60, unsorted_pages=True)).start() as api:
        page = get(session, api, "/users", limit=10)
        assert clock.slept == [0.06]
        assert [u["id"] for u in page["data"]] == list(range(10, 0, -1))
        api.set_faults(Faults(unsorted_pages=True))
        ids = [u["id"] for u in all_users(session, api, limit=10)]
        assert sorted(ids) == list(range(1, 51)) and len(ids) == 50


@pytest.mark.parametrize(
    "path, params",
    [
        ("/users", {"since": "yesterday"}),
        ("/users", {"until": "2025-13-01T00:00:00Z"}),
        ("/users", {"limit": "-1"}),
        ("/users", {"limit": "ten"}),
        ("/users", {"cursor": "not-a-cursor"}),
        ("/orders", {"page": "0"}),
        ("/orders", {"start": "nope"}),
        ("/orders", {"per_page": "-5"}),
        ("/products", {"offset": "-1"}),
        ("/stores/1/orders", {"since": "x"}),
    ],
)
def test_bad_parameters_answer_400_json(session, path, params):
    with DemoApi(records=10).start() as api:
        response = session.get(api.url + path, params=params)
        assert response.status_code == 400
        assert response.headers["Content-Type"] == "application/json"
        assert isinstance(response.json()["error"], str)


def test_unknown_paths_and_methods_are_json_errors(session):
    with DemoApi(records=10).start() as api:
        assert session.get(api.url + "/nope").status_code == 404
        response = session.post(api.url + "/users", json={})
        assert response.status_code == 405 and "error" in response.json()


def test_limits_are_capped_at_1000(session):
    with DemoApi(records=1500).start() as api:
        assert len(get(session, api, "/users", limit=5000)["data"]) == 1000
        assert get(session, api, "/orders", per_page=5000)["per_page"] == 1000


def test_single_record(session):
    with DemoApi(records=1).start() as api:
        for limit in (1, 100):
            users = get(session, api, "/users", limit=limit)
            assert [u["id"] for u in users["data"]] == [1] and users["next_cursor"] is None
        orders = get(session, api, "/orders")
        assert (orders["total"], orders["total_pages"], len(orders["data"])) == (1, 1, 1)
        assert len(get(session, api, "/stores/1/orders")["data"]) == 1
        assert get(session, api, "/stores/2/orders") == {"data": [], "next_offset": None}
        assert get(session, api, "/products", limit=1000)["total"] == 50
        assert api.touch("users", 5) == [1]
        assert [u["id"] for u in all_users(session, api)] == [1]


class LinesRun:
    """Counts the lines the demo API's own code runs, in every thread: its work, counted instead of timed."""

    def __init__(self) -> None:
        self.folder = str(Path(api_package.__file__).parent)
        self.count = 0

    def __call__(self, frame: Any, event: str, arg: Any) -> Any:
        if not frame.f_code.co_filename.startswith(self.folder):
            return None  # not the API's code: no line events from it
        if event == "line":
            self.count += 1
        return self

    def __enter__(self) -> LinesRun:
        self._saved = sys.gettrace(), threading.gettrace()
        sys.settrace(self)
        threading.settrace(self)  # the server's threads, started from here on
        return self

    def __exit__(self, *exc: Any) -> None:
        sys.settrace(self._saved[0])
        threading.settrace(self._saved[1])  # type: ignore[arg-type]


def test_millions_of_records_stay_fast(session):
    """Every request costs O(page), not O(records): a single pass over the records would run at
    least one line of the API per record, so the API's lines are counted, not its time."""
    records = 2_000_000
    with LinesRun() as lines, DemoApi(records=records).start() as api:
        first = get(session, api, "/users", limit=1000)
        assert [u["id"] for u in first["data"]] == list(range(1, 1001)) and first["next_cursor"]
        second = get(session, api, "/users", limit=1000, cursor=first["next_cursor"])
        assert second["data"][0]["id"] == 1001
        last = get(session, api, "/orders", page=2000, per_page=1000)
        assert last["total"] == 2_000_000 and last["data"][-1]["id"] == 2_000_000
        assert get(session, api, "/stores/7/orders", offset=199_990, limit=100)["next_offset"] is None
        ids = api.touch("users", 3)
        tail = get(session, api, "/users", since="2026-01-01T00:00:00Z")
        assert [u["id"] for u in tail["data"]] == ids
    assert 0 < lines.count < records // 4  # about 60 lines per record served (3,013 of them)


def test_command_line_serves_the_same_bytes_and_stops_on_sigterm(session):
    process = subprocess.Popen(
        [sys.executable, "-m", "source_framework.demo.api", "--port", "0", "--records", "200",
         "--seed", "5", "--generation", "1", "--api-key", "k"],
        cwd=PROJECT_ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        line = process.stderr.readline().strip()
        assert line.startswith("demo API listening on http://127.0.0.1:"), line
        url = line.rsplit(" ", 1)[1]
        headers = {"Authorization": "Bearer k"}
        with DemoApi(records=200, seed=5, generation=1, api_key="k").start() as embedded:
            for path in ("/users?limit=1000", "/orders?per_page=1000", "/products?limit=1000"):
                remote = session.get(url + path, headers=headers)
                assert remote.status_code == 200
                assert remote.content == session.get(embedded.url + path, headers=headers).content
        process.send_signal(signal.SIGTERM)
        assert process.wait(timeout=10) == 0
        assert process.stdout.read() == ""
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
        process.stdout.close()
        process.stderr.close()


def test_a_caching_api_serves_the_same_page_until_data_changes():
    import requests

    from source_framework.demo.api import DemoApi

    with DemoApi(records=300, api_key="k", cache_pages=True).start() as api:
        headers = {"Authorization": "Bearer k"}
        get = lambda: requests.get(f"{api.url}/users", params={"limit": 50}, headers=headers, timeout=10)  # noqa: E731
        first, again = get(), get()
        assert first.content == again.content and len(first.json()["data"]) == 50
        touched = api.touch("users", 300)
        changed = get().json()["data"]
        assert {r["id"] for r in changed} & set(touched) and get().json()["data"] != first.json()["data"]
