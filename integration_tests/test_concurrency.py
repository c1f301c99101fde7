"""Reading streams and slices concurrently changes when pages are fetched, and nothing a user
can see: the tables and each stream's STATE lines (states and record counts) are those of reading
one stream and one slice after another, on a slow, failing API, on a first sync and on the
incremental one after it.
"""

from __future__ import annotations

import dataclasses
import json
import os

import pytest

from integration_tests.conftest import API_KEY, catalog, config_for, landed_rows, read_table, run_in_process, stream_states, write_json
from source_framework.demo.api import DemoApi
from source_framework.demo.api.faults import Faults

pytestmark = pytest.mark.slow  # many syncs at several concurrencies: the quick tier (-m "not slow") leaves it out

#: the streams with more than one slice: 24 monthly windows, 10 store partitions
STREAMS = ["orders", "store_orders"]
#: differ from run to run whatever the concurrency (checkpoints that wait together for the
#: committer are written as one, so a row's checkpoint number depends on the committer's pace)
RUN_COLUMNS = {"_sf_extracted_at", "_sf_sync_id", "_sf_checkpoint"}


def table_rows(spark, warehouse, name):
    rows = landed_rows(spark, os.path.join(str(warehouse), "demo", name))
    return sorted(json.dumps({c: v for c, v in row.items() if c not in RUN_COLUMNS}, sort_keys=True, default=str) for row in rows)


def states(run):
    """Each stream's STATE lines in order (streams synced at once interleave theirs)."""
    per_stream: dict[str, list] = {}
    for message in run.of_type("STATE"):
        state = message["state"]
        per_stream.setdefault(state["stream"]["stream_descriptor"]["name"], []).append(
            (state["stream"]["stream_state"], state["sourceStats"]["recordCount"]))
    return per_stream


def sync(tmp_path, api, concurrency, label, state=None):
    warehouse = tmp_path / f"warehouse-{concurrency}"
    config = write_json(tmp_path / f"config-{concurrency}.json", config_for(api, warehouse))
    catalog_path = write_json(tmp_path / "catalog.json", catalog(*STREAMS))
    args = ["read", "--config", config, "--catalog", catalog_path, "--concurrency", str(concurrency)]
    if state is not None:
        args += ["--state", state.state_file(str(tmp_path / f"state-{label}-{concurrency}.json"))]
    api.reset_stats()
    run = run_in_process(*args)
    assert run.returncode == 0, run.stderr[-3000:]
    return run, warehouse, api.stats()["max_in_flight"]


def test_concurrency_4_leaves_the_tables_and_states_of_concurrency_1(spark, tmp_path):
    faults = Faults(delay_ms=5, error_every=29)  # a slow API whose 5xx land on other requests each run
    with DemoApi(records=1500, api_key=API_KEY, seed=21, faults=faults).start() as api:
        one, warehouse_one, in_flight_one = sync(tmp_path, api, 1, "first")
        four, warehouse_four, in_flight_four = sync(tmp_path, api, 4, "first")
        assert in_flight_one == 1 and in_flight_four >= 2, "the slices were not read at the same time"
        assert in_flight_four <= 4, "more requests at once than the concurrency allows"
        assert states(four) == states(one)
        for name in STREAMS:
            assert table_rows(spark, warehouse_four, name) == table_rows(spark, warehouse_one, name), name

        api.touch("orders", 7)
        again_one, _, _ = sync(tmp_path, api, 1, "second", state=one)
        again_four, _, _ = sync(tmp_path, api, 4, "second", state=four)
        assert states(again_four) == states(again_one)
        assert any(count for lines in states(again_four).values() for _, count in lines), "the second sync read nothing new"
        for name in STREAMS:
            assert table_rows(spark, warehouse_four, name) == table_rows(spark, warehouse_one, name), name


def test_slices_the_loop_reads_on_itself_leave_the_tables_and_states_of_concurrency_1(spark, tmp_path, monkeypatch):
    """An API that answers at once keeps the process busy, and the loop then reads each slice on
    in its own thread, from the iterator its worker gives it (``runtime.concurrency``). Here the
    pace always finds the process busy, so every slice its worker has not read to the end by then
    is read that way: the tables and STATE lines are those of concurrency 1."""
    from source_framework.runtime import concurrency

    busy = dataclasses.replace(concurrency.TUNING, first_window=1e-9, pace_window=1e-9, saturated=-1.0, idle=-2.0)
    monkeypatch.setattr(concurrency, "TUNING", busy)
    given = []  # per slice the loop asked for: whether its worker gave the iterator (else it had ended)
    take_iterator = concurrency._Channel.take_iterator

    def noted_take(channel):
        chunks, iterator, error = take_iterator(channel)
        given.append(iterator is not None)
        return chunks, iterator, error

    monkeypatch.setattr(concurrency._Channel, "take_iterator", noted_take)
    with DemoApi(records=30_000, api_key=API_KEY, seed=22).start() as api:
        one, warehouse_one, _ = sync(tmp_path, api, 1, "first")
        four, warehouse_four, _ = sync(tmp_path, api, 4, "first")
    assert sum(given) >= 10, "the loop read hardly any slice on itself"
    assert states(four) == states(one)
    for name in STREAMS:
        assert table_rows(spark, warehouse_four, name) == table_rows(spark, warehouse_one, name), name


@pytest.mark.parametrize("value", ["0", "-2", "four"])
def test_a_bad_concurrency_is_refused_before_anything_runs(tmp_path, value):
    with pytest.raises(SystemExit):
        run_in_process("read", "--config", "c.json", "--catalog", "k.json", "--concurrency", value)


def test_a_bad_concurrency_level_in_the_config_names_the_file(demo_api, tmp_path):
    config = write_json(tmp_path / "config.json", config_for(demo_api, tmp_path / "w", concurrency_level="8"))
    run = run_in_process("read", "--config", config, "--catalog", write_json(tmp_path / "k.json", catalog("users")))
    assert run.returncode != 0
    errors = [m["trace"]["error"]["message"] for m in run.of_type("TRACE") if m["trace"]["type"] == "ERROR"]
    assert errors and str(config) in errors[0] and "concurrency_level" in errors[0]
    assert not (tmp_path / "w").exists()


def _broken_users(name, broken_id, how):
    """The demo's users under another name (its own table), whose record ``broken_id`` stops the
    stream in the read loop: without its cursor field (``CursorFieldMissing``), or with a cursor
    earlier than the record before it (``CursorWentBackwards``)."""
    from source_framework.demo.source import SCHEMAS, Users

    class BrokenUsers(Users):
        @property
        def name(self):
            return name

        def get_json_schema(self):
            with open(os.path.join(SCHEMAS, "users.json"), encoding="utf-8") as handle:
                return json.load(handle)

        def parse_response(self, response, **kwargs):
            for record in super().parse_response(response, **kwargs):
                if record["id"] == broken_id:
                    record = dict(record)
                    if how == "missing":
                        del record["updatedAt"]
                    else:
                        record["updatedAt"] = "2000-01-01T00:00:00Z"
                yield record

    return BrokenUsers


def test_streams_that_fail_while_the_loop_reads_their_slice_leave_the_fetch_permits_to_the_next(spark, tmp_path, monkeypatch):
    """The fetch permits are one set for the whole sync. A stream that failed while the loop read
    its slice on itself (from the iterator its worker gave it, with the worker's permit) kept that
    permit: the failure's traceback kept the suspended slice alive. After ``concurrency`` such
    failures, the next stream waited for a permit forever. Five streams fail so at concurrency 4
    (at their first page, and pages later); the sixth must complete."""
    import threading

    from source_framework.demo.source import DemoSource
    from source_framework.runtime import concurrency

    # The process always looks busy: the loop takes every slice its worker has not read to the end.
    busy = dataclasses.replace(concurrency.TUNING, first_window=1e-9, pace_window=1e-9, saturated=-1.0, idle=-2.0)
    monkeypatch.setattr(concurrency, "TUNING", busy)
    given = []
    take_iterator = concurrency._Channel.take_iterator

    def noted_take(channel):
        chunks, iterator, error = take_iterator(channel)
        given.append(iterator is not None)
        return chunks, iterator, error

    monkeypatch.setattr(concurrency._Channel, "take_iterator", noted_take)
    broken = [("users_broken_1", 2, "backwards"), ("users_broken_2", 150, "missing"), ("users_broken_3", 351, "backwards"),
              ("users_broken_4", 420, "missing"), ("users_broken_5", 777, "missing")]

    class SixStreams(DemoSource):
        def streams(self, config):
            users = super().streams(config)[0]
            return [*(_broken_users(name, at, how)(config) for name, at, how in broken), users]

    entries = []
    for name, _, _ in broken:
        entry = catalog("users")["streams"][0]
        entry["stream"]["name"] = name
        entries.append(entry)
    entries += catalog("users")["streams"]
    with DemoApi(records=3000, api_key=API_KEY, seed=23, faults=Faults(delay_ms=1)).start() as api:
        config = write_json(tmp_path / "config.json", config_for(api, tmp_path / "warehouse"))
        catalog_path = write_json(tmp_path / "catalog.json", {"streams": entries})
        done = []
        reading = threading.Thread(target=lambda: done.append(run_in_process(
            "read", "--config", config, "--catalog", catalog_path, "--concurrency", "4", source=SixStreams())), daemon=True)
        reading.start()
        reading.join(timeout=120)
        assert not reading.is_alive(), "the sync hangs: a stream waits for a fetch permit that failed streams kept"
    run = done[0]
    assert sum(given[:5]) == 5, f"the failing streams' slices were not read on by the loop: {given}"
    statuses = {m["trace"]["stream_status"]["stream_descriptor"]["name"]: m["trace"]["stream_status"]["status"]
                for m in run.of_type("TRACE") if m["trace"]["type"] == "STREAM_STATUS"}
    assert statuses == {**{name: "INCOMPLETE" for name, _, _ in broken}, "users": "COMPLETE"}, statuses
    assert run.returncode != 0
    assert "CursorWentBackwards" in run.stderr or "declared sorted" in run.stderr
    assert "has no 'updatedAt' field" in run.stderr
    assert stream_states(run, "users"), "the sixth stream printed no STATE"
    assert read_table(spark, str(tmp_path / "warehouse" / "demo" / "users")).count() == 3000


def test_a_cdk_stream_that_moves_its_own_state_and_declares_concurrency_safe_prints_no_state_ahead_of_its_records(tmp_path):
    """A plain airbyte-cdk ``HttpStream`` with ``CheckpointMixin`` (source-commcare's style) moves
    its cursor in ``read_records``. Declaring ``concurrency_safe = True`` had a worker thread run
    that code up to a slice's capacity ahead of the read loop, and the loop's checkpoint read the
    state the worker had reached: a STATE ahead of the records before it (a crash, then a resume
    from it, loses the records between). The opt-in is refused for such a stream, saying why.
    Here the loop is slow at record 50 (a transform; any back-pressure does it), a checkpoint."""
    import time
    from datetime import UTC, datetime

    from airbyte_cdk.models import ConnectorSpecification
    from airbyte_cdk.sources import AbstractSource
    from airbyte_cdk.sources.streams import CheckpointMixin
    from airbyte_cdk.sources.streams.http import HttpStream
    from airbyte_cdk.sources.streams.http.requests_native_auth import TokenAuthenticator
    from airbyte_cdk.sources.utils.transform import TransformConfig, TypeTransformer

    from source_framework.demo.source import SCHEMAS

    def moment(value):
        return datetime.fromisoformat(str(value).replace("Z", "+00:00")).astimezone(UTC)

    class Users(HttpStream, CheckpointMixin):
        primary_key = "id"
        cursor_field = "updatedAt"
        state_checkpoint_interval = 50
        concurrency_safe = True
        transformer = TypeTransformer(TransformConfig.CustomSchemaNormalization)

        def __init__(self, config):
            super().__init__(authenticator=TokenAuthenticator(token=config["api_key"]))
            self._url, self._cursor = config["api_url"].rstrip("/") + "/", moment(config["start_date"])

        url_base = property(lambda self: self._url)

        def path(self, **kwargs):
            return "users"

        def get_json_schema(self):
            with open(os.path.join(SCHEMAS, "users.json"), encoding="utf-8") as handle:
                return json.load(handle)

        @property
        def state(self):
            return {self.cursor_field: self._cursor.strftime("%Y-%m-%dT%H:%M:%SZ")}

        @state.setter
        def state(self, value):
            if self.cursor_field in value:
                self._cursor = max(self._cursor, moment(value[self.cursor_field]))

        def request_params(self, stream_state, stream_slice=None, next_page_token=None):
            return {"since": self.state[self.cursor_field], "limit": 40, **(next_page_token or {})}

        def next_page_token(self, response):
            token = response.json().get("next_cursor")
            return {"cursor": token} if token else None

        def parse_response(self, response, **kwargs):
            yield from response.json()["data"]

        def read_records(self, *args, **kwargs):
            for record in super().read_records(*args, **kwargs):
                self._cursor = max(self._cursor, moment(record[self.cursor_field]))
                yield record

    @Users.transformer.registerCustomTransform
    def slow_at_record_50(value, schema):  # runs in the read loop's thread
        if schema.get("type") == ["null", "integer"] and value == 50:
            time.sleep(0.5)
        return value

    class Source(AbstractSource):
        def spec(self, logger):
            return ConnectorSpecification(connectionSpecification={"type": "object", "properties": {}})

        def check_connection(self, logger, config):
            return True, None

        def streams(self, config):
            return [Users(config)]

    with DemoApi(records=1500, api_key=API_KEY, seed=24).start() as api:
        config = write_json(tmp_path / "config.json", config_for(api, tmp_path / "warehouse"))
        run = run_in_process("read", "--config", config, "--catalog", write_json(tmp_path / "k.json", catalog("users")),
                             "--concurrency", "4", "--destination", "stdout", source=Source())
    assert run.returncode == 0, run.stderr[-3000:]
    newest, states_seen = None, 0
    for message in run.messages:
        if message["type"] == "RECORD":
            newest = max(newest or moment(message["record"]["data"]["updatedAt"]), moment(message["record"]["data"]["updatedAt"]))
        elif message["type"] == "STATE":
            states_seen += 1
            cursor = moment(message["state"]["stream"]["stream_state"]["updatedAt"])
            assert newest is not None and cursor <= newest, (
                f"STATE {states_seen} says {cursor}, but the newest record before it is {newest}")
    assert states_seen > 10
    assert "users" in run.stderr and "concurrency_safe" in run.stderr and "read_records" in run.stderr
