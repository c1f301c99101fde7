"""Reading several slices of a stream at once, handing them on in the order they came.

The loop sees the same slices, items and failures in the same order as with ``workers=1``, so checkpoints and STATEs are
unchanged; state moves only in the loop's thread. Workers are daemon threads, not a ``concurrent.futures`` pool, whose
threads the interpreter joins at exit: one stuck in a request's retries would keep the process alive.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable, Generator, Iterable, Iterator, Sequence
from concurrent.futures import Future
from typing import Any, NamedTuple, TypeVar

from source_framework.helpers.tuning import TUNING
from source_framework.runtime.permit import Permit
from source_framework.runtime.stream_adapter_base import SliceRead

T = TypeVar("T")
R = TypeVar("R")


class _ReadAheadLimit:
    """How far workers may read ahead of the loop: far only while the process leaves the core idle, since parsing far
    ahead of a busy loop only takes the interpreter from it and grows memory."""

    def __init__(self, capacity: int, clock: Callable[[], float] = time.monotonic,
                 cpu_clock: Callable[[], float] = time.process_time) -> None:
        self.full = capacity
        self.busy = True
        self.seen_busy = False
        self.capacity = min(capacity, TUNING.busy_capacity)  # (read without a lock: a hint, checked again)
        self._clock, self._cpu_clock = clock, cpu_clock
        self._since, self._cpu_since = clock(), cpu_clock()
        self._window = TUNING.first_window

    def took(self) -> None:
        now = self._clock()
        elapsed = now - self._since
        if elapsed >= self._window:
            cpu = self._cpu_clock()
            busy = (cpu - self._cpu_since) / elapsed
            if busy >= TUNING.saturated or busy <= TUNING.idle:
                self.busy = self.seen_busy = busy >= TUNING.saturated
                self.capacity = min(self.full, TUNING.busy_capacity) if self.busy else self.full
            self._since, self._cpu_since, self._window = now, cpu, TUNING.pace_window


class _Channel:
    """The items of one slice, from its worker to the read loop."""

    def __init__(self, pace: _ReadAheadLimit) -> None:
        self._condition = threading.Condition()
        self._chunks: deque[list[Any]] = deque()
        self._buffered = 0
        self._pace = pace
        self._done = False
        self._error: BaseException | None = None
        self.abandoned = False
        #: the loop is waiting for items: hand over what there is (read without the lock, a hint)
        self.waiting = False
        self.iterator_asked = False
        self._given: _Given | None = None

    def put(self, chunk: list[Any], permit: Permit) -> bool:
        """Hand ``chunk`` over, waiting while the slice is full (lending the fetch permit meanwhile); False: abandoned."""
        with self._condition:
            full = self._full()
        if full:
            with permit.lent(), self._condition:
                while self._full():
                    self._condition.wait(TUNING.full_wait)
        with self._condition:
            while self._full():
                self._condition.wait(TUNING.full_wait)
            if self.abandoned:
                return False
            self._chunks.append(chunk)
            self._buffered += len(chunk)
            self.waiting = False
            self._condition.notify_all()
            return True

    def _full(self) -> bool:
        return self._buffered >= self._pace.capacity and not self.abandoned and not self.iterator_asked

    def end(self, error: BaseException | None = None) -> None:
        with self._condition:
            self._done, self._error = True, error
            self._condition.notify_all()

    def take(self) -> list[Any] | None:
        """The next chunk; None once the slice ended; raises what the slice raised, in its place."""
        with self._condition:
            while not self._chunks and not self._done:
                self.waiting = True
                self._condition.wait()
            if self._chunks:
                chunk = self._chunks.popleft()
                self._buffered -= len(chunk)
                self._condition.notify_all()
                self._pace.took()
                return chunk
            if self._error is not None:
                raise self._error
            return None

    def give_iterator(self, iterator: Iterator[Any], permit: Permit) -> bool:
        """Hand the loop the slice's iterator and fetch permit; False: the loop is gone and the worker keeps both."""
        with self._condition:
            if self.abandoned:
                return False
            self._given, self._done = _Given(iterator, permit.handed_on()), True
            self._condition.notify_all()
            return True

    def take_iterator(self) -> tuple[list[list[Any]], _Given | None, BaseException | None]:
        """The chunks the worker read, then the slice's iterator and permit to read on with (None if it had ended)."""
        with self._condition:
            self.iterator_asked = self.waiting = True
            self._condition.notify_all()
            while not self._done:
                self._condition.wait()
            chunks, self._chunks, self._buffered = list(self._chunks), deque(), 0
            given, self._given = self._given, None
            return chunks, given, self._error

    def abandon(self) -> _Given | None:
        """The loop stopped: release the worker; returns the iterator and permit if given but never taken."""
        with self._condition:
            self.abandoned = True
            self._chunks.clear()
            self._condition.notify_all()
            given, self._given = self._given, None
            return given


class _Given(NamedTuple):
    """A slice's iterator handed to the loop, with the worker's fetch permit that the loop gives back when done."""

    iterator: Iterator[Any]
    permit: Permit


class SparePermitPages:
    """``PageFetches`` for a worker's slice: pages fetched at once, each in its own thread, with spare permits."""

    def __init__(self, permits: threading.Semaphore, most: int, pace: _ReadAheadLimit | None = None) -> None:
        self._permits = permits
        self._most = max(1, most)
        self._pace = pace  # while it is ``busy``, pages are fetched one after another, in this thread

    def map_in_order(self, fetch: Callable[[T], R], tokens: Iterable[T]) -> Iterator[R]:
        remaining = iter(tokens)
        pending: deque[tuple[Future[R], bool]] = deque()  # (the page, fetched with the worker's own permit)
        own_busy = exhausted = False
        failure: BaseException | None = None  # the tokens' own, raised after the pages before it
        while True:
            busy = self._pace is not None and self._pace.busy
            if busy and not pending and not exhausted:
                try:
                    token = next(remaining)
                except StopIteration:
                    return
                yield fetch(token)
                continue
            while not busy and not exhausted and len(pending) < self._most:
                own = not own_busy
                spare = Permit(None) if own else Permit.take_if_free(self._permits)
                if spare is None:
                    break
                with spare:  # handed on to the page's thread, else given back here
                    try:
                        page = _in_thread(fetch, next(remaining), spare)
                    except BaseException as error:
                        if not isinstance(error, Exception):
                            raise  # an interrupt does not wait for the pages
                        exhausted = True
                        if not isinstance(error, StopIteration):
                            failure = error
                        break
                pending.append((page, own))
                own_busy = own_busy or own
            if not pending:
                if failure is not None:
                    raise failure
                return
            page, own = pending.popleft()
            own_busy = own_busy and not own
            yield page.result()


def _in_thread(fetch: Callable[[T], R], token: T, permit: Permit) -> Future[R]:
    """``fetch(token)`` in a daemon thread of its own, which takes ``permit`` over and gives it back when done."""
    future: Future[R] = Future()
    handed = permit.handed_on()

    def run() -> None:
        with handed:
            try:
                future.set_result(fetch(token))
            except BaseException as error:
                future.set_exception(error)

    try:
        threading.Thread(target=run, name="page", daemon=True).start()
    except BaseException:  # (no thread, or interrupted starting it: whichever gives it back first does)
        handed.give_back()
        raise
    return future


def _fill(channel: _Channel, stream_slice: SliceRead, permits: threading.Semaphore | None, workers: int,
          pace: _ReadAheadLimit) -> None:
    with Permit.take(permits) as permit:
        if not channel.abandoned:
            pages = SparePermitPages(permits, workers, pace) if permits is not None else None
            _read_into(channel, stream_slice, permit, pages)


def _read_into(channel: _Channel, stream_slice: SliceRead, permit: Permit, pages: SparePermitPages | None) -> None:
    chunk: list[Any] = []
    iterator: Iterator[Any] | None = None
    try:
        iterator = iter(stream_slice.items(pages))
        for item in iterator:
            chunk.append(item)
            if len(chunk) >= TUNING.chunk or channel.waiting:
                if not channel.put(chunk, permit):
                    return
                chunk = []
                if channel.iterator_asked:
                    if channel.give_iterator(iterator, permit):
                        iterator = None
                    return
    except BaseException as error:  # handed to the loop, raised there after the items before it
        if not chunk or channel.put(chunk, permit):
            channel.end(error)
        return
    finally:
        if channel.abandoned and iterator is not None:
            _close(iterator)  # runs the stream's own clean-up (finally blocks), in this thread
    if not chunk or channel.put(chunk, permit):
        channel.end()


def _close(iterator: Iterator[Any]) -> None:
    close = getattr(iterator, "close", None)
    if close is not None:
        close()


class _SliceReadAhead(SliceRead):
    def __init__(self, inner: SliceRead, pace: _ReadAheadLimit, permits: threading.Semaphore | None, workers: int) -> None:
        self._inner = inner
        self._pace = pace
        self.partition = inner.partition
        self.observe = inner.observe
        self.channel = _Channel(pace)
        self._reading: Generator[Any, None, None] | None = None
        threading.Thread(target=_fill, args=(self.channel, inner, permits, workers, pace), name="read-ahead", daemon=True).start()

    def items(self, pages: Any = None) -> Iterable[Any]:
        self._reading = self._items()
        return self._reading

    def _items(self) -> Generator[Any, None, None]:
        take, pace = self.channel.take, self._pace
        pace.took()
        while not pace.seen_busy or not pace.busy:
            chunk = take()
            if chunk is None:
                return
            yield from chunk
        chunks, given, error = self.channel.take_iterator()
        with given.permit if given is not None else Permit(None):
            try:
                for chunk in chunks:
                    yield from chunk
                if given is None:
                    if error is not None:
                        raise error
                    return
                yield from given.iterator  # (no look at the pace per item: a cost on every record)
            finally:
                if given is not None:
                    _close(given.iterator)

    def close(self) -> None:
        self._inner.close()

    def abandon(self) -> None:
        """The loop stopped: release the worker and end the loop's reading, which gives back its fetch permit."""
        untaken = self.channel.abandon()
        if self._reading is not None:
            self._reading.close()
        if untaken is not None:
            with untaken.permit:
                _close(untaken.iterator)


class _Failed:
    def __init__(self, error: Exception) -> None:
        self.error = error


def read_ahead(
    slices: Iterable[SliceRead],
    workers: int,
    capacity: int | None = None,
    permits: threading.Semaphore | None = None,
) -> Generator[SliceRead, None, None]:
    """``slices`` read ahead by up to ``workers`` threads; close it however reading ends (``contextlib.closing``), or a
    generator kept alive by a stored traceback holds a shared fetch permit for the rest of the sync."""
    if workers <= 1:
        yield from slices
        return
    source = iter(slices)
    pace = _ReadAheadLimit(TUNING.capacity if capacity is None else capacity)
    ahead: deque[_SliceReadAhead | _Failed] = deque()
    head: _SliceReadAhead | _Failed | None = None
    exhausted = False
    try:
        while True:
            while not exhausted and len(ahead) < workers:
                try:
                    ahead.append(_SliceReadAhead(next(source), pace, permits, workers))
                except StopIteration:
                    exhausted = True
                except Exception as error:  # the slices before it are read and committed first
                    ahead.append(_Failed(error))
                    exhausted = True
            if not ahead:
                return
            head = ahead.popleft()
            if isinstance(head, _Failed):
                raise head.error
            yield head
    finally:  # no worker may wait for the caller, no permit stay taken
        for pending in (head, *ahead):
            if isinstance(pending, _SliceReadAhead):
                pending.abandon()


class ReadStopped(BaseException):
    """Another stream synced at the same time died: this one stops too, leaving its table to the next run's recovery."""


def run_in_order(tasks: Sequence[Callable[[], T]], workers: int, stop: threading.Event) -> list[T]:
    """Run ``tasks`` in up to ``workers`` threads and return their results in order; one that raises sets ``stop``."""
    if workers <= 1 or len(tasks) <= 1:
        return [task() for task in tasks]
    results: list[Any] = [None] * len(tasks)
    errors: list[BaseException] = []
    finished = threading.Condition()
    running = 0

    def run(index: int) -> None:
        nonlocal running
        try:
            results[index] = tasks[index]()
        except BaseException as error:
            stop.set()
            with finished:
                errors.append(error)
        finally:
            with finished:
                running -= 1
                finished.notify_all()

    threads = []
    try:
        for index in range(len(tasks)):
            with finished:
                while running >= workers and not stop.is_set():
                    finished.wait()
                if stop.is_set():
                    break
                running += 1
            thread = threading.Thread(target=run, args=(index,), name=f"stream-{index}", daemon=True)
            threads.append(thread)
            thread.start()
        for thread in threads:
            thread.join()
    except BaseException:  # Ctrl-C: stop the streams, let them end where they are
        stop.set()
        for thread in threads:
            thread.join(timeout=TUNING.stop_timeout)
        raise
    first = next((e for e in errors if not isinstance(e, ReadStopped)), errors[0] if errors else None)
    if first is not None:
        raise first
    return results

