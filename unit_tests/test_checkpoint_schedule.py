"""The checkpoint schedule of ``read``: when STATEs come out, and that each waits for its commit."""

from __future__ import annotations

import http.server
import json
import sys
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import Future
from typing import Any

import pytest

from source_framework.helpers.tuning import TUNING
from source_framework.runtime.process import tuned_for_streaming
from unit_tests.conftest import ConditionWaits, CursorStream, EventOutput, RecordingDestination, RecordingSink, sync


def run(stream: CursorStream, input_state: dict | None = None, max_checkpoints_ahead: int | None = None, **sink_options: Any):
    result, out, destination = sync(stream, input_state=input_state, max_checkpoints_ahead=max_checkpoints_ahead, **sink_options)
    return result, out.states, destination, out


def cursors(states: list[dict]) -> list[int]:
    return [s["stream"]["stream_state"]["n"] for s in states]


def counts(states: list[dict]) -> list[int]:
    return [int(s["sourceStats"]["recordCount"]) for s in states]


def test_slices_only_checkpoint_after_each_slice():
    _, states, _, _ = run(CursorStream([[1, 2, 3], [4, 5], [6]]))
    assert cursors(states) == [3, 5, 6]
    assert counts(states) == [3, 2, 1]


def test_interval_only_checkpoints_every_n_records_then_at_the_end():
    _, states, _, _ = run(CursorStream([list(range(1, 11))], interval=3))
    assert cursors(states) == [3, 6, 9, 10]
    assert counts(states) == [3, 3, 3, 1]


def test_interval_counter_restarts_with_each_slice():
    _, states, _, _ = run(CursorStream([[1, 2, 3, 4, 5], [6, 7, 8, 9, 10]], interval=2))
    # CDK 7 counts across the stream and would checkpoint at 6 and 8 in the second slice.
    assert cursors(states) == [2, 4, 5, 7, 9, 10]
    assert sum(counts(states)) == 10


def test_interval_equal_to_slice_size_gives_no_duplicate_state():
    _, states, _, _ = run(CursorStream([[1, 2, 3, 4], [5, 6, 7, 8]], interval=4))
    assert cursors(states) == [4, 8]
    assert all(a != b for a, b in zip(states, states[1:], strict=False))


def test_empty_slices_emit_nothing_but_the_stream_still_ends_with_a_state():
    _, states, _, _ = run(CursorStream([[], [1, 2], [], []]))
    assert cursors(states) == [2]
    _, states, _, _ = run(CursorStream([[], []]), input_state={"n": 99})
    assert cursors(states) == [99]
    assert counts(states) == [0]


def test_no_two_consecutive_identical_states_when_cursor_ties():
    _, states, destination, _ = run(CursorStream([[1, 1, 1, 1], [1, 1]], interval=2))
    assert cursors(states) == [1]
    # the tied records still reached the table, covered by the one state
    assert len(destination.sinks["numbers"].landed) == 6


def test_state_waits_for_its_commit_and_states_keep_their_order():
    _, states, destination, _ = run(CursorStream([[1, 2, 3], [4, 5, 6], [7]], interval=2), hold=True)
    log = destination.events.log
    assert [entry for entry in log if entry[0] == "STATE"] == [("STATE", {"n": n}) for n in (2, 3, 5, 6, 7)]
    for index, (kind, state) in enumerate(log):
        if kind == "STATE":
            assert ("commit", state) in log[:index], f"STATE {state} printed before its commit"


def test_failed_commit_prints_no_state_and_marks_stream_incomplete():
    result, states, _, out = run(CursorStream([[1, 2], [3, 4], [5]]), fail_at=2)
    assert cursors(states) == [2]
    assert result.failed and "disk full" in str(result.failed[0].error)
    statuses = [m["trace"]["stream_status"]["status"] for m in out.lines if m["type"] == "TRACE" and m["trace"]["type"] == "STREAM_STATUS"]
    assert statuses == ["STARTED", "RUNNING", "INCOMPLETE"]
    errors = [m for m in out.lines if m["type"] == "TRACE" and m["trace"]["type"] == "ERROR"]
    assert errors and errors[0]["trace"]["error"]["stream_descriptor"]["name"] == "numbers"


def test_every_record_is_covered_by_the_final_state():
    result, states, destination, _ = run(CursorStream([[1, 2, 3], [4], [5, 6, 7, 8, 9]], interval=2))
    assert result.streams[0].records == 9
    assert len(destination.sinks["numbers"].landed) == 9
    assert sum(counts(states)) == 9
    assert cursors(states)[-1] == 9


class StalledSink(RecordingSink):
    """Commits that complete only when the test says so (Spark far behind the reading)."""

    def __init__(self, events: Any) -> None:
        super().__init__(events)
        self.written = 0
        self.asked: list[tuple[Future, Any]] = []  # (what the runtime waits on, its receipt)

    def write(self, record: Any) -> None:
        self.written += 1
        super().write(record)

    def commit(self, state: Any, notes: Any = None) -> Future:
        future: Future = Future()
        self.asked.append((future, super().commit(state, notes).result()))
        return future


@pytest.mark.parametrize("bound", [None, 1, 3])
def test_reading_stays_a_bounded_number_of_checkpoints_ahead_of_its_last_state(monkeypatch, bound):
    """However slow the commits, a crash can cost at most the bound + 1 checkpoints' records: the
    read's ``max_checkpoints_ahead`` (None: the default, TUNING.max_in_flight). At 1, reading waits for the
    oldest commit as soon as a second checkpoint is asked."""
    ahead = TUNING.max_in_flight if bound is None else bound
    sink_box: list[StalledSink] = []

    def open_stream(self: RecordingDestination, target: Any) -> StalledSink:
        sink_box.append(StalledSink(self.events))
        self.sinks[target.name] = sink_box[0]
        return sink_box[0]

    monkeypatch.setattr(RecordingDestination, "open_stream", open_stream)
    waits, outcome = ConditionWaits(), {}
    records = 2 * ahead + 2  # a checkpoint each: more than may be in flight

    def reading() -> None:
        sys.setprofile(waits)
        outcome["run"] = run(CursorStream([list(range(1, records + 1))], interval=1), max_checkpoints_ahead=bound)

    reader = threading.Thread(target=reading)
    reader.start()
    assert waits.entered.wait(10), "the reading never waited for a commit"
    sink = sink_box[0]
    assert sink.written == ahead + 1 and len(sink.asked) == ahead + 1
    while reader.is_alive():  # Spark catches up: every checkpoint asked so far commits
        for future, receipt in list(sink.asked):
            if not future.done():
                future.set_result(receipt)
        reader.join(0.01)
    result, states, destination, _ = outcome["run"]
    assert cursors(states) == list(range(1, records + 1)) and not result.failed
    assert len(destination.sinks["numbers"].landed) == records


class WriteLog(EventOutput):
    """A stdout stand-in that also keeps, per write it gets, the cursors of the STATE lines in it:
    what whoever reads our stdout receives at once."""

    def __init__(self, events: Any, committed: Any) -> None:
        super().__init__(events)
        self.committed = committed  # cursor -> whether its checkpoint's commit is done
        self.state_writes: list[list[Any]] = []
        self.early: list[Any] = []  # STATEs that reached stdout before their commit was done

    def write(self, data: bytes) -> int:
        before = len(self.states)
        written = super().write(data)
        if len(self.states) > before:
            self.state_writes.append(cursors(self.states[before:]))
            self.early += [n for n in self.state_writes[-1] if not self.committed(n)]
        return written


class CommitsDoneAtFinish(RecordingSink):
    """Commits that complete when the stream finishes, the first ``together`` of them at once; the
    others when the test says (``release``)."""

    def __init__(self, events: Any, together: int) -> None:
        super().__init__(events)
        self.together = together
        self.asked: list[tuple[Future, Any]] = []

    def commit(self, state: Any, notes: Any = None) -> Future:
        future: Future = Future()
        self.asked.append((future, super().commit(state, notes).result()))
        return future

    def finish(self, state: Any, notes: Any = None) -> Future:
        for future, receipt in self.asked[:self.together]:
            future.set_result(receipt)
        return super().finish(state, notes)

    def release(self) -> None:
        for future, receipt in self.asked:
            if not future.done():
                future.set_result(receipt)


def test_states_whose_commits_complete_together_reach_stdout_in_one_write_before_any_wait():
    """Six commits complete at once (checkpoints held back and committed as one do): their STATEs
    reach stdout in one write, and before the runtime waits for the seventh; every STATE still
    leaves after its commit, in order."""
    import io

    from source_framework.runtime.output import ProtocolOutput
    from source_framework.runtime.read import read_streams
    from source_framework.runtime.stream_adapters import adapt
    from unit_tests.conftest import catalog_of, configured

    destination = RecordingDestination()
    sink = CommitsDoneAtFinish(destination.events, together=6)
    destination.open_stream = lambda target: destination.sinks.setdefault(target.name, sink)  # type: ignore[method-assign]
    stdout = WriteLog(destination.events, committed=lambda n: sink.asked[n - 1][0].done())
    stream, entry = CursorStream([list(range(1, 11))], interval=1), configured("numbers", "incremental", "append")
    outcome: dict[str, Any] = {}
    reader = threading.Thread(target=lambda: outcome.setdefault("result", read_streams(
        {"numbers": adapt(stream, entry)}, catalog_of(entry), {}, destination,
        ProtocolOutput(io.BufferedWriter(stdout, buffer_size=1 << 16)))))
    reader.start()
    try:
        for _ in range(500):  # the reader now waits for the seventh commit
            if stdout.state_writes:
                break
            reader.join(0.01)
        assert stdout.state_writes == [[1, 2, 3, 4, 5, 6]] and reader.is_alive()
    finally:
        sink.release()
        reader.join(10)
    assert cursors(stdout.states) == list(range(1, 11)) and not outcome["result"].failed and not stdout.early


@pytest.mark.parametrize("bad", [0, -5, 2.5])
def test_a_bad_interval_fails_the_stream_with_a_clear_error(bad):
    result, states, _, _ = run(CursorStream([[1]], interval=bad))
    assert result.failed and "state_checkpoint_interval" in str(result.failed[0].error)


def run_text(values, secrets=()):
    result, out, _ = sync(CursorStream([values]), secrets=tuple(secrets))  # string cursors: the state is the last value
    return result, out.of_type("STATE")


def test_a_state_over_10_mb_is_refused_naming_the_stream():
    result, states = run_text(["x" * (11 * 1024 * 1024)])
    assert not states
    assert "numbers" in str(result.failed[0].error) and "10 MB" in str(result.failed[0].error)


def test_a_state_holding_a_config_secret_is_refused():
    result, states = run_text(["a", "token-s3cret-value"], secrets=["s3cret-value"])
    assert not states
    assert "secret" in str(result.failed[0].error)


def test_while_records_stream_through_other_threads_get_the_interpreter_within_a_millisecond():
    """The committer and the page converter's sender wait for the interpreter between their waits
    on the disk and the pipe; the read loop lets it go after 1 ms, not Python's 5, and puts the
    interval back when the sync ends."""
    from source_framework.runtime.process import READING_SWITCH_INTERVAL

    seen = []

    class Watched(CursorStream):
        def read_records(self, *args, **kwargs):
            seen.append(sys.getswitchinterval())
            yield from super().read_records(*args, **kwargs)

    before = sys.getswitchinterval()
    with tuned_for_streaming():  # as main.py read runs a sync
        result, _, _ = sync(Watched([[1, 2], [3]]))
    assert not result.failed and seen == [READING_SWITCH_INTERVAL] * 2 != [before] * 2
    assert sys.getswitchinterval() == before


class QuietHandler(http.server.BaseHTTPRequestHandler):
    """A local test server's request handler: HTTP/1.1 (kept-alive connections, as APIs keep
    them), nothing logged."""

    protocol_version = "HTTP/1.1"

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def serve() -> Iterator[Callable[[type[QuietHandler]], str]]:
    """``serve(Handler)``: a server on a free 127.0.0.1 port for this test, and its URL."""
    servers: list[http.server.ThreadingHTTPServer] = []

    def start(handler: type[QuietHandler]) -> str:
        server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
        threading.Thread(target=server.serve_forever, daemon=True).start()
        servers.append(server)
        return f"http://127.0.0.1:{server.server_address[1]}"

    yield start
    for server in servers:
        server.shutdown()
        server.server_close()


def test_while_records_stream_through_response_bodies_of_any_framing_arrive_whole_in_large_steps(serve):
    """requests reads each response body the streams keep in one step, not 10 KB ones, while a sync
    reads (a page of 1,000 orders took 25 steps); a body sent with a length, in chunks or gzipped
    arrives byte for byte, and the step is put back when the sync ends."""
    import gzip

    import requests

    from source_framework.runtime.process import READING_BODY_STEP

    body = bytes(range(256)) * 1200  # 300 KB, 30 steps of 10 KB
    packed = gzip.compress(body)

    class Handler(QuietHandler):
        def do_GET(self) -> None:
            self.send_response(200)
            if self.path == "/chunked":
                self.send_header("Transfer-Encoding", "chunked")
                self.end_headers()
                for start in range(0, len(body), 70_000):
                    piece = body[start:start + 70_000]
                    self.wfile.write(b"%x\r\n%s\r\n" % (len(piece), piece))
                self.wfile.write(b"0\r\n\r\n")
                return
            data = packed if self.path == "/gzip" else body
            if self.path == "/gzip":
                self.send_header("Content-Encoding", "gzip")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

    url = serve(Handler)
    steps, bodies = [], {}

    class Fetching(CursorStream):
        def read_records(self, *args, **kwargs):
            steps.append(requests.models.CONTENT_CHUNK_SIZE)
            with requests.Session() as session:
                for path in ("/length", "/chunked", "/gzip"):
                    bodies[path] = session.get(url + path, timeout=10).content
            yield from super().read_records(*args, **kwargs)

    before = requests.models.CONTENT_CHUNK_SIZE
    with tuned_for_streaming():  # as main.py read runs a sync
        result, _, _ = sync(Fetching([[1, 2]]))
    assert not result.failed
    assert steps == [READING_BODY_STEP] and READING_BODY_STEP > before
    assert bodies == {"/length": body, "/chunked": body, "/gzip": body}
    assert requests.models.CONTENT_CHUNK_SIZE == before


def test_while_records_stream_through_the_proxy_variables_are_honoured_and_looked_up_once_per_host(monkeypatch, serve):
    """An airbyte-cdk ``HttpStream`` reading three pages goes through the proxy that
    ``HTTP_PROXY`` names (unless ``NO_PROXY`` names the host), as requests does on its own; but the
    environment is looked up once for the host, not before each page. A variable changed between
    two syncs applies to the second, and requests' own lookup is back after each."""
    import requests.sessions
    from airbyte_cdk.sources.streams.http import HttpStream

    paths: list[str] = []

    class Handler(QuietHandler):
        def do_GET(self) -> None:
            paths.append(self.path)  # a request sent through a proxy names the whole URL
            page = int(self.path.rpartition("page=")[2])
            body = json.dumps({"items": [{"id": page}], "page": page}).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

    origin = serve(Handler)

    class Pages(HttpStream):
        url_base = origin + "/"
        primary_key = "id"

        def path(self, **kwargs: Any) -> str:
            return "items"

        def request_params(self, next_page_token: Any = None, **kwargs: Any) -> dict[str, Any]:
            return next_page_token or {"page": 1}

        def next_page_token(self, response: Any) -> Any:
            page = response.json()["page"]
            return {"page": page + 1} if page < 3 else None

        def parse_response(self, response: Any, **kwargs: Any) -> Any:
            yield from response.json()["items"]

        def get_json_schema(self) -> dict[str, Any]:
            return {"type": "object", "properties": {"id": {"type": "integer"}}}

    lookups: list[str] = []
    requests_own = requests.sessions.get_environ_proxies

    def counted(url: str, no_proxy: Any = None) -> Any:
        lookups.append(url)
        return requests_own(url, no_proxy=no_proxy)

    monkeypatch.setattr(requests.sessions, "get_environ_proxies", counted)
    for name in ("NO_PROXY", "no_proxy", "HTTP_PROXY", "http_proxy", "ALL_PROXY", "all_proxy"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HTTP_PROXY", origin)  # the server is its own proxy: it answers either form
    with tuned_for_streaming():  # as main.py read runs a sync
        through_proxy, _, destination = sync(Pages(), sync_mode="full_refresh", destination_sync_mode="overwrite")
    proxied_paths, paths[:] = list(paths), []
    proxied_lookups, lookups[:] = list(lookups), []
    monkeypatch.setenv("NO_PROXY", "127.0.0.1")
    with tuned_for_streaming():
        direct, _, _ = sync(Pages(), sync_mode="full_refresh", destination_sync_mode="overwrite")
    assert not through_proxy.failed and not direct.failed
    assert [r["id"] for r in destination.sinks["pages"].landed] == [1, 2, 3]
    assert proxied_paths == [f"{origin}/items?page={n}" for n in (1, 2, 3)]
    assert paths == [f"/items?page={n}" for n in (1, 2, 3)]
    assert len(proxied_lookups) == 1 and len(lookups) == 1  # one host, three pages: once per sync
    assert requests.sessions.get_environ_proxies is counted


def test_syncs_running_at_once_share_the_proxy_lookup_and_the_last_to_end_puts_back_requests_own():
    import requests.sessions

    from source_framework.runtime.process import proxies_looked_up_once

    requests_own = requests.sessions.get_environ_proxies
    with proxies_looked_up_once():
        replaced = requests.sessions.get_environ_proxies
        with proxies_looked_up_once():  # a second sync in the same process
            assert requests.sessions.get_environ_proxies is replaced is not requests_own
        assert requests.sessions.get_environ_proxies is replaced  # the first still reads
    assert requests.sessions.get_environ_proxies is requests_own
