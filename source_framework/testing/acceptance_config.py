"""Read ``acceptance-test-config.yml`` as Airbyte's connector acceptance tests (CAT) read it.

One file, two readers. airbyte-cdk's standard suite runs ``spec``, ``connection``,
``discovery`` and a plain full-refresh read for the configs of ``basic_read`` and
``full_refresh``; this package's runner runs the rest of ``basic_read`` and ``full_refresh``
and the whole ``incremental`` section. This module is the runner's reader, and it also hands
the CDK's suite its copy of the file (``load_for_standard_suite``).

::

    config = AcceptanceConfig.load("acceptance-test-config.yml")
    for entry in config.incremental:
        entry.config_path, entry.configured_catalog_path, entry.future_state_path
    config.why_no_tests("incremental")     # a section's bypass_reason, or why it runs nothing

What is accepted is what CAT's configuration schema accepts, over its releases (its models:
``connector_acceptance_test/config.py`` in airbytehq/airbyte); the tables ``_TOP``,
``_ACCEPTANCE_TESTS`` and ``_ENTRY_KEYS`` below spell it out, key by key. An entry may also set
``bypass_reason`` (it then runs nothing, and says why), and an entry of a section the CDK's
suite collects may set whatever that suite accepts there. Anything else is refused, with the
file and the key named. Both of CAT's layouts are read: ``acceptance_tests:`` and the legacy
top-level ``tests:``, which CAT still migrates.

Each accepted key is either checked (by this runner, or by the CDK's suite), or accepted and
not checked: those with a note in the tables are logged once per file as "not checked by this
runner" (``AcceptanceConfig.notes``), because a user who sets them expects something to happen.
Paths are relative to the file's folder, or to ``base_path`` when the file sets one, as in CAT.

``test_strictness_level: high`` adds CAT's rules (``_strictness_problems``): every section is
declared, with tests or a ``bypass_reason``; each ``basic_read`` test has ``expect_records``
(a ``path`` or a ``bypass_reason``); each ``incremental`` test has a ``future_state`` (a
``future_state_path`` or a ``bypass_reason``); every ``empty_streams``, ``ignored_fields`` and
``missing_streams`` item gives a ``bypass_reason``.
"""

from __future__ import annotations

import copy
import functools
import logging
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import yaml

logger = logging.getLogger(__name__)

#: The sections of CAT's test suite this runner runs tests for.
RUNNER_SECTIONS: tuple[str, ...] = ("basic_read", "full_refresh", "incremental")
#: The sections airbyte-cdk's standard suite collects configs from.
CDK_SECTIONS: tuple[str, ...] = ("spec", "connection", "discovery", "basic_read", "full_refresh")
#: The sections CAT fails without at ``test_strictness_level: high`` (its other sections,
#: ``connector_attributes`` and ``connector_documentation``, are optional at every level).
MANDATORY_AT_HIGH: tuple[str, ...] = ("spec", "connection", "discovery", "basic_read", "full_refresh", "incremental")

#: CAT's default ``config_path`` of every test.
DEFAULT_CONFIG_PATH = "secrets/config.json"
#: CAT's default time limit per section (``default_timeout`` of its test classes), used when a
#: test sets no ``timeout_seconds`` (or 0). Here it bounds each run of the connector.
DEFAULT_TIMEOUT_SECONDS: Mapping[str, int] = {"basic_read": 600, "full_refresh": 1200, "incremental": 1200}

_CDK_SUITE = "airbyte-cdk's standard suite"
#: How a key that nothing here acts on is reported.
NOT_CHECKED = f"not checked by this runner (nor by {_CDK_SUITE})"


class AcceptanceConfigError(ValueError):
    """The YAML file is missing, malformed, or misses what its strictness level requires."""


# --- what the runner reads --------------------------------------------------------------------


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
    """One ``basic_read`` or ``full_refresh`` test."""

    section: str
    config_path: str
    configured_catalog_path: str | None
    empty_streams: tuple[str, ...] = ()
    expect_records: ExpectRecords | None = None
    ignored_fields: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    fail_on_extra_columns: bool = True
    timeout_seconds: int = DEFAULT_TIMEOUT_SECONDS["basic_read"]
    skip_reason: str | None = None  # why this runner runs nothing for it (its bypass_reason, ...)

    @property
    def id(self) -> str:
        return f"{self.section}:{os.path.basename(self.config_path)}"


@dataclass(frozen=True)
class IncrementalEntry:
    """One ``incremental`` test."""

    config_path: str
    configured_catalog_path: str | None
    future_state_path: str | None
    missing_streams: tuple[str, ...] = ()
    skip_comprehensive_incremental_tests: bool = False
    threshold_days: int = 0  # how far before its state's cursor a record read back may be
    cursor_paths: Mapping[str, tuple[str, ...]] = field(default_factory=dict)  # where each stream's cursor is in its state
    timeout_seconds: int = DEFAULT_TIMEOUT_SECONDS["incremental"]
    future_state_bypass_reason: str | None = None
    skip_reason: str | None = None

    @property
    def id(self) -> str:
        return f"incremental:{os.path.basename(self.config_path)}"


Entry = ReadEntry | IncrementalEntry


@dataclass
class AcceptanceConfig:
    """The parsed file: its folder (``root``), strictness, and the sections this runner runs."""

    path: str
    root: str
    connector_image: str | None
    test_strictness_level: str
    basic_read: list[ReadEntry]
    full_refresh: list[ReadEntry]
    incremental: list[IncrementalEntry]
    raw: dict[str, Any]
    #: ``custom_environment_variables``: set for every run of the connector, as CAT does.
    environment: dict[str, str] = field(default_factory=dict)
    #: What a user should know about how the file is read: the keys it sets that neither suite
    #: checks, and where this runner reads it differently from CAT (logged once per file).
    notes: tuple[str, ...] = ()

    @classmethod
    def load(cls, path: str) -> AcceptanceConfig:
        path = os.path.abspath(path)
        raw = _read_current_layout(path)
        reading = _inspect(raw)
        if reading.problems:
            listed = _bullets(reading.problems)
            raise AcceptanceConfigError(f"'{path}' is not a valid acceptance test config:\n{listed}")
        root = os.path.dirname(path)
        base = _resolve(root, raw.get("base_path")) or root
        tests = raw["acceptance_tests"]
        config = cls(
            path=path,
            root=root,
            connector_image=raw.get("connector_image"),
            test_strictness_level=str(raw.get("test_strictness_level") or "low"),
            basic_read=[_read_entry("basic_read", item, base) for item in _entries(tests, "basic_read")],
            full_refresh=[_read_entry("full_refresh", item, base) for item in _entries(tests, "full_refresh")],
            incremental=[_incremental_entry(item, base) for item in _entries(tests, "incremental")],
            raw=raw,
            environment=_environment(raw.get("custom_environment_variables")),
            notes=tuple(reading.notes),
        )
        if config.high_strictness:
            problems = _strictness_problems(tests)
            if problems:
                raise AcceptanceConfigError(f"'{path}' (test_strictness_level: high):\n" + _bullets(problems))
        _log_notes_once(path, config.notes)
        return config

    @property
    def high_strictness(self) -> bool:
        return self.test_strictness_level == "high"

    def entries(self, section: str) -> list[Entry]:
        return list(getattr(self, section))

    def why_no_tests(self, section: str) -> str | None:
        """Why ``section`` runs nothing here (its bypass_reason, absence, no tests), or None."""
        body = self.raw["acceptance_tests"].get(section)
        if body is None:
            return f"no '{section}' section in {self.path}"
        if body.get("bypass_reason"):
            return f"'{section}' is bypassed: {body['bypass_reason']}"
        if not body.get("tests"):
            return f"'{section}' lists no tests in {self.path}"
        return None


# --- CAT's schema, as tables --------------------------------------------------------------------
#
# A value is checked by a function that returns what is wrong with it (or None), or it is an
# object (``Obj``), a list of them (``ListOf``) or a list of them per stream (``PerStream``).
# ``None`` (YAML ``null``) is "not set" everywhere, as for CAT's optional fields.

Check = Callable[[Any], str | None]


def _as_bool(value: Any) -> bool | None:
    """YAML's and pydantic's spellings of a boolean (CAT's models coerce strings and 0/1)."""
    if isinstance(value, bool):
        return value
    if isinstance(value, int) and value in (0, 1):
        return bool(value)
    if isinstance(value, str) and value.strip().lower() in ("true", "yes", "on", "1", "false", "no", "off", "0"):
        return value.strip().lower() in ("true", "yes", "on", "1")
    return None


def _as_int(value: Any) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, str) and value.strip().isdigit():
        return int(value)
    return None


def _text(value: Any) -> str | None:
    ok = isinstance(value, (str, int, float)) and not isinstance(value, bool)
    return None if ok else f"should be text, not {type(value).__name__}"


def _flag(value: Any) -> str | None:
    return None if _as_bool(value) is not None else f"should be true or false, not {value!r}"


def _count(value: Any) -> str | None:
    number = _as_int(value)
    return None if number is not None and number >= 0 else f"should be a whole number, 0 or more, not {value!r}"


def _one_of(*choices: str) -> Check:
    def check(value: Any) -> str | None:
        return None if value in choices else f"should be one of {', '.join(choices)}, not {value!r}"

    return check


def _words(value: Any) -> str | None:
    ok = isinstance(value, list) and all(_text(word) is None for word in value)
    return None if ok else "should be a list of strings (a command)"


def _mapping(value: Any) -> str | None:
    return None if isinstance(value, dict) else "should be a mapping"


def _cursor_paths(value: Any) -> str | None:
    ok = isinstance(value, dict) and all(
        isinstance(path, list) and path and all(_text(part) is None for part in path) for path in value.values()
    )
    return None if ok else "should map each stream to the path of its cursor in the state, e.g. {users: [updated_at]}"


def _file_extension(value: Any) -> str | None:
    ok = isinstance(value, str) and value.startswith(".") and len(value) >= 2
    return None if ok else f"should be a file extension such as '.csv', not {value!r}"


Rule = Callable[[Mapping[str, Any]], list[str]]


@dataclass(frozen=True)
class Obj:
    """An object: its keys, the ones it cannot do without, and rules between its keys."""

    keys: Mapping[str, Key]
    required: tuple[str, ...] = ()
    rules: tuple[Rule, ...] = ()
    #: More keys accepted without a check of their own (those airbyte-cdk's suite reads there).
    also_accepted: Callable[[], frozenset[str]] = frozenset


@dataclass(frozen=True)
class ListOf:
    """A list of ``item``; with ``names``, an item may also be a plain stream or field name
    (older CAT releases, and the legacy layout, wrote them so)."""

    item: Check | Obj
    names: bool = False


@dataclass(frozen=True)
class PerStream:
    """``{stream: [item, ...]}`` (``ignored_fields``)."""

    items: ListOf


@dataclass(frozen=True)
class Key:
    """A key CAT accepts, what its value must be, and (``unchecked``) why nothing here acts on
    it when that is worth telling the user (only when ``unchecked_when(value)``)."""

    value: Check | Obj | ListOf | PerStream
    unchecked: str | None = None
    unchecked_when: Callable[[Any], bool] = lambda value: True


def _is_true(value: Any) -> bool:
    return _as_bool(value) is True


def _is_false(value: Any) -> bool:
    return _as_bool(value) is False


def _path_or_bypass_reason(expect: Mapping[str, Any]) -> list[str]:
    if expect.get("path") and expect.get("bypass_reason"):
        return ["set 'path' or 'bypass_reason', not both"]
    if not expect.get("path") and not expect.get("bypass_reason"):
        return ["needs a 'path' (the expected records) or a 'bypass_reason'"]
    return []


def _extra_fields_needs_exact_order(expect: Mapping[str, Any]) -> list[str]:
    """CAT's releases that had ``extra_fields`` only allowed it with exact order and no extra records."""
    if not _is_true(expect.get("extra_fields")):
        return []
    problems = []
    if not _is_true(expect.get("exact_order")):
        problems.append("'extra_fields: true' needs 'exact_order: true'")
    if _as_bool(expect.get("extra_records", True)) is not False:
        problems.append("'extra_fields: true' needs 'extra_records: false'")
    return problems


def _file_types_rules(file_types: Mapping[str, Any]) -> list[str]:
    skip = _is_true(file_types.get("skip_test"))
    if skip and file_types.get("unsupported_types"):
        return ["'unsupported_types' cannot be set when 'skip_test' is true"]
    if not skip and file_types.get("bypass_reason") is not None:
        return ["'bypass_reason' can only be set when 'skip_test' is true"]
    return []


def _oauth_off_needs_reason(auth: Mapping[str, Any]) -> list[str]:
    if _is_false(auth.get("oauth", True)) and not auth.get("bypass_reason"):
        return ["'oauth: false' needs a 'bypass_reason'"]
    return []


def _tests_or_bypass_reason(section: Mapping[str, Any]) -> list[str]:
    if section.get("tests") and section.get("bypass_reason"):
        return ["set 'tests' or 'bypass_reason', not both"]
    if section.get("tests") is None and not section.get("bypass_reason"):
        return ["needs 'tests' or a 'bypass_reason'"]
    return []


_NAMED = Obj({"name": Key(_text), "bypass_reason": Key(_text)}, required=("name",))
_BYPASS_ONLY = Obj({"bypass_reason": Key(_text)})
_TIMEOUT = Key(_count)
_UNTIMED = Key(_count, unchecked="neither suite limits the time of spec, check or discover runs")
_DEPLOYMENT_MODE = Key(
    _one_of("cloud", "oss"), unchecked="the connector runs as it is; no cloud or OSS deployment mode is set"
)
_BACKWARD_COMPATIBILITY = Obj({"previous_connector_version": Key(_text), "disable_for_version": Key(_text)})
_CLIENT_CONTAINER = Obj(
    {
        "secrets_path": Key(_text),
        "client_container_dockerfile_path": Key(_text),
        "setup_command": Key(_words),
        "teardown_command": Key(_words),
        "between_syncs_command": Key(_words),
        "final_teardown_command": Key(_words),
    }
)
_NO_CLIENT_CONTAINER = Key(_CLIENT_CONTAINER, unchecked="no setup or teardown container is run")
_EMPTY_STREAMS = Key(ListOf(_NAMED, names=True))
_IGNORED_FIELDS = Key(PerStream(ListOf(_NAMED, names=True)))
_BYPASS_REASON = Key(_text)  # on an entry: the entry runs nothing, for that reason
_EXPECT_RECORDS = Obj(
    {
        "path": Key(_text),
        "bypass_reason": Key(_text),
        "exact_order": Key(_flag),
        "extra_fields": Key(_flag),
        "extra_records": Key(_flag),
    },
    rules=(_path_or_bypass_reason, _extra_fields_needs_exact_order),
)
_FILE_TYPES = Obj(
    {
        "bypass_reason": Key(_text),
        "skip_test": Key(_flag),
        "unsupported_types": Key(
            ListOf(Obj({"extension": Key(_file_extension), "bypass_reason": Key(_text)}, required=("extension",)))
        ),
    },
    rules=(_file_types_rules,),
)
_CURSOR_FORMAT = Obj(
    {
        "format": Key(_text),
        "streams": Key(ListOf(Obj({"name": Key(_text), "format": Key(_text)}, required=("name",)))),
    }
)
_FUTURE_STATE = Obj(
    {
        "future_state_path": Key(_text),
        "missing_streams": Key(ListOf(_NAMED, names=True)),
        "bypass_reason": Key(_text),
        "cursor_format": Key(_CURSOR_FORMAT, unchecked="the future state's cursor values are not format-checked"),
    }
)


def _validation_flag(what: str) -> Key:
    """A ``validate_*`` flag of a check neither suite runs: worth a note only when it asks for it."""
    return Key(_flag, unchecked=f"CAT's check of {what}", unchecked_when=_is_true)


#: The keys of an entry (one test) of each section.
_ENTRY_KEYS: Mapping[str, Mapping[str, Key]] = {
    "spec": {
        "spec_path": Key(
            _text, unchecked=f"the connector's spec is not compared with this file; {_CDK_SUITE} lints its own"
        ),
        "config_path": Key(_text),
        "timeout_seconds": _UNTIMED,
        "deployment_mode": _DEPLOYMENT_MODE,
        "backward_compatibility_tests_config": Key(_BACKWARD_COMPATIBILITY),
        "auth_default_method": Key(
            Obj({"oauth": Key(_flag), "bypass_reason": Key(_text)}, rules=(_oauth_off_needs_reason,)),
            unchecked="the OAuth default-method check is not run",
        ),
        "bypass_reason": _BYPASS_REASON,
    },
    "connection": {
        "config_path": Key(_text),
        "status": Key(_one_of("succeed", "failed", "exception")),
        "timeout_seconds": _UNTIMED,
        "deployment_mode": _DEPLOYMENT_MODE,
        "bypass_reason": _BYPASS_REASON,
    },
    "discovery": {
        "config_path": Key(_text),
        "timeout_seconds": _UNTIMED,
        "deployment_mode": _DEPLOYMENT_MODE,
        "backward_compatibility_tests_config": Key(
            _BACKWARD_COMPATIBILITY, unchecked="the discovered catalog is not compared with the previous version's"
        ),
        "validate_primary_keys_data_type": _validation_flag("primary key types in the catalog"),
        "bypass_reason": _BYPASS_REASON,
    },
    "basic_read": {
        "config_path": Key(_text),
        "configured_catalog_path": Key(_text),
        "empty_streams": _EMPTY_STREAMS,
        "expect_records": Key(_EXPECT_RECORDS),
        "validate_schema": Key(_flag),
        "fail_on_extra_columns": Key(_flag),
        "timeout_seconds": _TIMEOUT,
        "ignored_fields": _IGNORED_FIELDS,  # CAT releases before it moved to full_refresh only
        "validate_stream_statuses": _validation_flag("stream statuses (STARTED, RUNNING, COMPLETE)"),
        "validate_state_messages": _validation_flag("the STATE messages of the basic read"),
        "validate_primary_keys_data_type": _validation_flag("primary key values"),
        "validate_data_points": _validation_flag("fields that are never filled"),
        "expect_trace_message_on_failure": Key(
            _flag,
            unchecked=f"{_CDK_SUITE} runs its bad-catalog read (test_fail_read_with_bad_catalog) whatever it says",
            unchecked_when=_is_false,
        ),
        "file_types": Key(_FILE_TYPES, unchecked="the file-type check of certified file-based connectors is not run"),
        "client_container_config": _NO_CLIENT_CONTAINER,
        "deployment_mode": _DEPLOYMENT_MODE,
        "bypass_reason": _BYPASS_REASON,
    },
    "full_refresh": {
        "config_path": Key(_text),
        "configured_catalog_path": Key(_text),
        "timeout_seconds": _TIMEOUT,
        "ignored_fields": _IGNORED_FIELDS,
        "client_container_config": _NO_CLIENT_CONTAINER,
        "deployment_mode": _DEPLOYMENT_MODE,
        "bypass_reason": _BYPASS_REASON,
    },
    "incremental": {
        "config_path": Key(_text),
        "configured_catalog_path": Key(_text),
        "future_state": Key(_FUTURE_STATE),
        "timeout_seconds": _TIMEOUT,
        "skip_comprehensive_incremental_tests": Key(_flag),
        "cursor_paths": Key(_cursor_paths),
        "threshold_days": Key(_count),
        "client_container_config": _NO_CLIENT_CONTAINER,
        "deployment_mode": _DEPLOYMENT_MODE,
        "bypass_reason": _BYPASS_REASON,
    },
    "connector_attributes": {
        "config_path": Key(_text),
        "timeout_seconds": Key(_count),
        "streams_without_primary_key": Key(ListOf(_NAMED)),
        "allowed_hosts": Key(_BYPASS_ONLY),
        "suggested_streams": Key(_BYPASS_ONLY),
    },
    "connector_documentation": {"config_path": Key(_text), "timeout_seconds": Key(_count)},
}


@functools.cache
def cdk_entry_keys(section: str) -> frozenset[str]:
    """The keys airbyte-cdk's standard suite accepts in an entry of ``section``.

    Read from the installed CDK (its scenario model, less the fields it fills in itself, plus the
    CAT keys it still accepts in that section), so a CDK upgrade moves this with it. Empty for a
    section the CDK does not collect.
    """
    if section not in CDK_SECTIONS:
        return frozenset()
    from airbyte_cdk.test.models import scenario

    keys = set(scenario.ConnectorTestScenario.model_fields)
    keys -= set(getattr(scenario, "POPULATED_FIELDS", {}))
    keys |= set(getattr(scenario, "LEGACY_ENTRY_KEYS", {}).get(section, ()))
    return frozenset(keys)


def _section(name: str, unchecked: str | None = None) -> Key:
    entry = Obj(_ENTRY_KEYS[name], also_accepted=functools.partial(cdk_entry_keys, name))
    body = Obj({"tests": Key(ListOf(entry)), "bypass_reason": Key(_text)}, rules=(_tests_or_bypass_reason,))
    return Key(body, unchecked=unchecked)


_ACCEPTANCE_TESTS = Obj(
    {
        **{name: _section(name) for name in MANDATORY_AT_HIGH},
        "connector_attributes": _section(
            "connector_attributes", unchecked="Airbyte's checks of primary keys and metadata are not run"
        ),
        "connector_documentation": _section(
            "connector_documentation", unchecked="Airbyte's documentation checks are not run"
        ),
        "client_container_config": _NO_CLIENT_CONTAINER,
    }
)

_TOP = Obj(
    {
        "connector_image": Key(_text),
        "acceptance_tests": Key(_ACCEPTANCE_TESTS),
        "base_path": Key(_text),
        "test_strictness_level": Key(_one_of("high", "low")),
        "custom_environment_variables": Key(_mapping),
        "cache_discovered_catalog": Key(_flag),
    },
    required=("acceptance_tests",),
)


# --- checking a file against the tables --------------------------------------------------------


@dataclass
class _Reading:
    """What walking the file found: what CAT refuses, and what to tell the user (``notes``)."""

    problems: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


def _inspect(raw: Mapping[str, Any]) -> _Reading:
    reading = _Reading()
    _walk_object(raw, _TOP, "", reading)
    _note_catalog_at_high(raw, reading)
    return reading


def _where(parent: str, key: Any) -> str:
    return f"{parent}.{key}" if parent else str(key)


def _walk(value: Any, shape: Check | Obj | ListOf | PerStream, where: str, reading: _Reading) -> None:
    if value is None:
        return
    if isinstance(shape, Obj):
        _walk_object(value, shape, where, reading)
    elif isinstance(shape, ListOf):
        _walk_list(value, shape, where, reading)
    elif isinstance(shape, PerStream):
        if not isinstance(value, dict):
            reading.problems.append(f"{where}: should be a mapping of stream names to lists")
            return
        for stream, items in value.items():
            _walk(items, shape.items, _where(where, stream), reading)
    else:
        problem = shape(value)
        if problem:
            reading.problems.append(f"{where}: {problem}")


def _walk_list(value: Any, shape: ListOf, where: str, reading: _Reading) -> None:
    if not isinstance(value, list):
        reading.problems.append(f"{where}: should be a list")
        return
    for index, item in enumerate(value):
        if shape.names and isinstance(item, str):
            continue
        if item is None:
            reading.problems.append(f"{where}[{index}]: is empty")
            continue
        _walk(item, shape.item, f"{where}[{index}]", reading)


def _walk_object(value: Any, shape: Obj, where: str, reading: _Reading) -> None:
    if not isinstance(value, dict):
        reading.problems.append(f"{where or 'the file'}: should be a mapping of keys, not {type(value).__name__}")
        return
    for name in shape.required:
        if value.get(name) is None:
            reading.problems.append(f"{_where(where, name)}: is required")
    for name, item in value.items():
        key = shape.keys.get(name)
        if key is None:
            if name not in shape.also_accepted():
                accepted = ", ".join(sorted(set(shape.keys) | shape.also_accepted()))
                reading.problems.append(
                    f"{_where(where, name)}: not a key Airbyte's acceptance tests accept here (accepted: {accepted})"
                )
            continue
        if key.unchecked and item is not None and key.unchecked_when(item):
            reading.notes.append(f"{_where(where, name)}: {NOT_CHECKED}: {key.unchecked}")
        _walk(item, key.value, _where(where, name), reading)
    for rule in shape.rules:
        reading.problems.extend(f"{where}: {problem}" for problem in rule(value))


def _note_catalog_at_high(raw: Mapping[str, Any], reading: _Reading) -> None:
    """CAT refuses a ``basic_read`` configured catalog at ``high``; this runner reads it. Say so."""
    tests = raw.get("acceptance_tests")
    if raw.get("test_strictness_level") != "high" or not isinstance(tests, dict):
        return
    for index, item in enumerate(_entries(tests, "basic_read")):
        if item.get("configured_catalog_path"):
            reading.notes.append(
                f"acceptance_tests.basic_read.tests[{index}].configured_catalog_path: read as given (at "
                "test_strictness_level high, Airbyte's CAT refuses it and reads every discovered stream "
                "but the empty_streams)"
            )


_reported: set = set()


def _log_notes_once(path: str, notes: Sequence[str]) -> None:
    """Log a file's notes once per process, whichever suite reads the file first."""
    if not notes or path in _reported:
        return
    _reported.add(path)
    logger.warning("%s, as read here:\n%s", path, _bullets(notes))


def _bullets(lines: Sequence[str]) -> str:
    return "\n".join(f"- {line}" for line in lines)


# --- the file, in the current layout ------------------------------------------------------------


def _read_yaml(path: str) -> Any:
    if not os.path.isfile(path):
        raise AcceptanceConfigError(f"acceptance test config '{path}' does not exist")
    try:
        with open(path, encoding="utf-8") as handle:
            return yaml.safe_load(handle)
    except yaml.YAMLError as error:
        raise AcceptanceConfigError(f"'{path}' is not valid YAML: {error}") from None


def _read_current_layout(path: str) -> dict[str, Any]:
    """The file's content with ``acceptance_tests:``, migrating CAT's legacy ``tests:`` layout."""
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
    """CAT's migration of the layout before its v0.2.12: ``tests: {section: [test, ...]}`` becomes
    ``acceptance_tests: {section: {tests: [test, ...]}}``; plain ``empty_streams`` and
    ``ignored_fields`` names become ``{name: ...}`` items; an incremental test's flat
    ``future_state_path`` moves into ``future_state``."""
    migrated = {key: copy.deepcopy(value) for key, value in raw.items() if key != "tests"}
    sections = {name: {"tests": copy.deepcopy(tests)} for name, tests in raw["tests"].items()}
    migrated["acceptance_tests"] = sections
    for name, body in sections.items():
        for test in body["tests"] if isinstance(body["tests"], list) else []:
            if not isinstance(test, dict):
                continue
            if isinstance(test.get("empty_streams"), list):
                test["empty_streams"] = [_named(item) for item in test["empty_streams"]]
            if isinstance(test.get("ignored_fields"), dict):
                test["ignored_fields"] = {
                    stream: [_named(item) for item in fields or []] for stream, fields in test["ignored_fields"].items()
                }
            if name == "incremental" and "future_state_path" in test:
                test["future_state"] = {"future_state_path": test.pop("future_state_path")}
    return migrated


def _named(item: Any) -> Any:
    return {"name": item} if isinstance(item, str) else item


# --- the entries this runner runs ---------------------------------------------------------------


def _entries(tests: Mapping[str, Any], section: str) -> list[Mapping[str, Any]]:
    body = tests.get(section) or {}
    if not isinstance(body, dict):
        return []
    return [item for item in (body.get("tests") or []) if isinstance(item, dict)]


def _resolve(root: str, value: Any | None) -> str | None:
    if value is None:
        return None
    value = str(value)
    return value if os.path.isabs(value) else os.path.normpath(os.path.join(root, value))


def _names(items: Any) -> tuple[str, ...]:
    return tuple(item["name"] if isinstance(item, dict) else str(item) for item in items or [])


def _ignored_fields(raw: Any) -> dict[str, tuple[str, ...]]:
    """``{stream: [{"name": "a/b", "bypass_reason": ...} | "a/b", ...]}`` → ``{stream: ("a/b",)}``."""
    return {stream: _names(fields) for stream, fields in (raw or {}).items()}


def _environment(raw: Any) -> dict[str, str]:
    """``custom_environment_variables`` as process environment (unset values left out)."""
    return {str(name): str(value) for name, value in (raw or {}).items() if value is not None}


def _timeout(item: Mapping[str, Any], section: str) -> int:
    """``timeout_seconds``, or the section's default when unset or 0 (CAT ignores a 0 too)."""
    return _as_int(item.get("timeout_seconds")) or DEFAULT_TIMEOUT_SECONDS[section]


def _flag_value(item: Mapping[str, Any], key: str, default: bool) -> bool:
    value = _as_bool(item.get(key))
    return default if value is None else value


def _why_not_run(item: Mapping[str, Any]) -> str | None:
    """Why this runner runs nothing for an entry: its ``bypass_reason``, or keys of
    airbyte-cdk's suite that ask for what this runner's checks cannot do."""
    if item.get("bypass_reason"):
        return f"bypassed: {item['bypass_reason']}"
    if item.get("status") in ("failed", "exception"):
        return (
            f"status: {item['status']} ({_CDK_SUITE} checks that this read fails; this runner's "
            "checks need a read that succeeds)"
        )
    if item.get("config_dict") is not None and item.get("config_path") is None:
        return f"config_dict without config_path (run by {_CDK_SUITE}; this runner needs a config file)"
    return None


def _expect_records(raw: Any, base: str) -> ExpectRecords | None:
    if not isinstance(raw, dict):
        return None
    return ExpectRecords(
        path=_resolve(base, raw.get("path")),
        exact_order=_flag_value(raw, "exact_order", False),
        extra_fields=_flag_value(raw, "extra_fields", False),
        extra_records=_flag_value(raw, "extra_records", True),
        bypass_reason=raw.get("bypass_reason") or None,
    )


def _read_entry(section: str, item: Mapping[str, Any], base: str) -> ReadEntry:
    return ReadEntry(
        section=section,
        config_path=str(_resolve(base, item.get("config_path") or DEFAULT_CONFIG_PATH)),
        configured_catalog_path=_resolve(base, item.get("configured_catalog_path")),
        empty_streams=_names(item.get("empty_streams")),
        expect_records=_expect_records(item.get("expect_records"), base),
        ignored_fields=_ignored_fields(item.get("ignored_fields")),
        fail_on_extra_columns=_flag_value(item, "fail_on_extra_columns", True),
        timeout_seconds=_timeout(item, section),
        skip_reason=_why_not_run(item),
    )


def _incremental_entry(item: Mapping[str, Any], base: str) -> IncrementalEntry:
    future = item.get("future_state") or {}
    return IncrementalEntry(
        config_path=str(_resolve(base, item.get("config_path") or DEFAULT_CONFIG_PATH)),
        configured_catalog_path=_resolve(base, item.get("configured_catalog_path")),
        future_state_path=_resolve(base, future.get("future_state_path")),
        missing_streams=_names(future.get("missing_streams")),
        skip_comprehensive_incremental_tests=_flag_value(item, "skip_comprehensive_incremental_tests", False),
        threshold_days=_as_int(item.get("threshold_days")) or 0,
        cursor_paths={stream: tuple(str(part) for part in path) for stream, path in (item.get("cursor_paths") or {}).items()},
        timeout_seconds=_timeout(item, "incremental"),
        future_state_bypass_reason=future.get("bypass_reason") or None,
        skip_reason=_why_not_run(item),
    )


# --- test_strictness_level: high -----------------------------------------------------------------


def _strictness_problems(tests: Mapping[str, Any]) -> list[str]:
    """CAT's rules at ``high``: what must be declared, and which bypasses stand in for it."""
    problems = [
        f"section '{name}' is missing (give it tests, or a bypass_reason)"
        for name in MANDATORY_AT_HIGH
        if tests.get(name) is None
    ]
    for section in ("basic_read", "full_refresh", "incremental"):
        for index, item in enumerate(_entries(tests, section)):
            if _why_not_run(item):
                continue
            where = f"{section} test #{index + 1} ('{item.get('config_path') or DEFAULT_CONFIG_PATH}')"
            problems += _entry_strictness_problems(section, item, where)
    return problems


def _entry_strictness_problems(section: str, item: Mapping[str, Any], where: str) -> list[str]:
    problems = [f"{where}: {problem}" for problem in _unexplained(item.get("empty_streams"), "empty_streams")]
    for stream, fields in (item.get("ignored_fields") or {}).items():
        problems += [f"{where}: {problem}" for problem in _unexplained(fields, f"ignored_fields.{stream}")]
    if section == "basic_read" and not item.get("expect_records"):
        problems.append(f"{where} has no expect_records (give a path, or a bypass_reason)")
    if section == "incremental":
        future = item.get("future_state") or {}
        if not future.get("future_state_path") and not future.get("bypass_reason"):
            problems.append(f"{where} has no future_state (give a future_state_path, or a bypass_reason)")
        missing = future.get("missing_streams")
        problems += [f"{where}: {problem}" for problem in _unexplained(missing, "missing_streams")]
    return problems


def _unexplained(items: Any, what: str) -> list[str]:
    """Items of ``empty_streams``-like lists without a bypass_reason (each needs one at high)."""
    missing = [
        item["name"] if isinstance(item, dict) else str(item)
        for item in items or []
        if not (isinstance(item, dict) and item.get("bypass_reason"))
    ]
    return [f"{what} item '{name}' has no bypass_reason" for name in missing]


# --- airbyte-cdk's standard suite's copy -----------------------------------------------------------


def load_for_standard_suite(path: str) -> dict[str, Any]:
    """The file's content for airbyte-cdk's standard suite, in the shape it reads.

    The CDK's suite refuses the CAT keys it no longer acts on (``expect_records``,
    ``timeout_seconds``, ``validate_data_points``, ...), so they are removed from its copy of
    the entries it collects; this runner reads them from the file itself. Only keys CAT accepts
    are removed: any other key stays, and fails the CDK's collection as it should. The copy is
    also in the layout the CDK reads: the legacy ``tests:`` layout migrated, plain
    ``empty_streams`` names as ``{name: ...}``, paths made absolute when ``base_path`` is set,
    and sections without entries (bypassed, or null) left without a ``tests`` list. An entry
    with a ``bypass_reason`` tests nothing, so it is left out (the CDK would still run its
    config).
    """
    path = os.path.abspath(path)
    raw = _read_current_layout(path)
    _log_notes_once(path, _inspect(raw).notes)
    tests = raw.get("acceptance_tests")
    if not isinstance(tests, dict):
        return raw
    base = _resolve(os.path.dirname(path), raw.get("base_path")) if raw.get("base_path") else None
    for section in CDK_SECTIONS:
        _shape_section_for_cdk(tests, section, base)
    return raw


def _shape_section_for_cdk(tests: dict[str, Any], section: str, base: str | None) -> None:
    body = tests.get(section)
    if not isinstance(body, dict):
        tests.pop(section, None)  # null: nothing to collect (the CDK cannot read a null section)
        return
    if body.get("tests") is None:
        body.pop("tests", None)  # bypassed: nothing to collect
        return
    if not isinstance(body["tests"], list):
        return  # not CAT's shape: the CDK says so
    body["tests"] = [item for item in body["tests"] if not (isinstance(item, dict) and item.get("bypass_reason"))]
    for item in body["tests"]:
        if isinstance(item, dict):
            _shape_entry_for_cdk(section, item, base)


def cdk_rejected_keys(section: str) -> frozenset[str]:
    """CAT's keys of a ``section`` entry that airbyte-cdk's standard suite refuses."""
    return frozenset(_ENTRY_KEYS[section]) - cdk_entry_keys(section)


def _shape_entry_for_cdk(section: str, item: dict[str, Any], base: str | None) -> None:
    for key in cdk_rejected_keys(section) & set(item):
        del item[key]
    if isinstance(item.get("empty_streams"), list):
        item["empty_streams"] = [_named(stream) for stream in item["empty_streams"]]
    if base:
        for key in ("config_path", "configured_catalog_path"):
            if item.get(key) is not None:
                item[key] = _resolve(base, item[key])
