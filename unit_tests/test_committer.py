"""Background commits: order, merging of queued checkpoints, back-pressure, failures."""

import sys
import threading

import pytest

from source_framework.destinations.spark.committer import BackgroundCommitter, CommitJob
from unit_tests.conftest import ConditionWaits


class Writer:
    """Stands for a stream's ``TableWriter``: the committer uses only its identity (jobs of one
    writer merge) and its name, so no shared fake sink applies."""

    name = "fake"


def job(writer, n, state):
    return CommitJob(writer, [[{"i": i} for i in range(n)]], n, 10 * n, {"s": state}, None)


def test_queued_checkpoints_of_one_stream_merge_into_one_write_and_all_futures_complete():
    writes, started, gate = [], threading.Event(), threading.Event()

    def commit(jobs):
        started.set()
        gate.wait(5)
        writes.append([j.state["s"] for j in jobs])
        return [len(writes)] * len(jobs)  # one result per job

    committer = BackgroundCommitter(commit)
    writer = Writer()
    futures = [committer.submit(job(writer, 10, 0))]
    assert started.wait(5)
    futures += [committer.submit(job(writer, 10, s)) for s in range(1, 5)]
    gate.set()
    assert [f.result(5) for f in futures][-1] == 2
    committer.close()
    assert writes == [[0], [1, 2, 3, 4]]  # the first was running when the others queued
    assert committer.writes == 2 and committer.merged == 3


def test_jobs_of_different_streams_are_not_merged_and_keep_their_order():
    writes = []
    committer = BackgroundCommitter(lambda jobs: writes.append([j.state["s"] for j in jobs]) or [None] * len(jobs))
    a, b = Writer(), Writer()
    for writer, state in ((a, 1), (b, 2), (a, 3)):
        committer.submit(job(writer, 1, state))
    committer.close()
    assert [s for w in writes for s in w] == [1, 2, 3]
    assert all(len(w) == 1 for w in writes) or writes == [[1], [2], [3]]


@pytest.mark.parametrize(
    "bounds, size",
    [
        ({"max_pending_records": 100}, 80),  # records: 160 waiting > 100
        ({"max_pending_records": 10_000, "max_pending_bytes": 1000}, 60),  # bytes: 1200 > 1000, only 120 records
    ],
    ids=["records", "bytes"],
)
def test_back_pressure_blocks_the_reader_while_too_much_waits(bounds, size):
    gate, holding = threading.Event(), threading.Event()

    def commit(jobs):
        holding.set()
        gate.wait(10)
        return [True] * len(jobs)

    committer = BackgroundCommitter(commit, **bounds)
    writer = Writer()
    committer.submit(job(writer, size, 1))
    assert holding.wait(10)  # the worker holds job 1
    committer.submit(job(writer, size, 2))  # queued
    waits, accepted = ConditionWaits(), threading.Event()

    def third():
        sys.setprofile(waits)  # the one wait in submit is back-pressure's
        try:
            committer.submit(job(writer, size, 3))  # over the bound: must wait
        finally:
            sys.setprofile(None)
        accepted.set()

    thread = threading.Thread(target=third)
    thread.start()
    assert waits.entered.wait(10) and not accepted.is_set(), "submit should block while the queue is over its bound"
    gate.set()  # the worker finishes job 1: the queue is under its bound again
    assert accepted.wait(10)
    thread.join()
    committer.close()


def test_a_failed_commit_fails_its_futures():
    def commit(jobs):
        raise OSError("disk full")

    committer = BackgroundCommitter(commit)
    writer = Writer()
    future = committer.submit(job(writer, 1, 1))
    with pytest.raises(OSError):
        future.result(5)
    committer.close()


def test_each_job_gets_its_own_result():
    committer = BackgroundCommitter(lambda jobs: [job.state["s"] * 10 for job in jobs])
    writer = Writer()
    futures = [committer.submit(job(writer, 1, s)) for s in (1, 2, 3)]
    assert [f.result(5) for f in futures] == [10, 20, 30]
    committer.close()


def test_a_commit_returning_the_wrong_number_of_results_fails_its_futures():
    committer = BackgroundCommitter(lambda jobs: [])
    future = committer.submit(job(Writer(), 1, 1))
    with pytest.raises(RuntimeError, match="0 results for 1 jobs"):
        future.result(5)
    committer.close()
