"""Reading several slices of a stream at once, handing them on in the order they came.

Real APIs spend most of a sync waiting (100-500 ms a page). ``read_ahead`` lets worker threads
fetch the next slices' pages while the read loop is still busy with the first one::

    with closing(read_ahead(adapter.slices(), workers=4)) as slices:  # closed: its permits given back
        for stream_slice in slices:
            for item in stream_slice.items():    # the same items, in the same order, as without it
                ...
            stream_slice.close()

The read loop sees what it would see reading one slice after another: the same slices in the
same order, each slice's items in order, a failure where it happened. So the cursor, the
checkpoints and the STATEs are those of ``workers=1``; only *when* pages were fetched changes.
Workers touch nothing but the slice's items: the stream's state moves in the loop's thread
(``SliceRead.observe``, ``SliceRead.close``), so only streams whose items can be produced apart
from their state read ahead (``StreamAdapter.concurrency_safe``).

Memory stays bounded: a slice read ahead holds about ``capacity`` items; its worker then
waits for the loop. A crash loses the slices in flight, which no STATE covered yet.

Pages too, where the stream names every page of a slice from the first (``streams.pages``): a
worker fetches them at once with the permits no other slice holds (``SparePermitPages``), so a
sync's last slices keep every permit busy; the records still come in page order.

Only while the API is the limit (``_ReadAheadLimit``): while the process keeps a core busy (an API that
answers at once), workers read about a page ahead and fetch a slice's pages one after another,
as one thread reading alone would, since more threads would only take turns with the loop in the
one interpreter. And once the process has been seen busy, the loop reads each slice on in its
own thread: it takes what the slice's worker read, then the slice's iterator itself (and the
worker's fetch permit), which the worker gives it at its next chunk (``_Channel.take_iterator``). Why:
records made in one thread and read in another cost the loop the interpreter's hand-overs and
cold caches, per record. The pace is looked at again as each slice begins.

Threads: each slice's worker, page and stream runs in a daemon thread of its own, not in a
``concurrent.futures`` pool, whose threads the interpreter joins at exit: one stuck in a request
(or in up to 10 minutes of retries) after the sync stopped would keep the process alive. What
each may queue is bounded all the same: ``workers`` slices ahead, ``capacity`` items a slice,
``workers`` pages a slice (``unit_tests/test_worker_threads.py``).
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
    """How far the workers of one ``read_ahead`` may read ahead of its loop.

    Why: reading ahead is for an API slower than this process. Where the API answers at once, the
    one interpreter is the limit: workers parsing pages far ahead take it from the loop, the pages
    are cold when the loop gets to them, and memory grows. So the workers start a page or so
    ahead, go far while the process keeps less than ``TUNING.idle`` of a core busy, and come back to
    a page once it keeps ``TUNING.saturated`` busy. Pages a stream fetches at once (``SparePermitPages``)
    take the permits of the workers that wait."""

    def __init__(self, capacity: int, clock: Callable[[], float] = time.monotonic,
                 cpu_clock: Callable[[], float] = time.process_time) -> None:
        self.full = capacity
        #: the process keeps a core busy: workers read about a page ahead, pages are fetched one by one
        self.busy = True
        #: the process was seen keeping a core busy (not only assumed so, as at the start)
        self.seen_busy = False
        self.capacity = min(capacity, TUNING.busy_capacity)  # (read without a lock: a hint, checked again)
        self._clock, self._cpu_clock = clock, cpu_clock
        self._since, self._cpu_since = clock(), cpu_clock()
        self._window = TUNING.first_window

    def took(self) -> None:
        """The loop took a chunk, or began a slice (loop thread): once a window has passed, look at
        the CPU used."""
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
        #: the loop asked for the slice's iterator (``take_iterator``), and what the worker gave
        self.iterator_asked = False
        self._given: _Given | None = None

    def put(self, chunk: list[Any], permit: Permit) -> bool:
        """Hand ``chunk`` over; wait while the slice holds as many items as the pace allows
        (lending the worker's fetch permit meanwhile, so that a slice the loop waits for can
        fetch). False: abandoned."""
        with self._condition:
            full = self._full()
        if full:
            with permit.lent(), self._condition:
                while self._full():
                    self._condition.wait(TUNING.full_wait)  # (the pace may let it go on)
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
        """The worker's side of ``take_iterator``: the slice's iterator, after the items put before it,
        and the worker's fetch permit with it. False: the loop is gone (abandoned), the worker keeps both."""
        with self._condition:
            if self.abandoned:
                return False
            self._given, self._done = _Given(iterator, permit.handed_on()), True
            self._condition.notify_all()
            return True

    def take_iterator(self) -> tuple[list[list[Any]], _Given | None, BaseException | None]:
        """The loop's side: the chunks the worker read, then the slice's iterator to read on from with
        the worker's fetch permit, or, if the slice had ended, None and what it raised. The worker
        gives them at its next chunk."""
        with self._condition:
            self.iterator_asked = self.waiting = True
            self._condition.notify_all()
            while not self._done:
                self._condition.wait()
            chunks, self._chunks, self._buffered = list(self._chunks), deque(), 0
            given, self._given = self._given, None
            return chunks, given, self._error

    def abandon(self) -> _Given | None:
        """The loop stopped: release the worker, drop what it read. Returns the slice's iterator and
        fetch permit if the worker gave them and the loop never took them (interrupted in
        ``take_iterator``)."""
        with self._condition:
            self.abandoned = True
            self._chunks.clear()
            self._condition.notify_all()
            given, self._given = self._given, None
            return given


class _Given(NamedTuple):
    """A slice's iterator the worker gave the loop, to read on in its own thread, and the worker's
    fetch permit, which the loop gives back once it ends the reading (``_close``)."""

    iterator: Iterator[Any]
    permit: Permit


class SparePermitPages:
    """``PageFetches`` for a worker's slice: its pages fetched at once, each in a thread of its own,
    the first with the worker's own permit, the others with permits no other slice holds (taken
    without waiting, given back when the page is in), at most ``most`` pages ahead of the reader."""

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
                own = not own_busy  # (the worker's own permit is held by the worker: none to take)
                spare = Permit(None) if own else Permit.take_if_free(self._permits)
                if spare is None:
                    break  # every permit is busy elsewhere: this page waits for one of ours
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
            yield page.result()  # a page that failed raises here, in its place


def _in_thread(fetch: Callable[[T], R], token: T, permit: Permit) -> Future[R]:
    """``fetch(token)`` in a thread of its own, which takes ``permit`` over and gives it back when done."""
    future: Future[R] = Future()
    handed = permit.handed_on()

    def run() -> None:
        with handed:
            try:
                future.set_result(fetch(token))
            except BaseException as error:  # raised where the reader takes this page
                future.set_exception(error)

    try:  # (a daemon thread, not a pool's: see "Threads" in the module's docstring)
        threading.Thread(target=run, name="page", daemon=True).start()
    except BaseException:  # (no thread, or interrupted starting it: whichever gives it back first does)
        handed.give_back()
        raise
    return future


def _fill(channel: _Channel, stream_slice: SliceRead, permits: threading.Semaphore | None, workers: int,
          pace: _ReadAheadLimit) -> None:
    """A worker: read the slice's items into its channel, holding a fetch permit meanwhile (unless
    it hands it to the loop with the slice's iterator)."""
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
                        iterator = None  # the loop's now, with the permit
                    return  # (else the loop is gone: closed below)
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
    """A slice whose items a worker thread is reading."""

    def __init__(self, inner: SliceRead, pace: _ReadAheadLimit, permits: threading.Semaphore | None, workers: int) -> None:
        self._inner = inner
        self._pace = pace
        self.partition = inner.partition
        self.observe = inner.observe
        self.channel = _Channel(pace)
        self._reading: Generator[Any, None, None] | None = None
        # (a daemon thread, not a pool's: see "Threads" in the module's docstring)
        threading.Thread(target=_fill, args=(self.channel, inner, permits, workers, pace), name="read-ahead", daemon=True).start()

    def items(self, pages: Any = None) -> Iterable[Any]:  # the worker gives the slice its pages
        """The slice's items: from the worker, until the process has been seen busy; then what the
        worker read, and the rest read here (see the module's docstring)."""
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
        # The process keeps a core busy: the rest of the slice is read here, in the loop's thread.
        chunks, given, error = self.channel.take_iterator()
        with given.permit if given is not None else Permit(None):  # the loop's now, whatever stops the reading
            try:
                for chunk in chunks:
                    yield from chunk
                if given is None:
                    if error is not None:
                        raise error
                    return
                yield from given.iterator  # (no look at the pace per item: a cost on every record)
            finally:  # read to its end, or the loop stopped in it: the stream's clean-up runs here
                if given is not None:
                    _close(given.iterator)

    def close(self) -> None:
        self._inner.close()

    def abandon(self) -> None:
        """The loop stopped (in this slice or before it): release the worker, and end the reading
        the loop began here, which gives back the fetch permit it took with the slice."""
        untaken = self.channel.abandon()
        if self._reading is not None:
            self._reading.close()
        if untaken is not None:
            with untaken.permit:
                _close(untaken.iterator)  # the stream's clean-up (its finally blocks), in this thread


class _Failed:
    """Slices could not be generated: raised when the loop reaches this point."""

    def __init__(self, error: Exception) -> None:
        self.error = error


def read_ahead(
    slices: Iterable[SliceRead],
    workers: int,
    capacity: int | None = None,
    permits: threading.Semaphore | None = None,
) -> Generator[SliceRead, None, None]:
    """``slices``, each read by a worker thread up to ``workers`` slices ahead of the caller, up to
    ``capacity`` items ahead while the process waits for the API (None: ``TUNING.capacity``; a page
    or so while it is busy).

    The caller reads a slice's items to the end before it asks for the next slice. With
    ``workers`` 1 this is ``slices`` itself: no thread is started. ``permits``, shared by the
    streams synced at once, bounds the slices fetching at the same time across all of them; so
    the caller closes this generator however its reading ends (``contextlib.closing``), which
    gives back every permit its slices hold: left to the garbage collector, one kept alive by a
    stored error's traceback would hold a permit for the rest of the sync.
    """
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
    finally:  # the caller stopped (or is done): no worker may wait for it, no permit stay taken
        for pending in (head, *ahead):
            if isinstance(pending, _SliceReadAhead):
                pending.abandon()


class ReadStopped(BaseException):
    """Another stream synced at the same time died (a crash, not a failure): this one stops too,
    as it would if the process had died, leaving its table to the next run's recovery."""


def run_in_order(tasks: Sequence[Callable[[], T]], workers: int, stop: threading.Event) -> list[T]:
    """Run ``tasks`` in up to ``workers`` threads, started in order; their results, in order.

    A task that raises (``BaseException`` only: tasks report their failures in their results)
    sets ``stop``, which the other tasks watch; once all have ended, its exception is raised
    here. So is a ``KeyboardInterrupt`` of the caller, after the tasks it stopped ended.
    """
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
            # (a daemon thread, not a pool's: Ctrl-C leaves one stuck behind after ``stop_timeout``)
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

