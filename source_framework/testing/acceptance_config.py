"""Read ``acceptance-test-config.yml`` (Airbyte's connector-acceptance-test format).

Only the parts the source_framework runner checks are modelled; airbyte-cdk's standard suite
reads the rest (``spec``, ``connection``, ``discovery``). Paths in the file are relative to the
folder that holds it (the connector root), as in Airbyte's tools.

::

    config = AcceptanceConfig.load("acceptance-test-config.yml")
    for entry in config.incremental:
        entry.config_path, entry.configured_catalog_path, entry.future_state_path

The keys this runner reads, per section (everything else is left to airbyte-cdk's suite):

- ``basic_read``: ``config_path``, ``configured_catalog_path``, ``empty_streams``,
  ``expect_records`` (``path``, ``exact_order``, ``extra_fields``, ``extra_records``),
  ``ignored_fields``, ``fail_on_extra_columns``, ``timeout_seconds``;
- ``full_refresh``: ``config_path``, ``configured_catalog_path``, ``ignored_fields``,
  ``timeout_seconds``;
- ``incremental``: ``config_path``, ``configured_catalog_path``, ``future_state``
  (``future_state_path``, ``missing_streams``), ``skip_comprehensive_incremental_tests``,
  ``timeout_seconds``.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any, Dict, List, Mapping, Optional, Tuple

import yaml

#: Keys of the sections airbyte-cdk's standard suite collects that this runner checks instead.
#: The standard suite rejects them (it no longer runs those checks), so they are removed from
#: the copy of the file it is given; see ``standard_suite.py``.
RUNNER_KEYS: Mapping[str, Tuple[str, ...]] = {
    "basic_read": ("expect_records", "ignored_fields", "fail_on_extra_columns", "timeout_seconds"),
    "full_refresh": ("ignored_fields", "timeout_seconds"),
}

DEFAULT_TIMEOUT_SECONDS = 600


class AcceptanceConfigError(ValueError):
    """The YAML file is missing, malformed, or misses what its strictness level requires."""


@dataclass(frozen=True)
class ExpectRecords:
    path: str
    exact_order: bool = False
    extra_fields: bool = False
    extra_records: bool = True


@dataclass(frozen=True)
class ReadEntry:
    """One ``basic_read`` or ``full_refresh`` test."""

    section: str
    config_path: str
    configured_catalog_path: Optional[str]
    empty_streams: Tuple[str, ...] = ()
    expect_records: Optional[ExpectRecords] = None
    ignored_fields: Mapping[str, Tuple[str, ...]] = field(default_factory=dict)
    fail_on_extra_columns: bool = True
    timeout_seconds: int = DEFAULT_TIMEOUT_SECONDS

    @property
    def id(self) -> str:
        return f"{self.section}:{os.path.basename(self.config_path)}"


@dataclass(frozen=True)
class IncrementalEntry:
    """One ``incremental`` test."""

    config_path: str
    configured_catalog_path: str
    future_state_path: Optional[str]
    missing_streams: Tuple[str, ...] = ()
    skip_comprehensive_incremental_tests: bool = False
    timeout_seconds: int = DEFAULT_TIMEOUT_SECONDS

    @property
    def id(self) -> str:
        return f"incremental:{os.path.basename(self.config_path)}"


@dataclass
class AcceptanceConfig:
    """The parsed file: its folder (``root``), strictness, and the read sections."""

    path: str
    root: str
    connector_image: Optional[str]
    test_strictness_level: str
    basic_read: List[ReadEntry]
    full_refresh: List[ReadEntry]
    incremental: List[IncrementalEntry]
    raw: Dict[str, Any]

    @classmethod
    def load(cls, path: str) -> "AcceptanceConfig":
        path = os.path.abspath(path)
        if not os.path.isfile(path):
            raise AcceptanceConfigError(f"acceptance test config '{path}' does not exist")
        with open(path, encoding="utf-8") as handle:
            raw = yaml.safe_load(handle)
        if not isinstance(raw, dict) or not isinstance(raw.get("acceptance_tests"), dict):
            raise AcceptanceConfigError(f"'{path}' has no 'acceptance_tests' section")
        root = os.path.dirname(path)
        tests = raw["acceptance_tests"]
        config = cls(
            path=path,
            root=root,
            connector_image=raw.get("connector_image"),
            test_strictness_level=str(raw.get("test_strictness_level", "low")),
            basic_read=[_read_entry("basic_read", item, root) for item in _entries(tests, "basic_read")],
            full_refresh=[_read_entry("full_refresh", item, root) for item in _entries(tests, "full_refresh")],
            incremental=[_incremental_entry(item, root) for item in _entries(tests, "incremental")],
            raw=raw,
        )
        config._check_strictness(tests)
        return config

    @property
    def high_strictness(self) -> bool:
        return self.test_strictness_level == "high"

    def _check_strictness(self, tests: Mapping[str, Any]) -> None:
        """At ``high``, Airbyte requires every section, and expected records for basic_read."""
        if not self.high_strictness:
            return
        problems = []
        for section in ("spec", "connection", "discovery", "basic_read", "full_refresh", "incremental"):
            if section not in tests:
                problems.append(f"section '{section}' is missing")
            elif not _entries(tests, section) and not (tests[section] or {}).get("bypass_reason"):
                problems.append(f"section '{section}' has no tests and no bypass_reason")
        for entry in self.basic_read:
            if entry.expect_records is None:
                problems.append(f"basic_read test for '{entry.config_path}' has no expect_records")
        for inc in self.incremental:
            if inc.future_state_path is None:
                problems.append(f"incremental test for '{inc.config_path}' has no future_state.future_state_path")
        if problems:
            raise AcceptanceConfigError(
                f"'{self.path}' (test_strictness_level: high): " + "; ".join(problems)
            )


def _entries(tests: Mapping[str, Any], section: str) -> List[Mapping[str, Any]]:
    body = tests.get(section) or {}
    return [item for item in (body.get("tests") or []) if isinstance(item, dict)]


def _resolve(root: str, value: Optional[str]) -> Optional[str]:
    if value is None:
        return None
    return value if os.path.isabs(value) else os.path.normpath(os.path.join(root, value))


def _require(item: Mapping[str, Any], key: str, section: str) -> Any:
    if key not in item:
        raise AcceptanceConfigError(f"a '{section}' test has no '{key}'")
    return item[key]


def _stream_names(items: Any) -> Tuple[str, ...]:
    names = []
    for item in items or []:
        names.append(item["name"] if isinstance(item, dict) else str(item))
    return tuple(names)


def _ignored_fields(raw: Any) -> Dict[str, Tuple[str, ...]]:
    """``{stream: [{"name": "a/b", "bypass_reason": ...} | "a/b", ...]}`` → ``{stream: ("a/b",)}``."""
    result: Dict[str, Tuple[str, ...]] = {}
    for stream, fields in (raw or {}).items():
        result[stream] = tuple(f["name"] if isinstance(f, dict) else str(f) for f in fields or [])
    return result


def _read_entry(section: str, item: Mapping[str, Any], root: str) -> ReadEntry:
    expect = item.get("expect_records")
    return ReadEntry(
        section=section,
        config_path=str(_resolve(root, _require(item, "config_path", section))),
        configured_catalog_path=_resolve(root, item.get("configured_catalog_path")),
        empty_streams=_stream_names(item.get("empty_streams")),
        expect_records=(
            ExpectRecords(
                path=str(_resolve(root, _require(expect, "path", f"{section}.expect_records"))),
                exact_order=bool(expect.get("exact_order", False)),
                extra_fields=bool(expect.get("extra_fields", False)),
                extra_records=bool(expect.get("extra_records", True)),
            )
            if isinstance(expect, dict)
            else None
        ),
        ignored_fields=_ignored_fields(item.get("ignored_fields")),
        fail_on_extra_columns=bool(item.get("fail_on_extra_columns", True)),
        timeout_seconds=int(item.get("timeout_seconds", DEFAULT_TIMEOUT_SECONDS)),
    )


def _incremental_entry(item: Mapping[str, Any], root: str) -> IncrementalEntry:
    future = item.get("future_state") or {}
    if "future_state_path" in item and not future:  # the older, flat spelling
        future = {"future_state_path": item["future_state_path"]}
    return IncrementalEntry(
        config_path=str(_resolve(root, _require(item, "config_path", "incremental"))),
        configured_catalog_path=str(_resolve(root, _require(item, "configured_catalog_path", "incremental"))),
        future_state_path=_resolve(root, future.get("future_state_path")),
        missing_streams=_stream_names(future.get("missing_streams")),
        skip_comprehensive_incremental_tests=bool(item.get("skip_comprehensive_incremental_tests", False)),
        timeout_seconds=int(item.get("timeout_seconds", DEFAULT_TIMEOUT_SECONDS)),
    )


def load_for_standard_suite(path: str) -> Dict[str, Any]:
    """The file's content for airbyte-cdk's standard suite: without the keys this runner checks.

    airbyte-cdk rejects ``expect_records`` and friends because it no longer runs those checks;
    this runner does, so they stay in the one file and are only hidden from the CDK's suite.
    """
    with open(path, encoding="utf-8") as handle:
        raw = yaml.safe_load(handle) or {}
    tests = raw.get("acceptance_tests") or {}
    for section, keys in RUNNER_KEYS.items():
        for item in _entries(tests, section):
            for key in keys:
                item.pop(key, None)  # type: ignore[attr-defined]
    return raw
