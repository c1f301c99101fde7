"""Commits in the background, in order, while the runtime goes on reading.

Checkpoints of a stream that queue up while a commit runs are merged into one write (each keeps its own future), so slow
commits grow rather than pile up; ``submit`` blocks the reader while too many records or bytes wait (back-pressure)."""

from __future__ import annotations

import logging
import threading
from collections import deque
from collections.abc import Callable, Mapping
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    import pyarrow as pa

    from source_framework.destinations.checkpoint_record import ResumeNotes
    from source_framework.destinations.spark.page_conversion import PageConverter

logger = logging.getLogger("source_framework.spark")


class JobWriter(Protocol):
    name: str

    def apply(self, jobs: list[CommitJob]) -> list[Any]: ...


@dataclass
class CommitJob:
    """One checkpoint of one stream: what to write and the state it covers; once built, only the committer's thread touches it."""

    writer: JobWriter
    batches: list[pa.Table]
    rows: int  # in the batches and in ``records``
    nbytes: int
    state: Mapping[str, Any] | None
    notes: ResumeNotes | None
    stage_only: bool = False
    #: records not yet converted, with when each was read: the writer converts them, sparing the reading thread
    records: list[Mapping[str, Any]] = field(default_factory=list)
    extracted_at_ms: list[int] = field(default_factory=list)
    #: states of checkpoints handed over with this one (before it): their STATEs are printed after its commit
    earlier_states: list[Mapping[str, Any] | None] = field(default_factory=list)
    #: rows the stream's page converter holds for this job, up to ``page_token`` (``page_conversion``)
    pages: PageConverter | None = None
    page_token: int | None = None
    page_rows: int = 0
    future: Future[Any] = field(default_factory=Future)


class BackgroundCommitter:
    """A single worker thread running ``commit(jobs)`` on batches of queued jobs; one result per job, in order."""

    def __init__(
        self,
        commit: Callable[[list[CommitJob]], list[Any]],
        max_pending_records: int = 200_000,
        max_pending_bytes: int = 256 * 1024 * 1024,
    ) -> None:
        self._commit = commit
        self._max_pending = max(1, max_pending_records)
        self._max_pending_bytes = max(1, max_pending_bytes)
        self._queue: deque[CommitJob] = deque()
        self._pending_records = 0
        self._pending_bytes = 0
        self._lock = threading.Condition()
        self._closed = False
        self.writes = 0
        self.merged = 0
        self._worker = threading.Thread(target=self._run, name="spark-committer", daemon=True)
        self._worker.start()

    def submit(self, job: CommitJob) -> Future[Any]:
        with self._lock:
            # Back-pressure (a job is always accepted into an empty queue, so progress is never blocked).
            while self._queue and (
                self._pending_records + job.rows > self._max_pending
                or self._pending_bytes + job.nbytes > self._max_pending_bytes
            ):
                self._lock.wait()
            self._queue.append(job)
            self._pending_records += job.rows
            self._pending_bytes += job.nbytes
            self._lock.notify_all()
        return job.future

    def close(self) -> None:
        with self._lock:
            self._closed = True
            self._lock.notify_all()
        self._worker.join()

    def _take(self) -> list[CommitJob]:
        with self._lock:
            while not self._queue and not self._closed:
                self._lock.wait()
            if not self._queue:
                return []
            batch = [self._queue.popleft()]
            # Only jobs of one kind merge: staged rows belong to the checkpoint after them.
            while self._queue and self._queue[0].writer is batch[0].writer and self._queue[0].stage_only == batch[0].stage_only:
                batch.append(self._queue.popleft())
            return batch

    def _done(self, batch: list[CommitJob]) -> None:
        with self._lock:
            self._pending_records -= sum(job.rows for job in batch)
            self._pending_bytes -= sum(job.nbytes for job in batch)
            self._lock.notify_all()

    def _run(self) -> None:
        while True:
            batch = self._take()
            if not batch:
                return
            try:
                results = self._commit(batch)
                if len(results) != len(batch):
                    raise RuntimeError(f"a commit returned {len(results)} results for {len(batch)} jobs")
            except BaseException as error:  # each waiting STATE learns its commit failed
                logger.error("commit of %s failed: %r", getattr(batch[0].writer, "name", "?"), error)
                for job in batch:
                    job.future.set_exception(error)
            else:
                self.writes += 1
                self.merged += len(batch) - 1
                for job, result in zip(batch, results, strict=True):
                    job.future.set_result(result)
            self._done(batch)
