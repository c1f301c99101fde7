"""Turn a stream's JSON schema into an Arrow schema, and its records into an Arrow table (Spark's cheapest hand-off).

Objects, arrays, untyped and union properties are stored as JSON text, so an API changing a nested shape never breaks the
table. A value that does not fit its column becomes null and is named in the row's ``_sf_meta``, as are undeclared fields."""

from __future__ import annotations

import operator
import threading
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from source_framework.destinations.spark.arrow_columns import (
    ENCODING_KEY,
    JSON_ENCODING,
    TIMESTAMP,
    Misfits,
    convert_column,
)

EXTRACTED_AT = "_sf_extracted_at"
SYNC_ID = "_sf_sync_id"
CHECKPOINT = "_sf_checkpoint"
META = "_sf_meta"
METADATA_COLUMNS = (EXTRACTED_AT, SYNC_ID, CHECKPOINT, META)


def arrow_schema(json_schema: dict) -> pa.Schema:
    """One nullable column per top-level property, then the ``_sf_*`` metadata columns."""
    properties = json_schema.get("properties") or {}
    reserved = sorted(set(properties) & set(METADATA_COLUMNS))
    if reserved:
        raise ValueError(f"stream properties use reserved column names: {reserved}")
    clash = case_clash([*properties, *METADATA_COLUMNS])
    if clash:
        raise ValueError(f"the stream's properties '{clash[0]}' and '{clash[1]}' differ only by case: Spark's and Delta's "
                         f"column names are case-insensitive, so one table cannot hold both (a reader fails with "
                         f"COLUMN_ALREADY_EXISTS). Rename one of them in the stream's schema")
    fields = [_property_field(name, spec or {}) for name, spec in properties.items()]
    fields += [
        pa.field(EXTRACTED_AT, TIMESTAMP),
        pa.field(SYNC_ID, pa.string()),
        pa.field(CHECKPOINT, pa.int64()),
        pa.field(META, pa.string()),
    ]
    return pa.schema(fields)


def case_clash(names: Iterable[str]) -> tuple[str, str] | None:
    """The first two of ``names`` that differ only by case (the first seen, then the other), or None."""
    seen: dict[str, str] = {}
    for name in names:
        other = seen.setdefault(name.casefold(), name)
        if other != name:
            return other, name
    return None


def _property_field(name: str, spec: dict) -> pa.Field:
    declared = spec.get("type")
    types = [declared] if isinstance(declared, str) else list(declared or [])
    non_null = [t for t in dict.fromkeys(types) if t != "null"]
    if len(non_null) != 1:
        return pa.field(name, pa.string())  # untyped or a union: text, JSON for non-strings
    kind = non_null[0]
    if kind == "string":
        fmt = spec.get("format")
        if fmt == "date-time":
            return pa.field(name, TIMESTAMP)
        if fmt == "date":
            return pa.field(name, pa.date32())
        return pa.field(name, pa.string())
    if kind == "integer":
        return pa.field(name, pa.int64())
    if kind == "number":
        return pa.field(name, pa.float64())
    if kind == "boolean":
        return pa.field(name, pa.bool_())
    # object, array, and any type name we do not know: keep the value as JSON text.
    return pa.field(name, pa.string(), metadata={ENCODING_KEY: JSON_ENCODING})


class ConversionCounts:
    """What a stream's conversion could not keep as given, counted across batches (locked: batches convert in two threads)."""

    def __init__(
        self,
        on_new_undeclared: Callable[[list[str]], None] | None = None,
        on_new_mismatch: Callable[[str, str], None] | None = None,
    ) -> None:
        """The callbacks are told each new undeclared field, and each field's first misfit with its reason, once (to log them)."""
        self.undeclared: Counter[str] = Counter()  # {field: records that carried it}
        self.records_with_undeclared = 0
        self.mismatched: Counter[str] = Counter()  # {field: values that did not fit its column}
        self.mismatch_reasons: dict[str, str] = {}  # {field: the first such value's reason}
        self._on_new_undeclared = on_new_undeclared
        self._on_new_mismatch = on_new_mismatch
        self._lock = threading.Lock()

    def add(self, misfits: Misfits) -> None:
        if not misfits.by_row and not misfits.undeclared:
            return
        mismatched: Counter[str] = Counter()
        reasons: dict[str, str] = {}
        for _, errors in sorted(misfits.by_row.items()):  # the first reason is the first row's
            for error in errors:
                mismatched[error["field"]] += 1
                reasons.setdefault(error["field"], error["reason"])
        undeclared = Counter(name for names in misfits.undeclared.values() for name in names)
        self.add_counts({"undeclared": undeclared, "undeclared_records": len(misfits.undeclared),
                         "mismatched": mismatched, "mismatch_reasons": reasons})

    def add_counts(self, counts: Mapping[str, Any]) -> None:
        """Counts made elsewhere (the page converter's process), in the shape of :meth:`as_dict`."""
        with self._lock:
            known = len(self.undeclared)
            self.records_with_undeclared += counts.get("undeclared_records", 0)
            self.undeclared.update(counts.get("undeclared") or {})
            new_undeclared = list(self.undeclared)[known:]  # a Counter keeps first-seen order
            self.mismatched.update(counts.get("mismatched") or {})
            new_mismatches = [(name, reason) for name, reason in (counts.get("mismatch_reasons") or {}).items()
                              if name not in self.mismatch_reasons]
            self.mismatch_reasons.update(new_mismatches)
        if new_undeclared and self._on_new_undeclared is not None:
            self._on_new_undeclared(new_undeclared)
        if self._on_new_mismatch is not None:
            for name, reason in new_mismatches:
                self._on_new_mismatch(name, reason)

    def as_dict(self) -> dict[str, Any]:
        with self._lock:
            return {"undeclared": dict(self.undeclared), "undeclared_records": self.records_with_undeclared,
                    "mismatched": dict(self.mismatched), "mismatch_reasons": dict(self.mismatch_reasons)}


class TypeMismatch(Exception):
    """A value did not fit its column and the destination says ``on_type_mismatch: fail``."""


#: what ``on_type_mismatch`` may say: store such a value as null (and count it), or fail the stream
ON_TYPE_MISMATCH = ("null", "fail")


def parquet_options(options: Mapping[str, Any], schema: pa.Schema) -> dict[str, Any]:
    """Write options with a dictionary only for plain text columns: ids, amounts and JSON texts mostly differ row to row."""
    texts = [field.name for field in schema
             if pa.types.is_string(field.type) and (field.metadata or {}).get(ENCODING_KEY) != JSON_ENCODING]
    return {**options, "use_dictionary": texts}


def _undeclared_fields(records: Sequence[Mapping[str, Any]], declared: frozenset[str]) -> dict[int, list[str]]:
    found = {}
    for row, record in enumerate(records):
        if not declared.issuperset(record):  # builds no set for a record with declared fields only
            found[row] = sorted(str(name) for name in record if name not in declared)
    return found


def records_to_arrow(
    records: Sequence[Mapping[str, Any]],
    schema: pa.Schema,
    *,
    extracted_at_ms: list[int] | int,
    sync_id: str,
    checkpoint: int,
    counts: ConversionCounts | None = None,
    on_type_mismatch: str = "null",
) -> pa.Table:
    """Build an Arrow table with exactly ``schema``'s columns; misfits become null and are named in ``_sf_meta``."""
    num_rows = len(records)
    misfits = Misfits()
    columns: dict[str, pa.Array] = {}
    data_fields = [field for field in schema if field.name not in METADATA_COLUMNS]
    values_by_field, every_field_held = _columns(records, [field.name for field in data_fields])
    for field, values in zip(data_fields, values_by_field, strict=True):
        columns[field.name] = convert_column(values, field, misfits)
    if not (every_field_held and _sizes_are(records, len(data_fields))):  # else exactly the declared fields
        misfits.undeclared = _undeclared_fields(records, frozenset(field.name for field in data_fields))
    if misfits.by_row and on_type_mismatch == "fail":
        row, errors = next(iter(sorted(misfits.by_row.items())))
        raise TypeMismatch(f"field '{errors[0]['field']}' of a record (row {row + 1} of a batch of {num_rows}): "
                           f"{errors[0]['reason']}; the destination's on_type_mismatch is 'fail' (with 'null', the "
                           f"default, such a value is stored as null and named in the row's _sf_meta)")
    if counts is not None:
        counts.add(misfits)

    metadata = {
        EXTRACTED_AT: lambda: _extracted_at(extracted_at_ms, num_rows),
        SYNC_ID: lambda: pa.repeat(pa.scalar(sync_id, pa.string()), num_rows),
        CHECKPOINT: lambda: pa.repeat(pa.scalar(checkpoint, pa.int64()), num_rows),
        META: lambda: misfits.column(num_rows),  # last: every data column has been converted
    }
    for name, build in metadata.items():
        if name in schema.names:
            columns[name] = build()
    return pa.Table.from_arrays([columns[field.name] for field in schema], schema=schema)


def warm_up() -> None:
    """Import and load ahead what the first conversion needs, so it does not fall between the first checkpoint and its STATE."""
    import io

    import pyarrow.parquet as pq

    schema = arrow_schema({"properties": {"i": {"type": "integer"}, "n": {"type": "number"}, "b": {"type": "boolean"},
                                          "s": {"type": "string"}, "t": {"type": "string", "format": "date-time"},
                                          "d": {"type": "string", "format": "date"}, "o": {"type": "object"}}})
    record = {"i": 1, "n": 1.5, "b": True, "s": "x", "t": "2025-01-01T00:00:00Z", "d": "2025-01-01", "o": {"k": [1]}}
    table = records_to_arrow([record], schema, extracted_at_ms=[0], sync_id="warm-up", checkpoint=0)
    pq.write_table(table, io.BytesIO())


def _columns(records: Sequence[Mapping[str, Any]], names: list[str]) -> tuple[list[Sequence[Any]], bool]:
    """Each named field's values, and whether every record is a plain dict holding every name (one pass: cache-friendly)."""
    if not names:
        return [], False
    if len(names) == 1:
        return [[record.get(names[0]) for record in records]], False
    try:
        rows = list(map(operator.itemgetter(*names), records))
        # A dict's ``[name]`` raises for a field it lacks; other mappings may answer anyway (``Counter``).
        every_field_held = set(map(type, records)) == {dict}
    except (KeyError, TypeError):  # a record without some field (or not a dict): the slower way
        rows = [tuple(record.get(name) for name in names) for record in records]
        every_field_held = False
    return (list(zip(*rows, strict=True)) if rows else [[] for _ in names]), every_field_held


def _sizes_are(records: Sequence[Mapping[str, Any]], size: int) -> bool:
    """A dict holding every declared field and no more fields holds no other: its size tells, without reading its keys."""
    return set(map(len, records)) == {size}


def _extracted_at(extracted_at_ms: list[int] | int, num_rows: int) -> pa.Array:
    if isinstance(extracted_at_ms, int):
        return pa.repeat(pa.scalar(extracted_at_ms * 1000, TIMESTAMP), num_rows)
    if len(extracted_at_ms) != num_rows:
        raise ValueError(f"extracted_at_ms has {len(extracted_at_ms)} values for {num_rows} records")
    millis = pa.array(extracted_at_ms, pa.int64())
    return pc.multiply(millis, 1000).cast(TIMESTAMP)

