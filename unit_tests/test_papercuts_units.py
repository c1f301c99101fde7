"""Papercuts a new user found (issue 51 item 9) that need no sync to show: the progress display, the cursor a sync follows.
The rest are run through the command line in ``integration_tests/test_papercuts.py`` (a file of another
name: two test files of one name cannot be collected in one run)."""

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


def test_a_source_defined_cursor_is_the_one_the_sync_follows_whatever_the_catalog_names():
    """The stream's state holds its own cursor, so the resume's boundary and append_dedup's latest row
    follow that one too (airbyte-cdk: a source-defined cursor wins), not the field the catalog names;
    a stream that lets the catalog choose (``source_defined_cursor`` False) follows the catalog."""
    from source_framework.runtime.stream_adapters import adapt
    from unit_tests.conftest import CursorStream, configured

    class CatalogChooses(CursorStream):
        source_defined_cursor = False

    named_otherwise = configured("numbers", cursor_field=["m"])
    own = adapt(CursorStream([[1, 2]]), named_otherwise)
    assert own.cursor_field == ["n"] and own.ignored_catalog_cursor() == ["m"]
    chosen = adapt(CatalogChooses([[1, 2]]), named_otherwise)
    assert chosen.cursor_field == ["m"] and chosen.ignored_catalog_cursor() is None
    assert adapt(CursorStream([[1]]), configured("numbers", cursor_field=["n"])).ignored_catalog_cursor() is None
    assert adapt(CursorStream([[1]]), configured("numbers")).cursor_field == ["n"]
