"""``read_ahead``: slices read by worker threads, handed on exactly as if read one after another."""

from __future__ import annotations

import dataclasses
import random
import threading
import time

import pytest
from airbyte_cdk.models import SyncMode

from source_framework.helpers.tuning import TUNING
from source_framework.runtime.concurrency import (
    ReadStopped,
    SparePermitPages,
    _ReadAheadLimit,
    read_ahead,
    run_in_order,
)
from source_framework.runtime.stream_adapter_base import SliceRead
from unit_tests.conftest import ConditionWaits


class ListSlice(SliceRead):
    """A slice whose items come from ``produce()``, noting which thread produced them."""

    def __init__(self, name, produce):
        self.partition = name
        self._produce = produce
        self.threads = set()
        self.closed_in = None

    def items(self, pages=None):
        self.pages = pages
        for item in self._produce():
            self.threads.add(threading.get_ident())
            yield item

    def close(self):
        self.closed_in = threading.get_ident()


def consume(slices):
    seen = []
    for stream_slice in slices:
        seen.extend((stream_slice.partition, item) for item in stream_slice.items())
        stream_slice.close()
    return seen


def slow_numbers(slice_no, count, seed):
    def produce():
        pause = random.Random(seed)
        for number in range(count):
            if number % 50 == 0:
                time.sleep(pause.random() / 200)
            yield (slice_no, number)
    return produce


def counted(produced: list[int], count: int = 100_000):
    """A slice's items 0..count-1, each noted in ``produced`` as its worker reads it."""
    def produce():
        for number in range(count):
            produced.append(number)
            yield number
    return produce


def endless_until_closed(cleaned_up: threading.Event):
    """A slice's items 0, 1, 2, ... without end; ``cleaned_up`` is set when its generator is closed."""
    def produce():
        try:
            number = 0
            while True:
                yield number
                number += 1
        finally:
            cleaned_up.set()
    return produce


@pytest.mark.parametrize("workers", [2, 4, 8])
def test_the_caller_sees_the_same_slices_and_items_in_the_same_order(workers):
    sizes = [0, 1, 700, TUNING.chunk, TUNING.chunk + 1, 3, 1200, 0, 40]

    def slices():
        return [ListSlice(f"s{i}", slow_numbers(i, n, seed=i)) for i, n in enumerate(sizes)]

    assert consume(read_ahead(slices(), workers, capacity=300)) == consume(slices())


def test_slices_are_read_at_the_same_time():
    """Three slices that each wait for the other two: one after another, they never could."""
    meeting = threading.Barrier(3, timeout=20)

    def waits_for_the_others(i):
        def produce():
            meeting.wait()
            yield i
        return produce

    slices = [ListSlice(str(i), waits_for_the_others(i)) for i in range(3)]
    assert [item for _, item in consume(read_ahead(slices, workers=3))] == [0, 1, 2]
    assert len(set().union(*(s.threads for s in slices))) == 3


def test_close_runs_in_the_callers_thread_and_workers_one_reads_in_it():
    caller = threading.get_ident()
    slices = [ListSlice(str(i), slow_numbers(i, 10, i)) for i in range(3)]
    consume(read_ahead(slices, workers=4))
    assert {s.closed_in for s in slices} == {caller}
    assert all(caller not in s.threads for s in slices)

    alone = [ListSlice(str(i), slow_numbers(i, 10, i)) for i in range(3)]
    consume(read_ahead(alone, workers=1))
    assert all(s.threads == {caller} for s in alone)


def test_a_failing_slice_raises_where_it_failed_after_the_items_before_it():
    def fails_after_five():
        yield from range(5)
        raise ConnectionError("page 2 failed")

    slices = [ListSlice("a", slow_numbers(0, 300, 1)), ListSlice("b", fails_after_five), ListSlice("c", slow_numbers(2, 10, 2))]
    seen = []
    with pytest.raises(ConnectionError, match="page 2 failed"):
        for stream_slice in read_ahead(slices, workers=4):
            seen.extend((stream_slice.partition, item) for item in stream_slice.items())
            stream_slice.close()
    assert seen == [("a", (0, n)) for n in range(300)] + [("b", n) for n in range(5)]
    assert slices[0].closed_in is not None and slices[1].closed_in is None and slices[2].closed_in is None


def test_slices_that_cannot_be_generated_fail_only_after_the_slices_before_them():
    def generate():
        yield ListSlice("a", slow_numbers(0, 100, 1))
        yield ListSlice("b", slow_numbers(1, 100, 2))
        raise RuntimeError("parent stream failed")

    seen = []
    with pytest.raises(RuntimeError, match="parent stream failed"):
        for stream_slice in read_ahead(generate(), workers=4):
            seen.append(stream_slice.partition)
            list(stream_slice.items())
            stream_slice.close()
    assert seen == ["a", "b"]


def test_a_slice_read_ahead_holds_at_most_its_capacity():
    produced: list[int] = []
    endless = counted(produced)

    first = ListSlice("first", lambda: iter(()))
    big = ListSlice("big", endless)
    waits = ConditionWaits()
    threading.setprofile(waits)  # for the workers, which the first next() starts
    try:
        slices = read_ahead([first, big], workers=2, capacity=1000)
        head = next(slices)
    finally:
        threading.setprofile(None)  # type: ignore[arg-type]
    assert waits.entered.wait(10)  # the worker ran until the channel was full, then waits (its only wait)
    assert 1000 <= len(produced) <= 1000 + 2 * TUNING.chunk  # a full channel, and the chunk in the worker's hands
    list(head.items())
    assert list(next(slices).items()) == list(range(100_000))


def test_the_pace_reads_far_ahead_only_while_the_process_leaves_its_core_idle():
    """Reading ahead is for a slow API: the workers go far while the process's threads wait (under
    0.7 of a core), about a page while they keep one busy (0.85 and up); in between, as before."""
    now, cpu = [100.0], [5.0]
    pace = _ReadAheadLimit(20_000, clock=lambda: now[0], cpu_clock=lambda: cpu[0])
    assert pace.busy and pace.capacity == TUNING.busy_capacity  # a page ahead, until the process is seen waiting

    def window(core_share: float) -> tuple[bool, int]:
        now[0] += TUNING.pace_window
        cpu[0] += TUNING.pace_window * core_share
        pace.took()
        return pace.busy, pace.capacity

    assert window(0.2) == (False, 20_000)
    assert window(0.8) == (False, 20_000)  # between the two: unchanged
    assert window(1.0) == (True, TUNING.busy_capacity)
    assert window(0.8) == (True, TUNING.busy_capacity)
    assert window(0.5) == (False, 20_000)
    now[0] += TUNING.pace_window / 2
    cpu[0] += TUNING.pace_window
    pace.took()  # (half a window: not judged yet)
    assert not pace.busy

    first = _ReadAheadLimit(20_000, clock=lambda: now[0], cpu_clock=lambda: cpu[0])
    assert first.busy and not first.seen_busy  # busy is only assumed at the start
    assert 2 * TUNING.first_window < TUNING.pace_window
    now[0] += 2 * TUNING.first_window
    cpu[0] += 2 * TUNING.first_window
    first.took()  # the first look comes sooner than a whole window
    assert first.busy and first.seen_busy


def test_a_process_that_keeps_its_core_busy_reads_only_about_a_page_ahead(monkeypatch):
    """An API that answers at once: the loop is the limit, and a worker reading far ahead would only
    take the interpreter from it (1,000,000 demo orders at concurrency 4: 180,300 records/s against
    309,800 at 1). The loop here keeps its core busy: the next slice's worker stays a page ahead.
    (The tests share the machine's cores: this process is never judged idle here, whatever share
    of a core it gets; the judgement itself is the test above.)"""
    monkeypatch.setattr("source_framework.runtime.concurrency.TUNING", dataclasses.replace(TUNING, idle=-1.0))
    produced: list[int] = []
    endless = counted(produced)

    def busy_items():
        for number in range(40):
            deadline = time.process_time() + 0.05
            while time.process_time() < deadline:
                pass
            yield number

    slices = read_ahead([ListSlice("busy", busy_items), ListSlice("next", endless)], workers=2, capacity=20_000)
    head = next(slices)
    assert list(head.items()) == list(range(40))  # 2 s of the loop's CPU: four windows of the pace
    assert len(produced) <= TUNING.busy_capacity + 2 * TUNING.chunk
    assert list(next(slices).items()) == list(range(100_000))


def test_a_process_that_waits_for_its_api_reads_far_ahead():
    """A slow API: the loop waits for its slice's items, so the next slice's worker reads ahead as
    far as its capacity lets it, not a page."""
    produced: list[int] = []
    endless = counted(produced)

    def slow_items():
        for number in range(15):
            time.sleep(0.1)
            yield number

    slices = read_ahead([ListSlice("slow", slow_items), ListSlice("next", endless)], workers=2, capacity=20_000)
    head = next(slices)
    assert list(head.items()) == list(range(15))  # 1.5 s of waiting: the pace lets the worker go far
    deadline = time.monotonic() + 10
    while len(produced) < 20_000 and time.monotonic() < deadline:
        time.sleep(0.05)
    assert 20_000 <= len(produced) <= 20_000 + 2 * TUNING.chunk
    assert list(next(slices).items()) == list(range(100_000))


def test_while_the_process_is_busy_a_slice_fetches_its_pages_one_after_another_in_its_own_thread():
    """No thread per page while the interpreter is the limit: the pages come in order all the same,
    and a spare permit is never taken."""

    class Busy:
        busy = True

    permits = threading.Semaphore(3)
    permits.acquire()  # the worker's own
    threads = []

    def fetch(page):
        threads.append(threading.get_ident())
        return page * 10

    pages = SparePermitPages(permits, most=8, pace=Busy()).map_in_order(fetch, range(1, 6))  # type: ignore[arg-type]
    assert list(pages) == [10, 20, 30, 40, 50]
    assert set(threads) == {threading.get_ident()}
    assert permits.acquire(blocking=False) and permits.acquire(blocking=False) and not permits.acquire(blocking=False)


@pytest.fixture
def judged_busy(monkeypatch):
    """The pace judges the process busy at its first look (the judgement has its own test)."""
    judged = dataclasses.replace(TUNING, pace_window=1e-9, first_window=1e-9, saturated=-1.0, idle=-2.0)
    monkeypatch.setattr("source_framework.runtime.concurrency.TUNING", judged)


def all_given_back(permits: threading.Semaphore, count: int, within: float = 10.0) -> bool:
    """Whether all ``count`` permits are free (waiting up to ``within`` seconds for workers to end)."""
    deadline = time.monotonic() + within
    while True:
        taken = 0
        while taken < count and permits.acquire(blocking=False):
            taken += 1
        for _ in range(taken):
            permits.release()
        if taken == count or time.monotonic() > deadline:
            return taken == count
        time.sleep(0.01)


def test_once_the_process_is_seen_busy_the_loop_reads_each_slice_on_in_its_own_thread(judged_busy):
    """An API that answers at once: handing records from a worker's thread to the loop's only costs
    the interpreter (1,000,000 demo orders into Spark: 256,900 records/s at concurrency 4 against
    305,000 at 1). Once the pace has seen the process busy, the loop takes each slice's iterator
    (and its fetch permit) from the worker and reads the rest itself: the same items, in order."""
    caller = threading.get_ident()
    permits = threading.Semaphore(3)
    sizes = [5_000, 3, 2_000, 0, 700]
    slices = [ListSlice(f"s{i}", slow_numbers(i, n, seed=i)) for i, n in enumerate(sizes)]
    assert consume(read_ahead(slices, workers=3, permits=permits)) == consume(
        [ListSlice(f"s{i}", slow_numbers(i, n, seed=i)) for i, n in enumerate(sizes)])
    assert caller in slices[0].threads and caller in slices[2].threads  # read on here after the first chunks
    assert all_given_back(permits, 3)


def test_a_slice_the_loop_reads_on_itself_fails_in_its_place(judged_busy):
    def fails_after(count):
        def produce():
            yield from range(count)
            raise ConnectionError(f"failed after {count}")
        return produce

    for count in (3, 3 * TUNING.chunk):  # (the slice ended before the worker could give it, and after)
        permits = threading.Semaphore(2)
        seen = []
        with pytest.raises(ConnectionError, match=f"failed after {count}"):
            for stream_slice in read_ahead([ListSlice("a", fails_after(count)), ListSlice("b", slow_numbers(1, 10, 1))],
                                           workers=2, permits=permits):
                seen.extend(stream_slice.items())
                stream_slice.close()
        assert seen == list(range(count))
        assert all_given_back(permits, 2)


def test_a_loop_that_stops_in_a_slice_it_reads_itself_closes_it_and_gives_its_permit_back(judged_busy):
    cleaned_up = threading.Event()
    endless = endless_until_closed(cleaned_up)

    permits = threading.Semaphore(2)
    first = ListSlice("a", endless)
    slices = read_ahead([first, ListSlice("b", slow_numbers(1, 5, 1))], workers=2, permits=permits)
    items = iter(next(slices).items())
    assert [next(items) for _ in range(8 * TUNING.chunk)] == list(range(8 * TUNING.chunk))  # (past the ~5 chunks read ahead)
    assert threading.get_ident() in first.threads
    items.close()  # the read loop failed in the middle of slice "a"
    slices.close()
    assert cleaned_up.wait(10) and all_given_back(permits, 2)


@pytest.mark.parametrize("stopped_after", [1, 8 * TUNING.chunk])
def test_closing_read_ahead_gives_back_the_permit_of_a_slice_the_loop_reads_itself(judged_busy, stopped_after):
    """The read loop failed in a slice it read on itself, at its first item (one the worker had
    read) or far past them, and kept the slice's items (as a stored error's traceback keeps them):
    closing ``read_ahead`` alone ends that reading, and the fetch permit it took comes back.
    The permits are shared by the whole sync: one kept per such failure had the sync wait forever."""
    cleaned_up = threading.Event()
    permits = threading.Semaphore(2)
    slices = read_ahead([ListSlice("a", endless_until_closed(cleaned_up)), ListSlice("b", slow_numbers(1, 5, 1))],
                        workers=2, permits=permits)
    items = iter(next(slices).items())
    assert [next(items) for _ in range(stopped_after)] == list(range(stopped_after))
    slices.close()
    assert cleaned_up.wait(10) and all_given_back(permits, 2)
    assert next(items, "ended") == "ended"


def test_an_interrupt_while_the_loop_waits_for_a_slice_to_be_lent_leaves_no_permit_lent_to_nobody(judged_busy, monkeypatch):
    """Ctrl-C lands while the loop waits in ``take_iterator`` for the worker to give it the slice: the
    worker gives it anyway, to a loop that is gone. Closing ``read_ahead`` takes it back (the
    stream's clean-up runs, the fetch permit comes back), or keeps the worker from giving it."""
    from source_framework.runtime import concurrency

    def interrupted_take(channel):
        with channel._condition:
            channel.iterator_asked = channel.waiting = True
            channel._condition.notify_all()
            while not channel._done:  # (the interrupt lands once the worker gave it)
                channel._condition.wait()
        raise KeyboardInterrupt

    monkeypatch.setattr(concurrency._Channel, "take_iterator", interrupted_take)
    cleaned_up = threading.Event()
    permits = threading.Semaphore(2)
    slices = read_ahead([ListSlice("a", endless_until_closed(cleaned_up)), ListSlice("b", slow_numbers(1, 5, 1))],
                        workers=2, permits=permits)
    with pytest.raises(KeyboardInterrupt):
        next(iter(next(slices).items()))
    slices.close()
    assert cleaned_up.wait(10) and all_given_back(permits, 2)


def test_a_caller_that_stops_releases_the_workers_and_their_slices():
    cleaned_up = threading.Event()
    endless = endless_until_closed(cleaned_up)

    slices = read_ahead([ListSlice("a", slow_numbers(0, 5, 0)), ListSlice("b", endless)], workers=2, capacity=500)
    head = next(slices)
    next(iter(head.items()))
    slices.close()  # the read loop failed (or was interrupted) in the middle of slice "a"
    assert cleaned_up.wait(10), "the worker of the slice read ahead still holds its generator"


# -- streams synced at once, slices fetched under a shared bound ----------------------------------


def test_streams_run_at_most_workers_at_a_time_and_results_keep_their_order():
    active, most, lock = 0, 0, threading.Lock()
    meeting = threading.Barrier(3, timeout=20)

    def task(i):
        def run():
            nonlocal active, most
            with lock:
                active += 1
                most = max(most, active)
            if i < 3:
                meeting.wait()  # the first three run together, or this times out
            time.sleep(0.01)
            with lock:
                active -= 1
            return i
        return run

    assert run_in_order([task(i) for i in range(8)], workers=3, stop=threading.Event()) == list(range(8))
    assert most == 3


def test_a_task_that_dies_stops_the_others_and_its_exception_is_raised():
    class Died(BaseException):
        pass

    stop, started, stopped = threading.Event(), [], []

    def dies():
        started.append("dies")
        raise Died("killed")

    def watches(name):
        def run():
            started.append(name)
            while not stop.wait(0.01):
                pass
            stopped.append(name)
            raise ReadStopped(name)
        return run

    with pytest.raises(Died):
        run_in_order([watches("a"), dies, watches("b"), watches("c")], workers=2, stop=stop)
    assert stopped == ["a"] and "c" not in started  # b may have started before the stop was seen


def test_shared_permits_bound_the_slices_fetching_across_streams_without_deadlock():
    """Two streams, four slices each read ahead, one permit: one slice fetches at a time, and a
    full slice waiting for its turn gives its permit back, so both streams finish."""
    permits = threading.Semaphore(1)
    fetching, most, lock = 0, 0, threading.Lock()

    def counted(slice_no):
        def produce():
            nonlocal fetching, most
            for number in range(500):
                with lock:  # "fetching" the item: only ever with a permit
                    fetching += 1
                    most = max(most, fetching)
                time.sleep(0)
                with lock:
                    fetching -= 1
                yield (slice_no, number)
        return produce

    seen = {}

    def stream(name):
        slices = [ListSlice(f"{name}{i}", counted(i)) for i in range(4)]
        seen[name] = consume(read_ahead(slices, workers=4, capacity=50, permits=permits))

    threads = [threading.Thread(target=stream, args=(name,)) for name in "xy"]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert not any(thread.is_alive() for thread in threads), "deadlock: a stream never finished"
    assert seen["x"] == [(f"x{i}", (i, n)) for i in range(4) for n in range(500)]
    assert seen["y"] == [(f"y{i}", (i, n)) for i in range(4) for n in range(500)]
    assert most == 1


def test_only_streams_that_share_nothing_are_grouped_to_be_synced_at_once():
    from types import SimpleNamespace

    from source_framework.runtime.read import _groups

    alongside = {"a": True, "b": True, "c": False, "d": True, "e": False, "f": False, "g": True, "h": True}
    adapters = {name: SimpleNamespace(syncs_alongside_others=flag) for name, flag in alongside.items()}
    configured = [SimpleNamespace(stream=SimpleNamespace(name=name)) for name in alongside]
    groups = [[entry.stream.name for entry in group] for group in _groups(configured, adapters)]
    assert groups == [["a", "b"], ["c"], ["d"], ["e"], ["f"], ["g", "h"]]


# -- a slice's pages at once ---------------------------------------------------------------------


def test_a_worker_lends_its_slice_pages_and_one_read_in_the_loop_lends_none():
    slices = [ListSlice("a", lambda: iter([1]))]
    assert consume(read_ahead(slices, workers=1)) == [("a", 1)] and slices[0].pages is None
    slices = [ListSlice("a", lambda: iter([1]))]
    assert consume(read_ahead(slices, workers=2, permits=threading.Semaphore(2))) == [("a", 1)]
    assert isinstance(slices[0].pages, SparePermitPages)


def test_pages_come_in_order_and_spare_permits_fetch_them_at_once():
    permits = threading.Semaphore(3)
    permits.acquire()  # the worker's own, as read_ahead's worker holds it
    at_once, lock, most = [0], threading.Lock(), [0]
    release = threading.Event()

    def fetch(page):
        with lock:
            at_once[0] += 1
            most[0] = max(most[0], at_once[0])
            if at_once[0] == 3:
                release.set()  # three at once: the most there may be
        release.wait(5)
        with lock:
            at_once[0] -= 1
        return [page * 10, page * 10 + 1]

    results = SparePermitPages(permits, most=8).map_in_order(fetch, range(1, 7))
    assert list(results) == [[10, 11], [20, 21], [30, 31], [40, 41], [50, 51], [60, 61]]
    assert most[0] == 3  # its own permit and the two spare ones, never more
    assert permits.acquire(blocking=False) and permits.acquire(blocking=False)  # the spare ones came back
    assert not permits.acquire(blocking=False)


def test_with_no_spare_permit_pages_are_fetched_one_after_another_and_a_failure_lands_in_its_place():
    permits = threading.Semaphore(1)
    permits.acquire()  # the worker's own: no other is free
    seen = []

    def fetch(page):
        seen.append(page)
        if page == 3:
            raise OSError("page 3 failed")
        return page

    results = SparePermitPages(permits, most=4).map_in_order(fetch, range(1, 6))
    assert next(results) == 1 and next(results) == 2
    with pytest.raises(OSError, match="page 3 failed"):
        next(results)
    assert seen == [1, 2, 3]  # one at a time: page 4 was not asked for before page 3 was taken


def test_page_tokens_that_fail_raise_after_the_pages_before_them_and_give_every_spare_permit_back():
    """A stream's ``page_tokens`` that raises midway (a page count missing from the first page)
    kept the spare permit it had just taken: the permits are shared by every stream of the sync,
    so each such failure lowered the concurrency of the rest of it (found in review)."""
    permits = threading.Semaphore(4)
    permits.acquire()  # the worker's own, as read_ahead's worker holds it

    def tokens():
        yield 1
        yield 2
        raise KeyError("total_pages")

    results = SparePermitPages(permits, most=4).map_in_order(lambda page: page * 10, tokens())
    assert next(results) == 10 and next(results) == 20
    with pytest.raises(KeyError, match="total_pages"):
        next(results)
    permits.release()  # the worker gives its own back
    deadline = time.monotonic() + 5
    free = 0
    while free < 4 and time.monotonic() < deadline:  # page threads give theirs back as they end
        if permits.acquire(timeout=0.1):
            free += 1
    assert free == 4


@pytest.mark.parametrize("concurrency", [1, 4])
def test_a_partition_its_parent_lists_twice_is_read_once_whatever_the_concurrency(concurrency):
    """A parent listing a store twice (overlapping pages, say) must not put its orders in the table
    twice. Read ahead, the second slice of the store was made before the first was read, so it
    started from the store's old cursor and wrote the whole store again (600 duplicate rows of 1,200
    at concurrency 4, found in review); one slice after another, it re-read the cursor's ties."""
    from source_framework.demo.api import DemoApi
    from source_framework.demo.source import StoreOrders, Stores
    from source_framework.runtime.output import ProtocolOutput
    from source_framework.runtime.read import read_streams
    from source_framework.runtime.secrets import SecretFilter
    from source_framework.runtime.stream_adapters import adapt
    from unit_tests.conftest import EventOutput, RecordingDestination, catalog_of, configured

    class StoreOrdersListedTwice(StoreOrders):
        name = "store_orders"  # the demo's schema

        def partitions(self):
            for partition in list(super().partitions())[:3]:
                yield partition
                yield dict(partition)

    with DemoApi(records=2000, api_key="k", seed=3).start() as api:
        config = {"api_key": "k", "api_url": api.url + "/", "page_size": 50, "state_checkpoint_interval": 10_000}
        stream = StoreOrdersListedTwice(config, Stores(config))
        entry = configured("store_orders", "incremental", "append")
        destination = RecordingDestination()
        result = read_streams({"store_orders": adapt(stream, entry)}, catalog_of(entry), {}, destination,
                              ProtocolOutput(EventOutput(destination.events), SecretFilter(())), concurrency=concurrency)
        expected = sum(1 for partition in list(Stores(config).read_only_records())[:3]
                       for _ in StoreOrders(config, Stores(config)).read_records(
                           sync_mode=SyncMode.incremental, stream_slice={"partition": {"store_id": partition["id"]}}))
    assert not result.failed
    ids = [row["id"] for row in destination.sinks["store_orders"].landed]
    assert len(ids) == len(set(ids)) == expected > 0


def test_a_failed_streams_stored_error_keeps_none_of_the_objects_its_frames_held():
    """A failed stream's error stays in its result for the rest of the run; its traceback had kept
    every frame it went through alive, and with them what the read loop held (its slices, their
    threads and fetch permits): the traceback keeps only the lines it went through."""
    import gc
    import traceback
    import weakref

    from source_framework.runtime.results import StreamResult

    class Held:
        pass

    def read_loop(held):
        try:
            raise KeyError("cursor")
        except KeyError as error:
            raise ValueError("the stream failed") from error

    held = Held()
    kept = weakref.ref(held)
    result = StreamResult(name="s")
    try:
        read_loop(held)
    except ValueError as error:
        result.failed(error)
    del held
    gc.collect()
    assert kept() is None, "the stored error's frames keep what the loop held"
    assert result.error is not None and "read_loop" in "".join(traceback.format_exception(result.error))


def test_a_cdk_stream_declaring_concurrency_safe_reads_ahead_only_where_the_loop_moves_its_state(caplog):
    """Read ahead, a worker runs the stream's own code. Where that code moves the state the loop
    reads at a checkpoint (a state property set in ``read_records``), the opt-in is refused with a
    warning; a legacy ``get_updated_state`` stream (the loop tracks its state) and a full refresh
    (no state) keep it."""
    from airbyte_cdk.sources.streams import Stream

    from source_framework.runtime.stream_adapters import adapt
    from unit_tests.conftest import CursorStream, configured

    class SafeCursorStream(CursorStream):
        concurrency_safe = True

    class SafeLegacyStream(Stream):
        """airbyte-cdk's legacy incremental stream: no state of its own, ``get_updated_state``."""

        primary_key, cursor_field, name, concurrency_safe = "id", "n", "legacy", True

        def get_json_schema(self):
            return {"type": "object", "properties": {"id": {"type": "integer"}, "n": {"type": "integer"}}}

        def stream_slices(self, **kwargs):
            return [{"values": [1, 2]}, {"values": [3]}]

        def read_records(self, sync_mode, cursor_field=None, stream_slice=None, stream_state=None):
            for value in stream_slice["values"]:
                yield {"id": value, "n": value}

        def get_updated_state(self, current_stream_state, latest_record):
            return {"n": max(current_stream_state.get("n") or 0, latest_record["n"])}

    def reads_ahead(stream, sync_mode):
        adapter = adapt(stream, configured(stream.name, sync_mode, "append" if sync_mode == "incremental" else "overwrite"))
        adapter.start({})
        return adapter.concurrency_safe

    with caplog.at_level("WARNING", logger="source_framework.read"):
        assert not reads_ahead(SafeCursorStream([[1, 2], [3]]), "incremental")
    assert "numbers declares concurrency_safe = True" in caplog.text and "read_records" in caplog.text
    caplog.clear()
    assert reads_ahead(SafeLegacyStream(), "incremental")
    assert reads_ahead(SafeCursorStream([[1, 2], [3]]), "full_refresh")
    assert not caplog.text
