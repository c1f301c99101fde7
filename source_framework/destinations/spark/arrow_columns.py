"""One column of a batch of records -> an Arrow array of the column's type (``convert_column``).

Arrow's vectorised conversion of the whole column first, value by value only where Arrow refuses it; misfits are noted
per row for ``_sf_meta``. The page converter's process loads this file by its path: it imports nothing of the package."""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable, Iterable, Sequence
from datetime import UTC, date, datetime, timedelta
from typing import Any

import orjson
import pyarrow as pa
import pyarrow.compute as pc

TIMESTAMP = pa.timestamp("us", tz="UTC")

# Field metadata marking string columns whose every value is JSON text (object/array).
ENCODING_KEY = b"source_framework.encoding"
JSON_ENCODING = b"json"

_INT64_MIN, _INT64_MAX = -(2**63), 2**63 - 1
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_ONE_MICROSECOND = timedelta(microseconds=1)
_ARROW_ERRORS = (pa.ArrowException, OverflowError, TypeError, ValueError)
_SURROGATE = re.compile("[\ud800-\udfff]")


class ValueNotSerializable(Exception):
    """A value JSON has no form for: airbyte-cdk fails the sync on it too (not a ``ValueError``, which would make it a misfit)."""


class Misfits:
    """Per row, the values that did not fit their column and the fields no column holds (for ``_sf_meta``)."""

    def __init__(self) -> None:
        self.by_row: dict[int, list[dict[str, str]]] = {}
        self.undeclared: dict[int, list[str]] = {}

    def add(self, row: int, field: str, reason: str) -> None:
        self.by_row.setdefault(row, []).append({"field": field, "reason": reason})

    def column(self, num_rows: int) -> pa.Array:
        if not self.by_row and not self.undeclared:
            return pa.nulls(num_rows, pa.string())
        values: list[str | None] = [None] * num_rows
        for row in self.by_row.keys() | self.undeclared.keys():
            meta: dict[str, Any] = {}
            if row in self.by_row:
                meta["errors"] = self.by_row[row]
            if row in self.undeclared:
                meta["undeclared"] = self.undeclared[row]
            values[row] = _as_json(meta)
        return pa.array(values, pa.string())


def convert_column(values: Sequence[Any], field: pa.Field, misfits: Misfits) -> pa.Array:
    arrow_type = field.type
    if pa.types.is_timestamp(arrow_type):
        return _timestamps(values, field.name, misfits)
    if pa.types.is_date32(arrow_type):
        return _dates(values, field.name, misfits)
    if pa.types.is_int64(arrow_type):
        return _inferred(values, pa.int64(), (pa.int64(),), _as_int, field.name, misfits)
    if pa.types.is_float64(arrow_type):
        return _inferred(values, pa.float64(), (pa.float64(), pa.int64()), _as_float, field.name, misfits)
    if pa.types.is_boolean(arrow_type):
        return _inferred(values, pa.bool_(), (pa.bool_(),), _as_bool, field.name, misfits)
    if pa.types.is_string(arrow_type):
        if (field.metadata or {}).get(ENCODING_KEY) == JSON_ENCODING:
            return _json_texts(values, field.name, misfits)
        return _texts(values, field.name, misfits)
    raise TypeError(f"column {field.name!r}: unsupported Arrow type {arrow_type}")


def _inferred(
    values: Sequence[Any],
    target: pa.DataType,
    accepted: tuple[pa.DataType, ...],
    convert: Callable[[Any], Any],
    name: str,
    misfits: Misfits,
) -> pa.Array:
    """Let Arrow infer the type: the typed ``pa.array`` truncates ``1.5`` to ``1`` and turns ``True`` into ``1.0``."""
    try:
        array = pa.array(values)
    except _ARROW_ERRORS:
        array = None
    if array is not None:
        if array.type == pa.null():
            return pa.nulls(len(values), target)
        if array.type == pa.float64() and bool in set(map(type, values)):
            array = None
        elif array.type in accepted:
            try:  # int64 -> float64 refuses integers a double cannot hold exactly
                return _finite(array.cast(target))
            except _ARROW_ERRORS:
                pass
    return pa.array(_each(values, convert, name, misfits), target)


def _finite(array: pa.Array) -> pa.Array:
    """NaN and infinities as null, as airbyte-cdk prints them."""
    if not pa.types.is_floating(array.type) or pc.all(pc.is_finite(array)).as_py() is not False:
        return array
    return pc.if_else(pc.is_finite(array), array, pa.scalar(None, array.type))


def _only_texts(values: Sequence[Any]) -> pa.Array | None:
    """The values as a string array if all are text or null, else None (``pa.array(values, pa.string())`` takes bytes too)."""
    try:
        array = pa.array(values)
    except _ARROW_ERRORS:
        return None
    if array.type == pa.string():
        return array
    return pa.nulls(len(values), pa.string()) if array.type == pa.null() else None


def _texts(values: Sequence[Any], name: str, misfits: Misfits) -> pa.Array:
    texts = _only_texts(values)
    if texts is not None:
        return texts
    return pa.array(_unicode_texts(_each(values, _as_text, name, misfits), name, misfits), pa.string())


def _json_texts(values: Sequence[Any], name: str, misfits: Misfits) -> pa.Array:
    # ``.decode()`` right away: orjson's bytes objects hold over-sized buffers, and thousands of them thrash the allocator.
    dumps = orjson.dumps
    try:
        texts = [None if value is None else dumps(value).decode() for value in values]
    except (orjson.JSONEncodeError, TypeError):
        texts = _each(values, _as_json, name, misfits)
    # orjson writes NaN and infinities as null, as airbyte-cdk prints them: a null, not the text "null"
    return pa.array([None if text == "null" else text for text in texts] if "null" in texts else texts, pa.string())


def _timestamps(values: Sequence[Any], name: str, misfits: Misfits) -> pa.Array:
    strings = _only_texts(values)
    if strings is not None:
        try:  # every value carries a zone ("Z" or an offset)
            return pc.cast(strings, TIMESTAMP)
        except _ARROW_ERRORS:
            pass
        try:  # every value is naive: read as UTC
            return pc.cast(pc.cast(strings, pa.timestamp("us")), TIMESTAMP)
        except _ARROW_ERRORS:
            pass
    micros = pa.array(_each(values, _as_epoch_micros, name, misfits), pa.int64())
    return micros.cast(TIMESTAMP)


def _dates(values: Sequence[Any], name: str, misfits: Misfits) -> pa.Array:
    strings = _only_texts(values)
    if strings is not None:
        try:
            return pc.cast(strings, pa.date32())
        except _ARROW_ERRORS:
            pass
    return pa.array(_each(values, _as_date, name, misfits), pa.date32())


def _unicode_texts(texts: list[Any], name: str, misfits: Misfits) -> list[Any]:
    """``texts`` as UTF-8 can hold: a lone surrogate becomes U+FFFD, noted in the row's ``_sf_meta``."""
    out = []
    for row, text in enumerate(texts):
        if isinstance(text, str) and not _is_unicode_text(text):
            escapes = ", ".join(dict.fromkeys(f"\\u{ord(char):04x}" for char in _SURROGATE.findall(text)))
            misfits.add(row, name, f"lone surrogate {escapes} is not valid Unicode text; replaced with U+FFFD")
            text = _SURROGATE.sub("\ufffd", text)
        out.append(text)
    return out


def _is_unicode_text(text: str) -> bool:
    return text.isascii() or _SURROGATE.search(text) is None


def _each(values: Iterable[Any], convert: Callable[[Any], Any], name: str, misfits: Misfits) -> list[Any]:
    """Convert value by value, each as airbyte-cdk prints it; a value that raises ``ValueError`` becomes None and is noted."""
    out: list[Any] = []
    append = out.append
    for row, value in enumerate(values):
        if type(value) not in _JSON_TYPES or (type(value) is float and not math.isfinite(value)):
            try:
                value = as_printed(value)
            except ValueNotSerializable as error:
                raise ValueNotSerializable(f"field '{name}' of a record (row {row + 1} of a batch): {error}") from None
        if value is None:
            append(None)
            continue
        try:
            append(convert(value))
        except ValueNotSerializable as error:
            raise ValueNotSerializable(f"field '{name}' of a record (row {row + 1} of a batch): {error}") from None
        except (ValueError, TypeError, OverflowError) as exc:
            append(None)
            misfits.add(row, name, str(exc))
    return out


#: values JSON parsers return: anything else is first made what airbyte-cdk prints (``as_printed``)
_JSON_TYPES = frozenset({str, int, float, bool, dict, list})


def as_printed(value: Any) -> Any:
    """``value`` as airbyte-cdk's entrypoint prints it, read back; ``ValueNotSerializable`` where the CDK fails the sync."""
    try:
        return orjson.loads(orjson.dumps(value))
    except (orjson.JSONEncodeError, TypeError):
        pass
    try:
        return json.loads(json.dumps(value, default=_refused))
    except (TypeError, ValueError) as error:
        raise _unprintable(error) from None


def _unprintable(error: Exception) -> ValueNotSerializable:
    return ValueNotSerializable(f"{error}; airbyte-cdk cannot print such a record either (it fails the sync: 'failed "
                                f"to be serialized to JSON'). Make the stream yield JSON values (a Decimal as a float "
                                f"or a string, bytes as text)")


def _refused(value: Any) -> Any:
    raise TypeError(f"a {type(value).__module__}.{type(value).__qualname__} has no JSON form"
                    if type(value).__module__ != "builtins" else f"a {type(value).__qualname__} has no JSON form")


def _misfit(expected: str, value: Any) -> ValueError:
    try:
        shown = _as_json(value)
    except (TypeError, ValueError):
        shown = repr(value)
    if len(shown) > 80:
        shown = shown[:77] + "..."
    return ValueError(f"expected {expected}, got {_json_type(value)} {shown}")


def _json_type(value: Any) -> str:
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, (int, float)):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, dict):
        return "object"
    if isinstance(value, (list, tuple)):
        return "array"
    return type(value).__name__


def _as_int(value: Any) -> int:
    if isinstance(value, bool):
        raise _misfit("integer", value)
    if isinstance(value, int):
        result = value
    elif isinstance(value, float) and value.is_integer():
        result = int(value)
    elif isinstance(value, str):
        try:
            result = int(value.strip())
        except ValueError:
            raise _misfit("integer", value) from None
    else:
        raise _misfit("integer", value)
    if not _INT64_MIN <= result <= _INT64_MAX:
        raise _misfit("integer within int64 range", value)
    return result


def _as_float(value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float, str)):
        raise _misfit("number", value)
    try:
        return float(value)
    except (ValueError, OverflowError):
        raise _misfit("number", value) from None


def _as_bool(value: Any) -> bool:
    if isinstance(value, bool):
        return value
    if value == "true":
        return True
    if value == "false":
        return False
    raise _misfit("boolean", value)


def _as_text(value: Any) -> str:
    return value if isinstance(value, str) else _as_json(value)


def _as_json(value: Any) -> str:
    try:
        return orjson.dumps(value).decode()
    except (orjson.JSONEncodeError, TypeError):
        pass
    # orjson refuses ints beyond 64 bits and lone surrogates; json writes a lone surrogate as its escape: the same value.
    try:
        text = json.dumps(value, separators=(",", ":"), ensure_ascii=False, default=_refused)
        return text if _is_unicode_text(text) else json.dumps(value, separators=(",", ":"))
    except (TypeError, ValueError) as error:
        raise _unprintable(error) from None


def _as_epoch_micros(value: Any) -> int:
    if not isinstance(value, str):
        raise _misfit("ISO 8601 date-time string", value)
    try:
        parsed = datetime.fromisoformat(value)
    except ValueError:
        raise _misfit("ISO 8601 date-time string", value) from None
    if parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=UTC)
    return (parsed - _EPOCH) // _ONE_MICROSECOND


def _as_date(value: Any) -> date:
    if not isinstance(value, str):
        raise _misfit("ISO 8601 date string", value)
    try:
        return date.fromisoformat(value)
    except ValueError:
        raise _misfit("ISO 8601 date string", value) from None
