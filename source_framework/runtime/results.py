"""What a ``read`` did, per stream: the read loop fills these in, the progress display and the
end-of-run summary show them.

The counts obey one rule, checked by the read loop before any STATE is printed, so no record is
lost silently (docs/concepts.md, "Exactly once")::

    records == handed + skipped          every record the stream yielded went to the sink,
                                         or was a boundary re-read skipped on purpose
    committed == handed                  at the end of an "ok" stream, the sink committed them all
"""

from __future__ import annotations

import traceback
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from source_framework.destinations.base import ValuesNotKept


@dataclass
class StreamResult:
    """What happened to one stream.

    ``records`` and ``slices`` are the read loop's own counters, which the progress display
    samples from its thread while the stream is read; the rest is final when the stream ends.
    """

    name: str
    #: records the stream yielded (including boundary re-reads that were skipped)
    records: int = 0
    #: records handed to the sink
    handed: int = 0
    #: boundary re-reads skipped on purpose: the table committed them at exactly this cursor
    skipped: int = 0
    #: rows the sink reports committed (in the files it published, where it can count them)
    committed: int = 0
    states: int = 0
    slices: int = 0
    #: how many slices the stream has, where that is known without reading (a list of windows)
    slices_total: int | None = None
    final_state: Mapping[str, Any] | None = None
    error: BaseException | None = None
    #: seconds from the stream's start to its end (its last commit, or its failure)
    duration: float = 0.0
    #: where the records went (a table's folder, "stdout"), for people reading the summary
    location: str = ""
    #: writes that reached storage (queued checkpoints may share one); None where not counted
    commits: int | None = None
    #: undeclared fields and values that did not fit their column, as the sink counted them
    values_not_kept: ValuesNotKept = field(default_factory=ValuesNotKept)

    def failed(self, error: BaseException) -> None:
        """The stream ends with ``error``, kept for the rest of the run (the summary, the exit
        code). Its traceback keeps the lines it went through, not their frames' variables: those
        hold what the stream was reading (slices, their threads and fetch permits, pages)."""
        seen: set[int] = set()
        chained: BaseException | None = error
        while chained is not None and id(chained) not in seen:
            seen.add(id(chained))
            traceback.clear_frames(chained.__traceback__)
            chained = chained.__cause__ or chained.__context__
        self.error = error

    @property
    def rows(self) -> int:
        """Rows committed so far (for a failed stream, what its last completed commit held)."""
        return self.committed


@dataclass
class ReadResult:
    streams: list[StreamResult] = field(default_factory=list)

    @property
    def failed(self) -> list[StreamResult]:
        return [s for s in self.streams if s.error is not None]
