"""What a ``read`` did, per stream.

Before any STATE is printed the read loop checks ``records == handed + skipped`` and, at the end of an ok stream,
``committed == handed``, so no record is lost silently.
"""

from __future__ import annotations

import traceback
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from source_framework.destinations.base import ValuesNotKept


@dataclass
class StreamResult:
    """What happened to one stream; ``records`` and ``slices`` are sampled by the progress thread while it reads."""

    name: str
    #: records the stream yielded (including boundary re-reads that were skipped)
    records: int = 0
    handed: int = 0
    #: boundary re-reads skipped on purpose: the table committed them at exactly this cursor
    skipped: int = 0
    #: rows the sink reports committed
    committed: int = 0
    states: int = 0
    slices: int = 0
    #: how many slices the stream has, where that is known without reading
    slices_total: int | None = None
    final_state: Mapping[str, Any] | None = None
    error: BaseException | None = None
    duration: float = 0.0
    location: str = ""
    #: writes that reached storage (queued checkpoints may share one); None where not counted
    commits: int | None = None
    values_not_kept: ValuesNotKept = field(default_factory=ValuesNotKept)

    def failed(self, error: BaseException) -> None:
        """The stream ends with ``error``; its traceback's frames are cleared, since their variables hold slices, threads
        and fetch permits."""
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
