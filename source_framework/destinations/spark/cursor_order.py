"""Which rows of a table lie before a cursor value, ordered as the runtime orders cursors (``cursor_sort_key``).

``state set`` keeps the rows before its cursor; any other order loses or doubles rows. Spark compares text as text, so common
ISO shapes become instants by Spark expressions, and the few values Spark cannot place are read in this process."""

from __future__ import annotations

import datetime as dt
from typing import Any

from source_framework.streams.cursor import cursor_sort_key, is_datetime_key

#: Values of a text column Spark cannot place, read here; past this many the command refuses.
MAX_VALUES_READ_HERE = 1_000_000

#: ``YYYY-MM-DD[(T| )HH:MM[:SS[(.|,)f{1,6}]][Z|±HH:MM]]``: shapes ``fromisoformat`` and Spark read as the same instant.
_ISO = (r"^((?!0000)[0-9]{4})-([0-9]{2})-([0-9]{2})(?:[T ]([0-9]{2}):([0-9]{2})(?::([0-9]{2})(?:[.,]([0-9]{1,6}))?)?"
        r"(Z|[+-](?:[01][0-9]|2[0-3]):[0-5][0-9])?)?$")
_FULL = "yyyy-MM-dd'T'HH:mm:ss.SSSSSSXXX"


class TooManyOddValues(ValueError):
    """A text cursor column holds more values Spark cannot place than this process reads."""


def before_cursor(frame: Any, name: str, cursor: str) -> Any:
    """A Spark condition: the row's ``name`` is null or orders before ``cursor``."""
    from pyspark.sql import functions as F
    from pyspark.sql.types import StringType, TimestampType

    column = frame[name]
    key = cursor_sort_key(cursor)
    kind = frame.schema[name].dataType
    if isinstance(kind, TimestampType):
        return column.isNull() | (column < F.lit(_utc(key[1])) if is_datetime_key(key) else F.lit(True))
    if not isinstance(kind, StringType):
        return column.isNull() | (column < F.lit(cursor).cast(kind))
    instant = _instant(column)
    odd = column.rlike("^[0-9]") & instant.isNull()  # the runtime tries to parse it; Spark could not
    listed = _read_here(frame.where(odd).select(column.alias("value")).distinct(), key, name)
    before = column.isin(listed) if listed else F.lit(False)
    if is_datetime_key(key):
        return column.isNull() | (instant < F.lit(_utc(key[1]))) | (odd & before)
    # a text cursor: every date-time is before it, and text is compared as text (code point order)
    return column.isNull() | instant.isNotNull() | (~column.rlike("^[0-9]") & (column < F.lit(cursor))) | (odd & before)


def _instant(column: Any) -> Any:
    """The instant a text value in an ``_ISO`` shape names (UTC without a zone, as the runtime takes it), or null."""
    from pyspark.sql import functions as F

    def part(group: int, default: str) -> Any:
        value = F.regexp_extract(column, _ISO, group)
        return F.when(value == "", F.lit(default)).otherwise(value)

    fraction = F.rpad(F.regexp_extract(column, _ISO, 7), 6, "0")
    full = F.concat(part(1, ""), F.lit("-"), part(2, ""), F.lit("-"), part(3, ""), F.lit("T"), part(4, "00"), F.lit(":"),
                    part(5, "00"), F.lit(":"), part(6, "00"), F.lit("."), fraction, part(8, "Z"))
    return F.when(column.rlike(_ISO), F.try_to_timestamp(full, F.lit(_FULL)))


def _read_here(values: Any, key: tuple[int, Any], name: str) -> list[str]:
    """Of ``values`` (one column of distinct texts), those ``cursor_sort_key`` puts before ``key``."""
    rows = values.limit(MAX_VALUES_READ_HERE + 1).collect()
    if len(rows) > MAX_VALUES_READ_HERE:
        raise TooManyOddValues(
            f"column '{name}' holds more than {MAX_VALUES_READ_HERE:,} values that start with a digit and are in no "
            f"common ISO 8601 shape; they cannot be ordered as the sync orders cursors, so nothing was changed"
        )
    return [row["value"] for row in rows if cursor_sort_key(row["value"]) < key]


def _utc(instant: dt.datetime) -> dt.datetime:
    return instant.astimezone(dt.UTC)
