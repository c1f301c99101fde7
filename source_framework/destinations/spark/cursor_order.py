"""Which rows of a table lie before a cursor value, ordered as the runtime orders cursors (``cursor_sort_key``).

``state set`` keeps the rows before its cursor; any other order loses or doubles rows. Spark compares text as text, so common
ISO shapes become instants by Spark expressions, and the few values Spark cannot place are read in this process. A table this
process writes with Arrow is split with Arrow (``arrow_rows_before``), each distinct text ordered by ``cursor_sort_key``."""

from __future__ import annotations

import datetime as dt
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from source_framework.streams.cursor import cursor_sort_key, is_datetime_key

#: Values of a text column Spark cannot place, read here; past this many the command refuses.
MAX_VALUES_READ_HERE = 1_000_000

#: ``YYYY-MM-DD[(T| )HH:MM[:SS[(.|,)f{1,6}]][Z|±HH:MM]]``: shapes ``fromisoformat`` and Spark read as the same instant.
_ISO = (r"^((?!0000)[0-9]{4})-([0-9]{2})-([0-9]{2})(?:[T ]([0-9]{2}):([0-9]{2})(?::([0-9]{2})(?:[.,]([0-9]{1,6}))?)?"
        r"(Z|[+-](?:[01][0-9]|2[0-3]):[0-5][0-9])?)?$")


class TooManyOddValues(ValueError):
    """A text cursor column holds more values Spark cannot place than this process reads."""


def spark_rows_before(frame: Any, name: str, cursor: str) -> Any:
    """The rows of a Spark frame whose ``name`` is null or orders before ``cursor``."""
    from pyspark.sql import functions as F
    from pyspark.sql.types import StringType, TimestampType

    column = frame[name]
    key = cursor_sort_key(cursor)
    kind = frame.schema[name].dataType
    if isinstance(kind, TimestampType):
        return frame.where(column.isNull() | (column < F.lit(key[1].astimezone(dt.UTC)) if is_datetime_key(key) else F.lit(True)))
    if not isinstance(kind, StringType):
        return frame.where(column.isNull() | (column < F.lit(cursor).cast(kind)))
    instant = _instant(column)
    odd = column.rlike("^[0-9]") & instant.isNull()  # the runtime tries to parse it; Spark could not
    values = frame.where(odd).select(column.alias("value")).distinct().limit(MAX_VALUES_READ_HERE + 1).collect()
    if len(values) > MAX_VALUES_READ_HERE:
        raise TooManyOddValues(
            f"column '{name}' holds more than {MAX_VALUES_READ_HERE:,} values that start with a digit and are in no "
            f"common ISO 8601 shape; they cannot be ordered as the sync orders cursors, so nothing was changed"
        )
    listed = [row["value"] for row in values if cursor_sort_key(row["value"]) < key]
    before = column.isin(listed) if listed else F.lit(False)
    if is_datetime_key(key):
        return frame.where(column.isNull() | (instant < F.lit(key[1].astimezone(dt.UTC))) | (odd & before))
    # a text cursor: every date-time is before it, and text is compared as text (code point order)
    return frame.where(column.isNull() | instant.isNotNull() | (~column.rlike("^[0-9]") & (column < F.lit(cursor))) | (odd & before))


def arrow_rows_before(rows: pa.Table, name: str, cursor: str) -> pa.Table:
    """The rows of an Arrow table whose ``name`` is null or orders before ``cursor``, as ``spark_rows_before`` keeps them."""
    column, key = rows[name], cursor_sort_key(cursor)
    if pa.types.is_timestamp(column.type):
        before = pc.less(column, pa.scalar(key[1].astimezone(dt.UTC), column.type)) if is_datetime_key(key) else pa.scalar(True)
    elif pa.types.is_string(column.type) or pa.types.is_large_string(column.type):
        texts = pc.unique(column).drop_null().to_pylist()
        before = pc.is_in(column, pa.array([text for text in texts if cursor_sort_key(text) < key], column.type))
    else:
        before = pc.less(column, pa.scalar(cursor).cast(column.type))
    return rows.filter(pc.or_kleene(pc.is_null(column), before))


def _instant(column: Any) -> Any:
    """The instant a text value in an ``_ISO`` shape names (UTC without a zone, as the runtime takes it), or null."""
    from pyspark.sql import functions as F

    def part(group: int, default: str) -> Any:
        value = F.regexp_extract(column, _ISO, group)
        return F.when(value == "", F.lit(default)).otherwise(value)

    fraction = F.rpad(F.regexp_extract(column, _ISO, 7), 6, "0")
    full = F.concat(part(1, ""), F.lit("-"), part(2, ""), F.lit("-"), part(3, ""), F.lit("T"), part(4, "00"), F.lit(":"),
                    part(5, "00"), F.lit(":"), part(6, "00"), F.lit("."), fraction, part(8, "Z"))
    return F.when(column.rlike(_ISO), F.try_to_timestamp(full, F.lit("yyyy-MM-dd'T'HH:mm:ss.SSSSSSXXX")))
