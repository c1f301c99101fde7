"""Past its size limit a boundary keeps nothing at the overflowed cursor (issue 11, item 15): the
warning says plainly what that costs an append table, naming the cursor and the rows."""

from __future__ import annotations

import logging

from source_framework.runtime.boundary import MAX_KEYS, Boundary


def test_the_overflow_warning_names_the_cursor_and_the_rows_written_twice(caplog):
    boundary = Boundary(["day"], [["id"]], stream="events")
    boundary.start_partition('{"store": 1}')
    with caplog.at_level(logging.WARNING, logger="source_framework.read"):
        for i in range(MAX_KEYS + 1):
            boundary.already_committed({"id": i, "day": "2025-01-02"})
    (warning,) = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert "cursor '2025-01-02'" in warning and f"the {MAX_KEYS + 1} record(s) read at that cursor so far" in warning
    assert "append table" in warning and "will be there twice" in warning and "append_dedup" in warning
