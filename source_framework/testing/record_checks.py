"""Record checks of Airbyte's ``basic_read`` and ``full_refresh`` tests that airbyte-cdk's
standard suite no longer runs: expected records, extra columns, two identical reads.

::

    expected = load_expected_records("integration_tests/expected_records.jsonl")
    check_expected_records(read, expected, options, streams=["users", ...], ignored_fields={...})
    check_no_extra_columns(read, stream_infos)
    check_identical_reads(first, second, ignored_fields={...})

Expected records use Airbyte's JSONL format, one record per line:
``{"stream": "users", "data": {...}, "emitted_at": 1700000000000}`` (a whole
``{"type": "RECORD", "record": {...}}`` line is accepted too). ``emitted_at`` is not compared.
Options, as in Airbyte's ``expect_records``: ``exact_order`` (the stream's first records are the
expected ones, in order), ``extra_fields`` (a read record may have fields the expected one has
not), ``extra_records`` (the read may return records that are not expected; default true).
``ignored_fields`` (``{stream: ["a", "b/c"]}``, ``/`` for nested fields) are removed from both
sides before comparing.
"""

from __future__ import annotations

import copy
import json
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from source_framework.testing.acceptance_config import ExpectRecords
from source_framework.testing.catalogs import StreamInfo
from source_framework.testing.connector_runs import ReadOutput

MAX_EXAMPLES = 5


def _short(value: Any, limit: int = 200) -> str:
    text = json.dumps(value, sort_keys=True, default=str)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def load_expected_records(path: str) -> dict[str, list[dict[str, Any]]]:
    """``{stream: [data, ...]}`` from an Airbyte expected-records JSONL file."""
    expected: dict[str, list[dict[str, Any]]] = {}
    with open(path, encoding="utf-8") as handle:
        for number, line in enumerate(handle, start=1):
            if not line.strip():
                continue
            try:
                item = json.loads(line)
            except ValueError:
                raise AssertionError(f"{path}:{number} is not JSON") from None
            if item.get("type") == "RECORD":
                item = item["record"]
            if not isinstance(item, dict) or "stream" not in item or not isinstance(item.get("data"), dict):
                raise AssertionError(f"{path}:{number} is not a record ({{'stream': ..., 'data': {{...}}}})")
            expected.setdefault(item["stream"], []).append(item["data"])
    return expected


def without_fields(record: Mapping[str, Any], paths: Iterable[str]) -> dict[str, Any]:
    """A copy of ``record`` without the ``/``-separated field paths."""
    result = copy.deepcopy(dict(record))
    for path in paths:
        parts = [p for p in path.split("/") if p]
        node: Any = result
        for part in parts[:-1]:
            node = node.get(part) if isinstance(node, dict) else None
        if isinstance(node, dict) and parts:
            node.pop(parts[-1], None)
    return result


def _canonical(value: Any) -> str:
    return json.dumps(value, sort_keys=True, default=str)


def _matches(expected: Mapping[str, Any], actual: Mapping[str, Any], extra_fields: bool) -> bool:
    if not extra_fields:
        return _canonical(expected) == _canonical(actual)
    return all(key in actual and _canonical(actual[key]) == _canonical(value) for key, value in expected.items())


def check_expected_records(
    read: ReadOutput,
    expected: Mapping[str, list[dict[str, Any]]],
    options: ExpectRecords,
    streams: Sequence[str],
    ignored_fields: Mapping[str, Sequence[str]],
    empty_streams: Sequence[str] = (),
    require_every_stream: bool = False,
) -> None:
    """The read returned the expected records of each stream (as ``options`` say)."""
    problems: list[str] = []
    unknown = sorted(set(expected) - set(streams))
    if unknown:
        problems.append(f"expected records name streams the catalog does not read: {unknown}")
    if require_every_stream:
        without = [s for s in streams if s not in expected and s not in empty_streams]
        if without:
            problems.append(
                f"no expected records for stream(s) {without} (test_strictness_level: high wants some for "
                "every stream, or the stream listed in empty_streams)"
            )
    for name in streams:
        if name not in expected:
            continue
        ignore = ignored_fields.get(name, ())
        want = [without_fields(r, ignore) for r in expected[name]]
        got = [without_fields(r, ignore) for r in read.records(name)]
        problems += _compare_stream(name, want, got, options)
    assert not problems, f"{read.describe()} vs expected records:\n" + "\n".join(problems)


def _compare_stream(name: str, want: list[dict[str, Any]], got: list[dict[str, Any]], options: ExpectRecords) -> list[str]:
    if options.exact_order:
        head = got[: len(want)] if options.extra_records else got
        if len(head) != len(want):
            return [f"stream '{name}': {len(got)} records read, {len(want)} expected (exact_order, no extra records)"]
        for index, (expected, actual) in enumerate(zip(want, head, strict=True)):
            if not _matches(expected, actual, options.extra_fields):
                return [f"stream '{name}': record #{index} is {_short(actual)}, expected {_short(expected)}"]
        return []
    remaining = list(got)
    missing = []
    for expected in want:
        for index, actual in enumerate(remaining):
            if _matches(expected, actual, options.extra_fields):
                del remaining[index]
                break
        else:
            missing.append(expected)
    problems = []
    if missing:
        problems.append(
            f"stream '{name}': {len(missing)} of {len(want)} expected records were not read, e.g. "
            + "; ".join(_short(r) for r in missing[:MAX_EXAMPLES])
        )
    if remaining and not options.extra_records:
        problems.append(
            f"stream '{name}': {len(remaining)} records read that are not expected (extra_records: false), e.g. "
            + "; ".join(_short(r) for r in remaining[:MAX_EXAMPLES])
        )
    return problems


def _schema_paths(schema: Mapping[str, Any], prefix: str = "") -> set | None:
    """Every field path the schema declares, or None below a level without ``properties``."""
    properties = schema.get("properties")
    if not isinstance(properties, Mapping):
        return None
    paths = set()
    for name, sub in properties.items():
        path = f"{prefix}/{name}"
        paths.add(path)
        nested = _schema_paths(sub or {}, path) if isinstance(sub, Mapping) else None
        if nested:
            paths |= nested
    return paths


def _record_paths(value: Any, schema: Mapping[str, Any], prefix: str = "") -> list[str]:
    """Field paths of ``value`` below the levels whose schema declares ``properties``."""
    properties = schema.get("properties")
    if not isinstance(value, Mapping) or not isinstance(properties, Mapping):
        return []
    paths = []
    for name, sub_value in value.items():
        path = f"{prefix}/{name}"
        paths.append(path)
        sub_schema = properties.get(name)
        if isinstance(sub_schema, Mapping):
            paths += _record_paths(sub_value, sub_schema, path)
    return paths


def check_no_extra_columns(read: ReadOutput, streams: Mapping[str, StreamInfo]) -> None:
    """Records carry no field their stream's schema does not declare (``fail_on_extra_columns``).

    For source_framework this matters more than for Airbyte: the Spark table has one column per
    declared property, so an undeclared field would silently not land.
    """
    problems = []
    for name, info in streams.items():
        declared = _schema_paths(info.json_schema)
        if declared is None:
            continue
        extra: Counter = Counter()
        for record in read.records(name):
            for path in _record_paths(record, info.json_schema):
                if path not in declared:
                    extra[path] += 1
        if extra:
            shown = ", ".join(f"{path} ({count} records)" for path, count in extra.most_common(MAX_EXAMPLES))
            problems.append(f"stream '{name}': fields not in the schema: {shown}")
    assert not problems, f"{read.describe()}:\n" + "\n".join(problems)


def check_identical_reads(
    first: ReadOutput, second: ReadOutput, streams: Sequence[str], ignored_fields: Mapping[str, Sequence[str]]
) -> None:
    """Two full-refresh reads return the same records per stream (order aside)."""
    problems = []
    for name in streams:
        ignore = ignored_fields.get(name, ())
        a = Counter(_canonical(without_fields(r, ignore)) for r in first.records(name))
        b = Counter(_canonical(without_fields(r, ignore)) for r in second.records(name))
        if a != b:
            only_first, only_second = list((a - b).elements()), list((b - a).elements())
            problems.append(
                f"stream '{name}': {sum(a.values())} records then {sum(b.values())}; "
                f"{len(only_first)} only in the first read (e.g. {only_first[:2]}), "
                f"{len(only_second)} only in the second (e.g. {only_second[:2]}); "
                "list fields that change between reads under ignored_fields"
            )
    assert not problems, "two full-refresh reads differ:\n" + "\n".join(problems)
