"""The garbage collector's pace while a sync streams records (``runtime.process.gc_for_streaming``).

What a caller relies on: starting a sync does not walk every object its process holds (a notebook,
a scheduler or a test run holding Spark and airbyte-cdk: 0.2-0.3 s a sync), what the process held
before is left out of the collector's passes during the sync, and everything is as it was after it,
with garbage made before the sync still collected.
"""

from __future__ import annotations

import gc
import weakref

from source_framework.runtime.process import READING_GC_THRESHOLDS, gc_for_streaming


class _Node:
    def __init__(self) -> None:
        self.partner: _Node | None = None


def _cycle() -> weakref.ref:
    """A reference cycle that is garbage at once; the weak reference says when it is collected."""
    a, b = _Node(), _Node()
    a.partner, b.partner = b, a
    return weakref.ref(a)


def test_starting_a_sync_does_not_walk_every_object_of_the_process():
    held = [[index] for index in range(200_000)]  # a process holding a lot (tracked containers)
    full_passes = gc.get_stats()[2]["collections"]
    with gc_for_streaming():
        assert gc.get_stats()[2]["collections"] == full_passes
        assert gc.get_freeze_count() >= len(held)  # left out of the passes while records stream
        assert gc.get_threshold() == READING_GC_THRESHOLDS
    del held


def test_after_a_sync_the_collector_is_as_before_and_earlier_garbage_is_collected():
    before = gc.get_threshold()
    gc.collect()
    frozen_before = gc.get_freeze_count()
    garbage = _cycle()
    with gc_for_streaming():
        during = _cycle()
    assert gc.get_threshold() == before
    assert gc.get_freeze_count() == frozen_before
    gc.collect()
    assert garbage() is None and during() is None
