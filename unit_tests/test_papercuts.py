"""Papercuts a new user found (issue 51 item 9) that need no sync to show: the progress display.
The rest are run through the command line in ``integration_tests/test_papercuts.py``."""

from __future__ import annotations

from source_framework.runtime.progress import StreamView, checkpoint_line
from source_framework.runtime.results import StreamResult


def test_the_progress_line_never_shows_more_slices_done_than_it_says_there_are():
    """The progress line said "5/1 slices" for a five-page full refresh: the total the adapter took
    for the stream was wrong, and the display printed it anyway. A total that the count passed is
    no total: only the count is shown, as when the total is unknown."""
    line = checkpoint_line(StreamView(StreamResult("products", records=50, slices=5, slices_total=1), started=0.0), {}, 1.0)
    assert ", 5 slices," in line and "5/1" not in line
    shown = {(done, total): StreamView(StreamResult("s", slices=done, slices_total=total), started=0.0).slices()
             for done, total in ((0, 3), (3, 3), (4, 3), (2, None), (1, 0))}
    assert shown == {(0, 3): "0/3", (3, 3): "3/3", (4, 3): "4", (2, None): "2", (1, 0): "1"}
