"""Stream base classes connector authors subclass."""

from source_framework.streams.cursor import CursorValueError
from source_framework.streams.incremental import (
    CursorWentBackwards,
    IncrementalHttpStream,
)
from source_framework.streams.responses import RecordsAtPath, page_json
from source_framework.streams.retry import RetryAfterBackoff
from source_framework.streams.slicing import (
    DateWindowStream,
    PartitionedIncrementalStream,
    date_windows,
)

__all__ = [
    "CursorValueError",
    "CursorWentBackwards",
    "DateWindowStream",
    "IncrementalHttpStream",
    "PartitionedIncrementalStream",
    "RecordsAtPath",
    "RetryAfterBackoff",
    "date_windows",
    "page_json",
]
