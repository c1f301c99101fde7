"""The threads ``runtime.concurrency`` starts never keep the process alive: a slice, page or stream
stuck in a request (or in up to 10 minutes of retries) after the sync stopped is left behind when
the process ends. Why this holds: they are daemon threads, not ``concurrent.futures`` pool threads,
which the interpreter joins at exit."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import time

SCRIPT = textwrap.dedent(
    """
    import dataclasses, os, signal, threading, time
    from contextlib import closing
    from source_framework.runtime import concurrency
    from source_framework.runtime.concurrency import SparePermitPages, read_ahead, run_in_order
    from source_framework.runtime.stream_adapter_base import SliceRead

    STUCK = 60  # seconds a request takes to answer: far longer than the test waits

    class Slice(SliceRead):
        def __init__(self, name, produce):
            self.partition, self._produce = name, produce

        def items(self, pages=None):
            return self._produce()

    asked = threading.Event()

    def stuck():
        asked.set()
        time.sleep(STUCK)
        yield "never"

    # a slice read ahead whose worker is stuck when the loop stops
    permits = threading.Semaphore(2)
    with closing(read_ahead([Slice("a", lambda: iter([1, 2, 3])), Slice("b", stuck)], workers=2, permits=permits)) as slices:
        assert list(next(slices).items()) == [1, 2, 3]
        assert asked.wait(10)

    # a page fetched at once whose thread is stuck when the reader stops
    pages = SparePermitPages(threading.Semaphore(2), 2).map_in_order(lambda n: n if n == 1 else time.sleep(STUCK), [1, 2])
    assert next(pages) == 1
    pages.close()

    # Ctrl-C while a stream is stuck: it gets stop_timeout seconds, then the process goes without it
    concurrency.TUNING = dataclasses.replace(concurrency.TUNING, stop_timeout=0.1)
    threading.Timer(0.2, os.kill, (os.getpid(), signal.SIGINT)).start()
    try:
        run_in_order([lambda: time.sleep(STUCK), lambda: time.sleep(STUCK)], 2, threading.Event())
    except KeyboardInterrupt:
        print("interrupted")
    """
)


def test_threads_stuck_in_a_request_do_not_keep_the_process_alive():
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    env = {**os.environ, "PYTHONPATH": root}
    started = time.monotonic()
    done = subprocess.run([sys.executable, "-c", SCRIPT], env=env, capture_output=True, text=True, timeout=50)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "interrupted"
    assert time.monotonic() - started < 30  # (a thread joined at exit would hold it 60 s)
