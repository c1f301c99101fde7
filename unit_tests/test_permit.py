"""``Permit``: a fetch permit is given back however its holder's block ends, once, by its last holder."""

from __future__ import annotations

import threading

import pytest

from source_framework.runtime import concurrency
from source_framework.runtime.permit import Permit


def free(permits: threading.Semaphore) -> int:
    count = 0
    while permits.acquire(blocking=False):
        count += 1
    for _ in range(count):
        permits.release()
    return count


def test_a_block_that_raises_gives_its_permit_back():
    permits = threading.Semaphore(2)
    with pytest.raises(ValueError), Permit.take(permits):
        assert free(permits) == 1
        raise ValueError
    assert free(permits) == 2


def test_a_permit_handed_on_is_given_back_by_its_new_holder_only_and_only_once():
    permits = threading.Semaphore(1)
    with Permit.take(permits) as permit:
        handed = permit.handed_on()
    assert free(permits) == 0  # the first holder's block ended: the permit is the new holder's
    threads = [threading.Thread(target=handed.give_back) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert free(permits) == 1  # (given back once, however many tried)


def test_a_permit_lent_is_free_during_the_block_and_held_again_after_it_however_it_ends():
    permits = threading.Semaphore(1)
    with Permit.take(permits) as permit:
        with pytest.raises(ValueError), permit.lent():
            assert free(permits) == 1
            raise ValueError
        assert permit.held and free(permits) == 0
    assert free(permits) == 1


def test_no_permit_to_take_and_no_bound():
    permits = threading.Semaphore(1)
    with Permit.take(permits):
        assert Permit.take_if_free(permits) is None
    with Permit.take(None) as unbounded, unbounded.lent():
        assert not unbounded.held


def test_a_page_whose_thread_cannot_start_gives_its_spare_permit_back(monkeypatch):
    """``SparePermitPages``: a page fetched with a spare permit, whose thread fails to start: the
    permit comes back, and the failure is raised where the reader takes that page."""

    def no_thread(self):
        raise RuntimeError("can't start new thread")

    permits = threading.Semaphore(3)
    with Permit.take(permits):  # the worker's own
        pages = concurrency.SparePermitPages(permits, 3)
        started = threading.Thread.start
        fetched = []

        def fetch(token):
            fetched.append(token)
            return token

        def tokens():
            yield 1
            monkeypatch.setattr(threading.Thread, "start", no_thread)  # (the first page's thread started)
            yield 2

        with pytest.raises(RuntimeError):
            list(pages.map_in_order(fetch, tokens()))
        monkeypatch.setattr(threading.Thread, "start", started)
        assert free(permits) == 2  # the spare one given back; the worker's own still held
