"""Record checks of Airbyte's ``basic_read`` and ``full_refresh`` tests that airbyte-cdk's suite no longer runs."""

from __future__ import annotations

import copy
import fnmatch
import json
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from source_framework.testing.acceptance_config import ExpectRecords
from source_framework.testing.catalogs import StreamInfo
from source_framework.testing.connector_runs import ReadOutput

MAX_EXAMPLES = 5


def short_json(value: Any, limit: int = 200) -> str:
    text = json.dumps(value, sort_keys=True, default=str)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def load_expected_records(path: str) -> dict[str, list[dict[str, Any]]]:
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
    """A copy of ``record`` without the ``/``-separated field paths; parts may be globs, list items match by index."""
    result = copy.deepcopy(dict(record))
    for path in paths:
        parts = [p for p in path.split("/") if p]
        if parts:
            _delete(result, parts)
    return result


def _delete(node: Any, parts: Sequence[str]) -> None:
    pattern, rest = parts[0], parts[1:]
    if isinstance(node, dict):
        keys = [key for key in node if fnmatch.fnmatchcase(str(key), pattern)]
    elif isinstance(node, list):
        keys = [index for index in range(len(node)) if fnmatch.fnmatchcase(str(index), pattern)]
    else:
        return
    if rest:
        for key in keys:
            _delete(node[key], rest)
    else:
        for key in reversed(keys):  # a list's later items first, so the earlier indexes stay valid
            del node[key]


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
                return [f"stream '{name}': record #{index} is {short_json(actual)}, expected {short_json(expected)}"]
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
            + "; ".join(short_json(r) for r in missing[:MAX_EXAMPLES])
        )
    if remaining and not options.extra_records:
        problems.append(
            f"stream '{name}': {len(remaining)} records read that are not expected (extra_records: false), e.g. "
            + "; ".join(short_json(r) for r in remaining[:MAX_EXAMPLES])
        )
    return problems


def check_no_extra_columns(read: ReadOutput, streams: Mapping[str, StreamInfo]) -> None:
    """No record has a top-level field its schema does not declare: the Spark table has no column for it."""
    problems = []
    for name, info in streams.items():
        properties = info.json_schema.get("properties")
        declared = set(properties) if isinstance(properties, Mapping) else set()
        extra: Counter = Counter()
        for record in read.records(name):
            for field_name in record:
                if field_name not in declared:
                    extra[f"/{field_name}"] += 1
        if extra:
            shown = ", ".join(f"{path} ({count} records)" for path, count in extra.most_common(MAX_EXAMPLES))
            problems.append(f"stream '{name}': fields not in the schema: {shown}")
    assert not problems, f"{read.describe()}:\n" + "\n".join(problems)


def check_identical_reads(
    first: ReadOutput, second: ReadOutput, streams: Sequence[str], ignored_fields: Mapping[str, Sequence[str]]
) -> None:
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
