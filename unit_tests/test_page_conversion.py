"""The page converter makes from pages' bytes exactly the rows this process would make from the
records (``records_to_arrow``), checkpoint by checkpoint, and a converter that dies fails the
commit that needs it, never passes it."""

from __future__ import annotations

import os
import signal
import threading
from collections import Counter
from typing import Any

import orjson
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from source_framework.destinations.spark import page_conversion_process
from source_framework.destinations.spark.arrow_conversion import ConversionCounts, arrow_schema, records_to_arrow
from source_framework.destinations.spark.checkpoint_folder import CheckpointFolder
from source_framework.destinations.spark.commit_parts import ARROW_PARQUET_OPTIONS, PageRows, StagedFiles
from source_framework.destinations.spark.page_conversion import (
    ConverterPool,
    PageConversionFailed,
    PageConverter,
    _unwritten,
)
from source_framework.destinations.spark.table import SparkTable, _local_path
from source_framework.helpers.faults import SimulatedCrash, crash_at
from source_framework.helpers.raw_pages import RawPage

JSON_SCHEMA = {"properties": {
    "id": {"type": "integer"}, "amount": {"type": ["null", "number"]}, "ok": {"type": "boolean"},
    "name": {"type": "string"}, "at": {"type": "string", "format": "date-time"},
    "day": {"type": "string", "format": "date"}, "items": {"type": "array"}, "user": {"type": "object"},
    "any": {},
}}
SCHEMA = arrow_schema(JSON_SCHEMA)
SYNC = "sync-1"

VALUES = st.one_of(
    st.none(), st.booleans(), st.integers(-(2**63), 2**63 - 1), st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=6), st.sampled_from(["2025-01-02T03:04:05Z", "2025-01-02T03:04:05.123456+02:00", "2025-01-02",
                                          "42", "1.5", "true", "not a date"]),
    st.lists(st.integers(0, 3), max_size=2), st.dictionaries(st.sampled_from("ab"), st.integers(0, 3), max_size=2),
)
RECORDS = st.dictionaries(st.sampled_from([*JSON_SCHEMA["properties"], "nickname", "extra"]), VALUES, max_size=6)
#: pages of records, each item with whether it is written (a resumed sync skips some)
PAGES = st.lists(st.lists(st.tuples(RECORDS, st.booleans()), min_size=1, max_size=6), min_size=1, max_size=5)


def expected_rows(records: list[Any], extracted_at: list[int], seq: int, counts: ConversionCounts) -> pa.Table:
    table = records_to_arrow(records, SCHEMA, extracted_at_ms=extracted_at, sync_id=SYNC, checkpoint=seq,
                             counts=counts)
    return table


@settings(max_examples=120, deadline=None)
@given(pages=PAGES, cuts=st.lists(st.integers(0, 30), max_size=6), merge=st.lists(st.booleans(), max_size=6),
       batch_rows=st.sampled_from([1, 3, 4096]))
def test_the_converter_makes_the_rows_records_to_arrow_makes_checkpoint_by_checkpoint(
        tmp_path_factory, pages, cuts, merge, batch_rows, monkeypatch_module):
    """Whatever the records (misfits, undeclared fields, nested values), the items written and
    where checkpoints fall: each write's file holds exactly the rows this process would convert
    from the records written since the last write, numbered with its commit's sequence."""
    monkeypatch_module.setattr(page_conversion_process, "BATCH_ROWS", batch_rows)
    converter = page_conversion_process.Converter(SCHEMA, SYNC, ["data"], ARROW_PARQUET_OPTIONS)
    written: list[tuple[Any, int]] = []  # records in the order written, with when their page was read
    for page_id, page in enumerate(pages, start=1):
        records = [record for record, _ in page]
        converter.page(page_id, 1_700_000_000_000 + page_id, orjson.dumps({"data": records, "next": None}))
        runs, start = [], None
        for index, (_, write) in enumerate([*page, (None, False)]):
            if write and start is None:
                start = index
            elif not write and start is not None:
                runs.append([page_id, start, index])
                start = None
        converter.runs(runs)
        written += [(record, 1_700_000_000_000 + page_id) for record, write in page if write]
    ends = sorted({min(cut, len(written)) for cut in cuts} | {len(written)} - {0})  # a checkpoint ends rows
    tokens = []
    for token, end in enumerate(ends, start=1):
        converter.ends.append((token, end))  # as an E frame does, once its rows were received
        tokens.append((token, end))
    folder = tmp_path_factory.mktemp("pages")
    expected_counts = ConversionCounts()
    counted = ConversionCounts()
    done, seq = 0, 7
    for position, (token, end) in enumerate(tokens):
        if position < len(tokens) - 1 and position < len(merge) and merge[position]:
            continue  # merged with the next checkpoint: one write for both
        answer = converter.write(token, seq, str(folder / f"w{seq}"))
        files = os.listdir(folder / f"w{seq}")
        assert files == [answer["file"]]  # the commit publishes the file by the name it is given
        got = pq.read_table(folder / f"w{seq}" / files[0])
        want = expected_rows([r for r, _ in written[done:end]], [t for _, t in written[done:end]], seq, expected_counts)
        assert got.equals(want, check_metadata=True)
        assert answer["rows"] == end - done
        counted.add_counts(answer["counts"])
        done, seq = end, seq + 1
    assert done == len(written)
    # counted as they are converted (as in this process), so in all by the last write
    assert counted.as_dict() == expected_counts.as_dict()


def test_a_file_whose_footer_counts_other_rows_than_were_written_fails_the_write(tmp_path, monkeypatch):
    """The converter counts each file's rows in its footer (the commit takes its word for them and
    only renames the file): a file that lost rows on the way fails the commit."""
    converter = page_conversion_process.Converter(SCHEMA, SYNC, ["data"], ARROW_PARQUET_OPTIONS)
    converter.page(1, 1, orjson.dumps({"data": [{"id": i} for i in range(5)]}))
    converter.runs([[1, 0, 5]])
    converter.ends.append((1, 5))
    write_table = page_conversion_process.pq.write_table

    def losing_a_row(table: pa.Table, where: Any, **options: Any) -> None:
        write_table(table.slice(1), where, **options)

    monkeypatch.setattr(page_conversion_process.pq, "write_table", losing_a_row)
    with pytest.raises(RuntimeError, match="4 rows in its footer, 5 were written"):
        converter.write(1, 0, str(tmp_path / "w"))


@pytest.fixture(scope="module")
def monkeypatch_module():
    patch = pytest.MonkeyPatch()
    yield patch
    patch.undo()


def started() -> PageConverter:
    converter = PageConverter()
    converter.begin(SCHEMA, SYNC, ("data",), ARROW_PARQUET_OPTIONS)
    return converter


def page_of(records: list[dict[str, Any]], at: int = 1_700_000_000_000) -> RawPage:
    body = orjson.dumps({"data": records})
    return RawPage(body, orjson.loads(body)["data"], at)


def test_the_converters_process_writes_each_checkpoints_rows_and_counts_undeclared_fields(tmp_path):
    records = [{"id": i, "amount": i / 2, "name": f"n{i}", "items": [{"p": i}], "nickname": "x" if i % 2 else None}
               for i in range(10)]
    converter = started()
    try:
        first, second = page_of(records[:6], 1), page_of(records[6:], 2)
        one = converter.page(first)
        converter.runs([(one, 0, 2), (one, 3, 6)])  # item 2 skipped: the table held it
        token = converter.end()
        two = converter.page(second)
        converter.drop(one)
        later = converter.end([(two, 0, 4)])  # a checkpoint's last runs, sent with its end
        written = [converter.write(token, 0, str(tmp_path / "a")), converter.write(later, 1, str(tmp_path / "b"))]
        assert [w.rows for w in written] == [5, 4]
        assert [os.listdir(tmp_path / name) for name in ("a", "b")] == [[w.file] for w in written]
        # counted when converted: by the last write, each record written that carried the field
        assert sum(w.counts["undeclared_records"] for w in written) == 9
        assert sum((Counter(w.counts["undeclared"]) for w in written), Counter()) == {"nickname": 9}
    finally:
        converter.close()
    rows = [pq.read_table(tmp_path / name / os.listdir(tmp_path / name)[0]) for name in ("a", "b")]
    want = [records_to_arrow([records[i] for i in (0, 1, 3, 4, 5)], SCHEMA, extracted_at_ms=1, sync_id=SYNC, checkpoint=0),
            records_to_arrow(records[6:], SCHEMA, extracted_at_ms=2, sync_id=SYNC, checkpoint=1)]
    assert all(got.equals(expected, check_metadata=True) for got, expected in zip(rows, want, strict=True))


def test_an_end_sent_after_later_rows_names_only_the_rows_before_it(tmp_path):
    """Checkpoints held back end where the last of them was (``at``), though the rows after it were
    sent before that end: those rows wait for the next end. An end outside the rows not ended yet
    fails the next write, whatever it names."""
    converter = started()
    try:
        page = converter.page(page_of([{"id": i} for i in range(6)]))
        held = converter.end([(page, 0, 6)], at=4)  # rows 4 and 5 were written after the held checkpoint
        later = converter.end()
        ids = [pq.read_table(tmp_path / name / converter.write(token, seq, str(tmp_path / name)).file).column("id").to_pylist()
               for seq, (token, name) in enumerate([(held, "held"), (later, "later")])]
        assert ids == [[0, 1, 2, 3], [4, 5]]
        converter.runs([(page, 0, 1)])
        converter.end(at=8)  # beyond the 7 rows received
        with pytest.raises(PageConversionFailed, match="ends after row 8"):
            converter.write(converter.end(), 2, str(tmp_path / "bad"))
    finally:
        converter.close()


@pytest.mark.skipif(not os.path.exists("/proc/self/maps"), reason="reads the process's memory map (Linux)")
def test_the_converters_process_converts_and_writes_without_loading_pandas_or_numpy(tmp_path):
    """Arrow's import brings NumPy and its first conversion pandas (0.2 s, on the stream's first
    commit); the converter refuses both, and converts and writes all the same."""
    converter = started()
    try:
        page = converter.page(page_of([{"id": 1, "amount": 0.5, "at": "2025-01-02T03:04:05Z", "items": [1]}]))
        converter.runs([(page, 0, 1)])
        assert converter.write(converter.end(), 0, str(tmp_path)).rows == 1
        with open(f"/proc/{converter._process.pid}/maps") as maps:
            mapped = maps.read()
        assert "pyarrow" in mapped and f"{os.sep}pandas{os.sep}" not in mapped and f"{os.sep}numpy{os.sep}" not in mapped
    finally:
        converter.close()


def test_pages_sent_faster_than_the_process_reads_wait_in_order_without_stopping_the_reader(tmp_path):
    """A page goes into the pipe from the reading thread while it has room; once the other process
    falls behind (here: stopped), pages wait for the sender thread, the reader goes on, and the
    process gets every frame in the order sent (pages, runs and checkpoint ends interleaved), also
    those sent while the waiting ones drain."""
    pages = [[{"id": n * 1000 + i, "name": "x" * 200} for i in range(1000)] for n in range(16)]  # ~4 MB: 4 pipes full
    converter = started()
    tokens: list[int] = []
    half_sent, resumed = threading.Event(), threading.Event()

    def read() -> None:
        for n, records in enumerate(pages):
            if n == len(pages) // 2:
                half_sent.set()
                resumed.wait()
            page = converter.page(page_of(records, at=n))
            converter.runs([(page, 0, 500)])
            tokens.append(converter.end())
            converter.runs([(page, 500, 1000)])
            converter.drop(page)

    reader = threading.Thread(target=read)
    try:
        os.kill(converter._process.pid, signal.SIGSTOP)
        reader.start()
        stalled = not half_sent.wait(timeout=30)
        os.kill(converter._process.pid, signal.SIGCONT)
        resumed.set()
        reader.join()
        assert not stalled, "the reading thread waited for a stopped converter"
        final = converter.end()
        first = converter.write(tokens[0], 0, str(tmp_path / "a"))
        rest = converter.write(final, 1, str(tmp_path / "b"))
    finally:
        converter.close()
    assert (first.rows, rest.rows) == (500, 15_500)
    ids = [pq.read_table(tmp_path / name / written.file).column("id").to_pylist()
           for name, written in (("a", first), ("b", rest))]
    assert ids == [list(range(500)), [record["id"] for records in pages for record in records][500:]]


def test_a_frame_sent_while_earlier_ones_wait_for_the_sender_waits_behind_them(tmp_path, monkeypatch):
    """The pipe has room again but the sender thread has not written what waits yet: a frame sent
    now must not go first (the process would get runs for a page it has not seen, or rows out of
    order), nor while the sender holds frames it took from the queue. Made to happen every time:
    the pipe is "full" for the first page, and for the sender until the reader has sent the rest."""
    real_writev = os.writev
    sender_may_write, sender_holds_them = threading.Event(), threading.Event()
    first_refused = threading.Event()

    def writev(fd: int, pieces: list[bytes]) -> int:
        if threading.current_thread().name == "page-converter":  # it writes blocking: it waits for room
            sender_holds_them.set()
            sender_may_write.wait()
        if not first_refused.is_set():
            first_refused.set()
            raise BlockingIOError
        return real_writev(fd, pieces)

    records = [{"id": i} for i in range(30)]
    converter = started()
    try:
        monkeypatch.setattr(os, "writev", writev)
        for n in range(3):
            page = converter.page(page_of(records[n * 10:(n + 1) * 10], at=n))
            converter.runs([(page, 0, 10)])
            converter.drop(page)
            assert sender_holds_them.wait(timeout=10)  # taken from the queue, not written yet
        token = converter.end()
        sender_may_write.set()
        written = converter.write(token, 0, str(tmp_path / "a"))
    finally:
        sender_may_write.set()  # (else a failed assertion above would leave close() waiting for the sender)
        monkeypatch.undo()
        converter.close()
    assert pq.read_table(tmp_path / "a" / written.file).column("id").to_pylist() == list(range(30))


@pytest.mark.parametrize(("pieces", "written", "left"), [
    ([b"ab", b"cde"], 0, [b"ab", b"cde"]),
    ([b"ab", b"cde"], 1, [b"b", b"cde"]),
    ([b"ab", b"cde"], 2, [b"cde"]),
    ([b"ab", b"cde"], 4, [b"e"]),
    ([b"ab", b"cde"], 5, []),
])
def test_a_write_that_took_part_of_the_frames_leaves_the_rest_in_order(pieces, written, left):
    assert _unwritten(pieces, written) == left


def test_a_converter_that_died_fails_the_commit_that_needs_it(tmp_path):
    converter = started()
    try:
        page = converter.page(page_of([{"id": 1}]))
        converter.runs([(page, 0, 1)])
        token = converter.end()
        os.kill(converter._process.pid, signal.SIGKILL)
        converter._process.wait()
        with pytest.raises(PageConversionFailed, match="page converter process ended with exit code -9"):
            converter.write(token, 0, str(tmp_path / "a"))
        converter.runs([(page, 0, 1)])  # the reading thread is not stopped by it: the commit is
    finally:
        converter.close()
    assert not (tmp_path / "a").exists()


def test_a_converter_that_failed_says_why_at_every_later_write_and_serves_no_other_stream(tmp_path):
    converter = started()
    pool = ConverterPool()
    try:
        converter.runs([(99, 0, 1)])  # a page it was never sent
        token = converter.end()
        for attempt in range(2):
            with pytest.raises(PageConversionFailed, match="the page converter failed: KeyError: 99"):
                converter.write(token, attempt, str(tmp_path / "a"))
        assert not converter.usable
        pool.give_back(converter)
        other = pool.take()
        assert other is not converter
        other.close()
    finally:
        pool.close()
        converter.close()


def test_the_converters_process_outlives_ctrl_c_and_ends_when_its_pipe_closes(tmp_path):
    converter = started()
    # Ctrl-C stops reading, and the commits already queued still need the converter: a terminal's
    # Ctrl-C does not reach its process (a session of its own), nor would one sent to it alone.
    assert os.getsid(converter._process.pid) == converter._process.pid
    for token in range(2):
        page = converter.page(page_of([{"id": token}]))
        converter.runs([(page, 0, 1)])
        assert converter.write(converter.end(), token, str(tmp_path / f"w{token}")).rows == 1
        os.kill(converter._process.pid, signal.SIGINT)
    converter.close()
    assert converter._process.returncode == 0


def test_the_pool_starts_one_ahead_and_hands_a_converter_to_the_next_stream_fresh(tmp_path):
    pool = ConverterPool()
    pool.warm()
    first, second = pool.take(), pool.take()
    assert second is not first  # the warm one went to the first stream, the second starts its own
    second.close()
    first.begin(SCHEMA, SYNC, ("data",), ARROW_PARQUET_OPTIONS)
    page = first.page(page_of([{"id": 1}, {"id": 2}]))
    first.runs([(page, 0, 1)])  # its last row never ended: the stream failed there
    first.write(first.end(), 0, str(tmp_path / "a"))
    first.runs([(page, 1, 2)])
    pool.give_back(first)
    again = pool.take()
    assert again is first and not again.begun  # the same process, for a new stream
    again.begin(SCHEMA, SYNC, ("data",), ARROW_PARQUET_OPTIONS)
    page = again.page(page_of([{"id": 7}]))
    again.runs([(page, 0, 1)])
    assert again.write(again.end(), 0, str(tmp_path / "b")).rows == 1  # nothing of the last stream's
    table = pq.read_table(tmp_path / "b" / os.listdir(tmp_path / "b")[0])
    assert table.column("id").to_pylist() == [7]

    os.kill(again._process.pid, signal.SIGKILL)
    again._process.wait()
    pool.give_back(again)  # a dead one is not kept
    fresh = pool.take()
    assert fresh is not again and fresh.usable
    extra = [pool.take() for _ in range(ConverterPool.KEEP + 1)]
    for converter in [fresh, *extra]:
        pool.give_back(converter)
    assert sum(converter.usable for converter in [fresh, *extra]) == ConverterPool.KEEP  # the others ended
    pool.close()
    assert not any(converter.usable for converter in [fresh, *extra])


# -- commits carried out by the converter ---------------------------------------------------------


def new_table(tmp_path) -> SparkTable:
    """A table written without Spark; a compaction batch every third (``file_sink_log``)."""
    return SparkTable(lambda: pytest.fail("no Spark is needed"), str(tmp_path / "table"), arrow_writes=True,
                      compact_interval=3)


def rows_in(table: SparkTable) -> dict[int, list[int]]:
    """The ids a reader of the table sees, by the commit (``_sf_checkpoint``) each row is numbered with."""
    by_seq: dict[int, list[int]] = {}
    for uri in table.live_files():
        data = pq.read_table(_local_path(uri), columns=["id", "_sf_checkpoint"]).to_pydict()
        for row_id, seq in zip(data["id"], data["_sf_checkpoint"], strict=True):
            by_seq.setdefault(seq, []).append(row_id)
    return {seq: sorted(ids) for seq, ids in sorted(by_seq.items())}


def send_checkpoint(converter: PageConverter, ids: list[int]) -> int:
    page = converter.page(page_of([{"id": i} for i in ids]))
    converter.runs([(page, 0, len(ids))])
    token = converter.end()
    converter.drop(page)
    return token


def test_a_commit_the_converter_carries_out_reads_back_like_one_made_here(tmp_path):
    """The converter writes a commit's rows into the table, its checkpoint record and its log batch
    (a compaction batch among them): a later run's table object finds the state, the rows, and
    each file with its real size; nothing is left in the staging folder."""
    table = new_table(tmp_path)
    converter = started()
    try:
        for seq in range(5):
            token = send_checkpoint(converter, [seq * 10 + i for i in range(seq + 1)])
            info = table.commit(SCHEMA.empty_table(), {"n": seq}, seq, pages=PageRows(converter, token, seq + 1))
            assert info.rows == seq + 1 and len(info.files) == 1
        assert table.live_files() == new_table(tmp_path).live_files()  # its own bookkeeping agrees with the folder
    finally:
        converter.close()
    later = new_table(tmp_path)
    last = later.last_checkpoint()
    assert last is not None and (last.seq, last.state, last.rows) == (4, {"n": 4}, 5)
    assert rows_in(later) == {seq: [seq * 10 + i for i in range(seq + 1)] for seq in range(5)}
    statuses = later._log.live_files()
    assert [status.size for status in statuses] == [os.path.getsize(_local_path(status.path)) for status in statuses]
    assert not os.path.exists(os.path.join(later.path, "_staging"))


def test_a_tables_files_keep_dictionaries_for_text_columns_only_whoever_writes_them(tmp_path):
    """Dictionaries cost more than they save on ids, numbers, timestamps and JSON texts (see
    ``arrow_conversion.parquet_options``): a commit's file has them for its text columns only,
    written by the page converter or by this process, and its rows read back the same."""
    table = new_table(tmp_path)
    converter = started()
    try:
        token = send_checkpoint(converter, [1, 2, 3])
        table.commit(SCHEMA.empty_table(), {"n": 0}, 0, pages=PageRows(converter, token, 3))
    finally:
        converter.close()
    here = records_to_arrow([{"id": 4, "name": "x", "items": [1], "user": {"a": 1}, "any": "y"}], SCHEMA,
                            extracted_at_ms=0, sync_id=SYNC, checkpoint=1)
    table.commit(here, {"n": 1}, 1)
    files = [_local_path(uri) for uri in table.live_files()]
    assert len(files) == 2
    for path in files:
        chunks = pq.read_metadata(path).row_group(0)
        encoded = {chunks.column(i).path_in_schema for i in range(chunks.num_columns)
                   if any("DICTIONARY" in encoding for encoding in chunks.column(i).encodings)}
        assert encoded == {"name", "any", "_sf_sync_id", "_sf_meta"}, path
    assert rows_in(table) == {0: [1, 2, 3], 1: [4]}
    assert pq.read_table(files[1] if "c00000001" in files[1] else files[0]).column("items").to_pylist() == ["[1]"]


def test_files_staged_ahead_of_a_commit_the_converter_carries_out_enter_the_table_with_it(tmp_path):
    """A large slice's rows are written to staged files ahead of its checkpoint (``stage_rows``);
    the converter moves them into the table within the commit, beside the rows it writes then."""
    table = new_table(tmp_path)
    converter = started()
    try:
        staged = []
        for ids in ([1, 2], [3]):  # two stage jobs, as the buffer hands them over
            folder = table.staging_folder()
            written = converter.write(send_checkpoint(converter, ids), 0, folder)
            staged.append(StagedFiles(folder, written.rows, files=(written.file,)))
        token = send_checkpoint(converter, [4, 5, 6])
        info = table.commit(SCHEMA.empty_table(), {"n": 1}, 0, staged=staged, pages=PageRows(converter, token, 3))
    finally:
        converter.close()
    assert info.rows == 6 and len(info.files) == 3
    later = new_table(tmp_path)
    assert rows_in(later) == {0: [1, 2, 3, 4, 5, 6]} and later.last_checkpoint().rows == 6
    assert os.listdir(os.path.join(later.path, "_staging")) == []  # the staged folders went with the commit


def test_a_commit_expecting_other_rows_than_the_converter_holds_leaves_the_table_as_it_was(tmp_path):
    table = new_table(tmp_path)
    converter = started()
    try:
        token = send_checkpoint(converter, [1, 2, 3])
        with pytest.raises(PageConversionFailed, match="3 rows up to checkpoint 1, the commit expects 2"):
            table.commit(SCHEMA.empty_table(), {"n": 1}, 0, pages=PageRows(converter, token, 2))
    finally:
        converter.close()
    later = new_table(tmp_path)
    assert later.last_checkpoint() is None and later.live_files() == []
    assert [name for _, _, names in os.walk(later.path) for name in names] == []  # no record, no file, no batch


@pytest.mark.parametrize("point, files_in", [("commit.record_written", False), ("commit.files_written", True)])
def test_a_crash_in_a_commit_the_converter_carries_out_leaves_what_a_kill_there_leaves(tmp_path, point, files_in):
    """A simulated crash at a commit's fault point stops the converter there, as a kill of the
    sync would: the record written, the data file in the table or not yet, no log batch; the next
    run's clean-up takes the commit back whole."""
    table = new_table(tmp_path)
    converter = started()
    try:
        table.commit(SCHEMA.empty_table(), {"n": 0}, 0, pages=PageRows(converter, send_checkpoint(converter, [1]), 1))
        token = send_checkpoint(converter, [2, 3])
        with crash_at(point), pytest.raises(SimulatedCrash, match=point):
            table.commit(SCHEMA.empty_table(), {"n": 1}, 1, pages=PageRows(converter, token, 2))
        assert not converter.usable  # no other stream gets a converter that "died"
    finally:
        converter.close()
    record = CheckpointFolder(table.path).read(1)
    assert record is not None and record.state == {"n": 1}
    assert os.path.exists(os.path.join(table.path, record.files[0])) == files_in
    assert not os.path.exists(table._log.batch_path(record.batch_id))
    later = new_table(tmp_path)
    later.recover()
    assert CheckpointFolder(later.path).read(1) is None and not os.path.exists(os.path.join(later.path, record.files[0]))
    assert rows_in(later) == {0: [1]} and later.last_checkpoint().state == {"n": 0}


def test_the_converter_starts_no_step_of_a_commit_once_the_syncs_process_is_gone(tmp_path, monkeypatch):
    """The sync's process killed while the converter carries out its commit: the converter ends the
    step it is in and starts no other, so the next run's clean-up never meets it still writing."""
    converter = page_conversion_process.Converter(SCHEMA, SYNC, ["data"], ARROW_PARQUET_OPTIONS)
    converter.page(1, 0, orjson.dumps({"data": [{"id": 1}]}))
    converter.runs([[1, 0, 1]])
    converter.ends.append((1, converter.received))

    class InThisProcess:
        def publish(self, plan: dict[str, Any]) -> dict[str, Any]:
            return converter.publish(plan)

    write = page_conversion_process.parquet_commit.write_atomically

    def written_then_orphaned(*args: Any, **kwargs: Any) -> None:
        write(*args, **kwargs)
        monkeypatch.setattr(page_conversion_process, "PARENT", -1)  # (as the kernel re-parents an orphan)

    def exit_(code: int) -> None:
        raise SystemExit(code)

    monkeypatch.setattr(page_conversion_process.parquet_commit, "write_atomically", written_then_orphaned)
    monkeypatch.setattr(page_conversion_process.os, "_exit", exit_)
    table = new_table(tmp_path)
    with pytest.raises(SystemExit):
        table.commit(SCHEMA.empty_table(), {"n": 1}, 0, pages=PageRows(InThisProcess(), 1, 1))  # type: ignore[arg-type]
    record = CheckpointFolder(table.path).read(0)
    assert record is not None  # the step under way ended
    assert not os.path.exists(os.path.join(table.path, record.files[0]))  # no other began
    assert not os.path.exists(table._log.batch_path(record.batch_id))
