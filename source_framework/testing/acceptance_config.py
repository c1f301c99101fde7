"""Read ``acceptance-test-config.yml`` as CAT reads it (both layouts), refusing what CAT refuses with the key named."""

from __future__ import annotations

import copy
import logging
import os
import re
from collections.abc import Mapping, Sequence
from contextlib import suppress
from dataclasses import dataclass, field
from typing import Any, get_args, get_origin

import yaml
from pydantic import BaseModel, ValidationError

from source_framework.testing import acceptance_schema as schema
from source_framework.testing.acceptance_schema import (
    CDK_SECTIONS,
    DEFAULT_CONFIG_PATH,
    MANDATORY_AT_HIGH,
    NOT_CHECKED,
    RUNNER_SECTIONS,
    cdk_entry_keys,
)

__all__ = [
    "CDK_SECTIONS", "DEFAULT_CONFIG_PATH", "DEFAULT_TIMEOUT_SECONDS", "MANDATORY_AT_HIGH", "NOT_CHECKED", "RUNNER_SECTIONS",
    "AcceptanceConfig", "AcceptanceConfigError", "Entry", "ExpectRecords", "IncrementalEntry", "ReadEntry",
    "cdk_entry_keys", "cdk_rejected_keys", "load_for_standard_suite", "migrate_legacy_layout",
]

logger = logging.getLogger(__name__)

#: CAT's default time limit per section; here it bounds each run of the connector.
DEFAULT_TIMEOUT_SECONDS: Mapping[str, int] = {"basic_read": 600, "full_refresh": 1200, "incremental": 1200}


class AcceptanceConfigError(ValueError):
    """The YAML file is missing, malformed, or misses what its strictness level requires."""


@dataclass(frozen=True)
class ExpectRecords:
    """``basic_read.expect_records``: a file of records the read must return, or why there is none."""

    path: str | None
    exact_order: bool = False
    extra_fields: bool = False
    extra_records: bool = True
    bypass_reason: str | None = None


@dataclass(frozen=True)
class ReadEntry:
    section: str
    config_path: str
    configured_catalog_path: str | None
    empty_streams: tuple[str, ...] = ()
    expect_records: ExpectRecords | None = None
    ignored_fields: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    fail_on_extra_columns: bool = True
    timeout_seconds: int = DEFAULT_TIMEOUT_SECONDS["basic_read"]
    skip_reason: str | None = None

    @property
    def id(self) -> str:
        return f"{self.section}:{os.path.basename(self.config_path)}"


@dataclass(frozen=True)
class IncrementalEntry:
    config_path: str
    configured_catalog_path: str | None
    future_state_path: str | None
    missing_streams: tuple[str, ...] = ()
    skip_comprehensive_incremental_tests: bool = False
    threshold_days: int = 0
    cursor_paths: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    timeout_seconds: int = DEFAULT_TIMEOUT_SECONDS["incremental"]
    future_state_bypass_reason: str | None = None
    skip_reason: str | None = None

    @property
    def id(self) -> str:
        return f"incremental:{os.path.basename(self.config_path)}"


Entry = ReadEntry | IncrementalEntry


@dataclass
class AcceptanceConfig:
    path: str
    root: str
    connector_image: str | None
    test_strictness_level: str
    basic_read: list[ReadEntry]
    full_refresh: list[ReadEntry]
    incremental: list[IncrementalEntry]
    raw: dict[str, Any]
    environment: dict[str, str] = field(default_factory=dict)
    #: How the file is read that a user should know: keys neither suite checks, and where this runner differs from CAT.
    notes: tuple[str, ...] = ()

    @classmethod
    def load(cls, path: str) -> AcceptanceConfig:
        path = os.path.abspath(path)
        raw = _read_current_layout(path)
        try:
            model = schema.AcceptanceTestConfig.model_validate(raw)
        except ValidationError as error:
            listed = _bullets(_problems(error))
            raise AcceptanceConfigError(f"'{path}' is not a valid acceptance test config:\n{listed}") from None
        root = os.path.dirname(path)
        base = _resolve(root, model.base_path) or root
        tests = model.acceptance_tests
        config = cls(
            path=path,
            root=root,
            connector_image=model.connector_image,
            test_strictness_level=model.test_strictness_level,
            basic_read=[_read_entry("basic_read", item, base) for item in tests.entries("basic_read")],
            full_refresh=[_read_entry("full_refresh", item, base) for item in tests.entries("full_refresh")],
            incremental=[_incremental_entry(item, base) for item in tests.entries("incremental")],
            raw=raw,
            environment={str(name): str(value) for name, value in (model.custom_environment_variables or {}).items() if value is not None},
            notes=_notes(model),
        )
        if config.high_strictness and (problems := model.problems_at_high()):
            raise AcceptanceConfigError(f"'{path}' (test_strictness_level: high):\n" + _bullets(problems))
        _log_notes_once(path, config.notes)
        return config

    @property
    def high_strictness(self) -> bool:
        return self.test_strictness_level == "high"

    def entries(self, section: str) -> list[Entry]:
        return list(getattr(self, section))

    def why_no_tests(self, section: str) -> str | None:
        body = self.raw["acceptance_tests"].get(section)
        if body is None:
            return f"no '{section}' section in {self.path}"
        if body.get("bypass_reason"):
            return f"'{section}' is bypassed: {body['bypass_reason']}"
        if not body.get("tests"):
            return f"'{section}' lists no tests in {self.path}"
        return None


def _resolve(root: str, value: str | None) -> str | None:
    if value is None:
        return None
    return value if os.path.isabs(value) else os.path.normpath(os.path.join(root, value))


def _names(items: Sequence[schema.Named] | None) -> tuple[str, ...]:
    return tuple(item.name for item in items or ())


def _read_entry(section: str, item: schema.BasicReadTest | schema.FullRefreshTest, base: str) -> ReadEntry:
    expect = getattr(item, "expect_records", None)
    return ReadEntry(
        section=section,
        config_path=str(_resolve(base, item.config_path or DEFAULT_CONFIG_PATH)),
        configured_catalog_path=_resolve(base, item.configured_catalog_path),
        empty_streams=_names(getattr(item, "empty_streams", None)),
        expect_records=None if expect is None else ExpectRecords(
            path=_resolve(base, expect.path),
            exact_order=expect.exact_order,
            extra_fields=expect.extra_fields,
            extra_records=expect.extra_records,
            bypass_reason=expect.bypass_reason or None,
        ),
        ignored_fields={stream: _names(fields) for stream, fields in (item.ignored_fields or {}).items()},
        fail_on_extra_columns=getattr(item, "fail_on_extra_columns", True),
        # CAT also takes a timeout of 0 for its default.
        timeout_seconds=item.timeout_seconds or DEFAULT_TIMEOUT_SECONDS[section],
        skip_reason=item.why_not_run(),
    )


def _incremental_entry(item: schema.IncrementalTest, base: str) -> IncrementalEntry:
    future = item.future_state or schema.FutureState()
    return IncrementalEntry(
        config_path=str(_resolve(base, item.config_path or DEFAULT_CONFIG_PATH)),
        configured_catalog_path=_resolve(base, item.configured_catalog_path),
        future_state_path=_resolve(base, future.future_state_path),
        missing_streams=_names(future.missing_streams),
        skip_comprehensive_incremental_tests=item.skip_comprehensive_incremental_tests,
        threshold_days=item.threshold_days,
        cursor_paths={stream: tuple(path) for stream, path in (item.cursor_paths or {}).items()},
        timeout_seconds=item.timeout_seconds or DEFAULT_TIMEOUT_SECONDS["incremental"],
        future_state_bypass_reason=future.bypass_reason or None,
        skip_reason=item.why_not_run(),
    )


def _problems(error: ValidationError) -> list[str]:
    """One line per refusal, each naming where in the file it is (``acceptance_tests.spec.tests[0]``)."""
    lines = []
    for detail in error.errors(include_url=False):
        where = _where(detail["loc"]) or "the file"
        lines += [f"{where}: {line}" for line in _what(detail).splitlines()]
    return lines


_MESSAGES = (
    ("missing", "is required"),
    ("bool", "should be true or false, not {value!r}"),
    ("int", "should be a whole number, 0 or more, not {value!r}"),
    ("greater_than", "should be a whole number, 0 or more, not {value!r}"),
    ("string", "should be text, not {kind}"),
    ("model", "should be a mapping of keys, not {kind}"),
    ("dict", "should be a mapping, not {kind}"),
    ("list", "should be a list, not {kind}"),
)


def _what(detail: Any) -> str:
    kind, value = detail["type"], detail.get("input")
    if kind == "extra_forbidden":
        accepted = ", ".join(sorted(_model_at(detail["loc"][:-1]).accepted_keys()))
        return f"not a key Airbyte's acceptance tests accept here (accepted: {accepted})"
    if kind == "value_error":
        return str(detail["ctx"]["error"])
    if kind == "model_type" and value is None:
        return "is empty"
    if kind == "literal_error":
        choices = ", ".join(re.findall(r"'([^']*)'", detail["ctx"]["expected"]))
        return f"should be one of {choices}, not {value!r}"
    for prefix, message in _MESSAGES:
        if kind.startswith(prefix):
            return message.format(value=value, kind=type(value).__name__)
    return str(detail["msg"])


def _where(loc: tuple[Any, ...]) -> str:
    return "".join(f"[{part}]" if isinstance(part, int) else f".{part}" for part in loc).lstrip(".")


def _model_in(annotation: Any) -> Any:
    if get_origin(annotation) is None and isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    return next(filter(None, map(_model_in, get_args(annotation))), None)


def _model_at(loc: tuple[Any, ...]) -> Any:
    model: Any = schema.AcceptanceTestConfig
    for part in loc:
        field = model.model_fields.get(part) if isinstance(part, str) else None
        model = (_model_in(field.annotation) if field else None) or model
    return model


def _notes(model: schema.AcceptanceTestConfig) -> tuple[str, ...]:
    notes = list(schema.notes(model))
    # CAT refuses a basic_read configured catalog at high; this runner reads it. Say so.
    if model.test_strictness_level == "high":
        for index, item in enumerate(model.acceptance_tests.entries("basic_read")):
            if item.configured_catalog_path:
                notes.append(
                    f"acceptance_tests.basic_read.tests[{index}].configured_catalog_path: read as given (at "
                    "test_strictness_level high, Airbyte's CAT refuses it and reads every discovered stream "
                    "but the empty_streams)"
                )
    return tuple(notes)


_reported: set[str] = set()


def _log_notes_once(path: str, notes: Sequence[str]) -> None:
    if not notes or path in _reported:
        return
    _reported.add(path)
    logger.warning("%s, as read here:\n%s", path, _bullets(notes))


def _bullets(lines: Sequence[str]) -> str:
    return "\n".join(f"- {line}" for line in lines)


def _read_yaml(path: str) -> Any:
    if not os.path.isfile(path):
        raise AcceptanceConfigError(f"acceptance test config '{path}' does not exist")
    try:
        with open(path, encoding="utf-8") as handle:
            return yaml.safe_load(handle)
    except yaml.YAMLError as error:
        raise AcceptanceConfigError(f"'{path}' is not valid YAML: {error}") from None


def _read_current_layout(path: str) -> dict[str, Any]:
    raw = _read_yaml(path)
    if not isinstance(raw, dict) or not ("acceptance_tests" in raw or "tests" in raw):
        raise AcceptanceConfigError(f"'{path}' has no 'acceptance_tests' section")
    if "tests" not in raw:
        return raw
    if "acceptance_tests" in raw:
        raise AcceptanceConfigError(
            f"'{path}' has both 'acceptance_tests' and the legacy top-level 'tests'; keep one "
            "(Airbyte's acceptance tests would read 'tests' and drop 'acceptance_tests')"
        )
    if not isinstance(raw["tests"], dict):
        raise AcceptanceConfigError(f"'{path}': the legacy 'tests' should map section names to lists of tests")
    logger.warning("%s is in Airbyte's legacy layout (top-level 'tests:'); read as 'acceptance_tests:'", path)
    return migrate_legacy_layout(raw)


def migrate_legacy_layout(raw: Mapping[str, Any]) -> dict[str, Any]:
    """CAT's pre-v0.2.12 migration: ``tests: {section: [...]}`` becomes ``acceptance_tests: {section: {tests: [...]}}``."""
    migrated = {key: copy.deepcopy(value) for key, value in raw.items() if key != "tests"}
    migrated["acceptance_tests"] = {name: {"tests": copy.deepcopy(tests)} for name, tests in raw["tests"].items()}
    for test in migrated["acceptance_tests"].get("incremental", {}).get("tests") or []:
        if isinstance(test, dict) and "future_state_path" in test:
            test["future_state"] = {"future_state_path": test.pop("future_state_path")}
    return migrated


def load_for_standard_suite(path: str) -> dict[str, Any]:
    """The file for airbyte-cdk's suite: CAT keys it refuses removed (we read them), bypassed entries left out."""
    path = os.path.abspath(path)
    raw = _read_current_layout(path)
    with suppress(ValidationError):  # notes only: a file CAT refuses is refused by AcceptanceConfig.load
        _log_notes_once(path, _notes(schema.AcceptanceTestConfig.model_validate(raw)))
    tests = raw.get("acceptance_tests")
    if not isinstance(tests, dict):
        return raw
    base = _resolve(os.path.dirname(path), str(raw["base_path"])) if raw.get("base_path") else None
    for section in CDK_SECTIONS:
        _shape_section_for_cdk(tests, section, base)
    return raw


def _shape_section_for_cdk(tests: dict[str, Any], section: str, base: str | None) -> None:
    body = tests.get(section)
    if not isinstance(body, dict):
        tests.pop(section, None)  # the CDK cannot read a null section
        return
    if body.get("tests") is None:
        body.pop("tests", None)
        return
    if not isinstance(body["tests"], list):
        return
    body["tests"] = [item for item in body["tests"] if not (isinstance(item, dict) and item.get("bypass_reason"))]
    for item in body["tests"]:
        if isinstance(item, dict):
            _shape_entry_for_cdk(section, item, base)


def cdk_rejected_keys(section: str) -> frozenset[str]:
    return frozenset(schema.ENTRY_MODELS[section].model_fields) - cdk_entry_keys(section)


def _shape_entry_for_cdk(section: str, item: dict[str, Any], base: str | None) -> None:
    for key in cdk_rejected_keys(section) & set(item):
        del item[key]
    if isinstance(item.get("empty_streams"), list):
        item["empty_streams"] = [schema.name_as_item(stream) for stream in item["empty_streams"]]
    if base:
        for key in ("config_path", "configured_catalog_path"):
            if item.get(key) is not None:
                item[key] = _resolve(base, str(item[key]))
