"""CAT's configuration schema as pydantic models: the keys ``acceptance-test-config.yml`` may set and their rules."""

from __future__ import annotations

import functools
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Annotated, Any, ClassVar, Generic, Literal, TypeVar

from pydantic import AfterValidator, BaseModel, BeforeValidator, ConfigDict, Field, model_validator

RUNNER_SECTIONS: tuple[str, ...] = ("basic_read", "full_refresh", "incremental")
CDK_SECTIONS: tuple[str, ...] = ("spec", "connection", "discovery", "basic_read", "full_refresh")
#: The sections CAT fails without at ``test_strictness_level: high``.
MANDATORY_AT_HIGH: tuple[str, ...] = ("spec", "connection", "discovery", "basic_read", "full_refresh", "incremental")
DEFAULT_CONFIG_PATH = "secrets/config.json"

CDK_SUITE = "airbyte-cdk's standard suite"
NOT_CHECKED = f"not checked by this runner (nor by {CDK_SUITE})"


@functools.cache
def cdk_entry_keys(section: str) -> frozenset[str]:
    """The keys airbyte-cdk's standard suite accepts in an entry of ``section``, read from the installed CDK so upgrades follow."""
    if section not in CDK_SECTIONS:
        return frozenset()
    from airbyte_cdk.test.models import scenario

    keys = set(scenario.ConnectorTestScenario.model_fields)
    keys -= set(getattr(scenario, "POPULATED_FIELDS", {}))
    keys |= set(getattr(scenario, "LEGACY_ENTRY_KEYS", {}).get(section, ()))
    return frozenset(keys)


@dataclass(frozen=True)
class Unchecked:
    """Marks a key neither suite acts on: ``why`` is noted when the key is set (or, with ``only``, set that way)."""

    why: str
    only: bool | None = None


def _cat_check(what: str) -> Unchecked:
    return Unchecked(f"CAT's check of {what}", only=True)


class _Model(BaseModel):
    # Numbers are read as text where text is wanted, as pydantic v1 (CAT's) did: a version 1.2 is "1.2".
    model_config = ConfigDict(extra="forbid", coerce_numbers_to_str=True)

    @model_validator(mode="before")
    @classmethod
    def _null_is_unset(cls, data: Any) -> Any:
        """``key: null`` is the key left out, so defaults and "is required" apply to it."""
        if isinstance(data, dict):
            return {key: value for key, value in data.items() if value is not None or key not in cls.model_fields}
        return data

    @classmethod
    def accepted_keys(cls) -> frozenset[str]:
        return frozenset(cls.model_fields)


def _refuse(model: Any, problems: list[str]) -> Any:
    if problems:
        raise ValueError("\n".join(problems))
    return model


def _file_extension(value: str) -> str:
    if not (value.startswith(".") and len(value) >= 2):
        raise ValueError(f"should be a file extension such as '.csv', not {value!r}")
    return value


def name_as_item(value: Any) -> Any:
    """Older CAT releases, and its legacy layout, listed plain stream and field names."""
    return {"name": value} if isinstance(value, str) else value


Count = Annotated[int, Field(ge=0)]
Command = list[str]
DeploymentMode = Annotated[Literal["cloud", "oss"] | None, Unchecked("the connector runs as it is; no cloud or OSS deployment mode is set")]
Untimed = Annotated[Count | None, Unchecked("neither suite limits the time of spec, check or discover runs")]


class Named(_Model):
    name: str
    bypass_reason: str | None = None


NameOrNamed = Annotated[Named, BeforeValidator(name_as_item)]


class Bypass(_Model):
    bypass_reason: str | None = None


class ExpectedRecords(_Model):
    path: str | None = None
    bypass_reason: str | None = None
    exact_order: bool = False
    extra_fields: bool = False
    extra_records: bool = True

    @model_validator(mode="after")
    def _rules(self) -> ExpectedRecords:
        problems = []
        if self.path and self.bypass_reason:
            problems.append("set 'path' or 'bypass_reason', not both")
        elif not self.path and not self.bypass_reason:
            problems.append("needs a 'path' (the expected records) or a 'bypass_reason'")
        # CAT's releases that had extra_fields allowed it only with exact order and no extra records.
        if self.extra_fields and not self.exact_order:
            problems.append("'extra_fields: true' needs 'exact_order: true'")
        if self.extra_fields and self.extra_records:
            problems.append("'extra_fields: true' needs 'extra_records: false'")
        return _refuse(self, problems)


class UnsupportedType(_Model):
    extension: Annotated[str, AfterValidator(_file_extension)]
    bypass_reason: str | None = None


class FileTypes(_Model):
    skip_test: bool = False
    bypass_reason: str | None = None
    unsupported_types: list[UnsupportedType] | None = None

    @model_validator(mode="after")
    def _rules(self) -> FileTypes:
        if self.skip_test and self.unsupported_types:
            return _refuse(self, ["'unsupported_types' cannot be set when 'skip_test' is true"])
        if not self.skip_test and self.bypass_reason is not None:
            return _refuse(self, ["'bypass_reason' can only be set when 'skip_test' is true"])
        return self


class AuthDefaultMethod(_Model):
    oauth: bool = True
    bypass_reason: str | None = None

    @model_validator(mode="after")
    def _rules(self) -> AuthDefaultMethod:
        return _refuse(self, [] if self.oauth or self.bypass_reason else ["'oauth: false' needs a 'bypass_reason'"])


class BackwardCompatibility(_Model):
    previous_connector_version: str | None = None
    disable_for_version: str | None = None


class ClientContainer(_Model):
    secrets_path: str | None = None
    client_container_dockerfile_path: str | None = None
    setup_command: Command | None = None
    teardown_command: Command | None = None
    between_syncs_command: Command | None = None
    final_teardown_command: Command | None = None


NoClientContainer = Annotated[ClientContainer | None, Unchecked("no setup or teardown container is run")]


class StreamFormat(_Model):
    name: str
    format: str | None = None


class CursorFormat(_Model):
    format: str | None = None
    streams: list[StreamFormat] | None = None


class FutureState(_Model):
    future_state_path: str | None = None
    missing_streams: list[NameOrNamed] | None = None
    bypass_reason: str | None = None
    cursor_format: Annotated[CursorFormat | None, Unchecked("the future state's cursor values are not format-checked")] = None


def _unexplained(items: list[Named] | None, what: str) -> list[str]:
    return [f"{what} item '{item.name}' has no bypass_reason" for item in items or () if not item.bypass_reason]


class _Entry(_Model):
    """An entry of a section CAT runs; with a ``bypass_reason`` it runs nothing, and says why."""

    #: Set on sections airbyte-cdk's suite collects: its keys are accepted here unchecked (the CDK checks them).
    cdk_section: ClassVar[str | None] = None

    config_path: str | None = None
    bypass_reason: str | None = None
    deployment_mode: DeploymentMode = None

    @model_validator(mode="before")
    @classmethod
    def _leave_cdk_keys_to_the_cdk(cls, data: Any) -> Any:
        """The CDK's own keys are not CAT's: set aside here, checked by the CDK's scenario model."""
        if cls.cdk_section and isinstance(data, dict) and set(data) - set(cls.model_fields):
            theirs = cdk_entry_keys(cls.cdk_section) - set(cls.model_fields)
            return {key: value for key, value in data.items() if key not in theirs}
        return data

    @classmethod
    def accepted_keys(cls) -> frozenset[str]:
        return super().accepted_keys() | (cdk_entry_keys(cls.cdk_section) if cls.cdk_section else frozenset())

    def why_not_run(self) -> str | None:
        return f"bypassed: {self.bypass_reason}" if self.bypass_reason else None

    def problems_at_high(self, where: str) -> list[str]:
        return []


class SpecTest(_Entry):
    cdk_section = "spec"
    spec_path: Annotated[str | None, Unchecked(f"the connector's spec is not compared with this file; {CDK_SUITE} lints its own")] = None
    timeout_seconds: Untimed = None
    backward_compatibility_tests_config: BackwardCompatibility | None = None
    auth_default_method: Annotated[AuthDefaultMethod | None, Unchecked("the OAuth default-method check is not run")] = None


class ConnectionTest(_Entry):
    cdk_section = "connection"
    status: Literal["succeed", "failed", "exception"] | None = None
    timeout_seconds: Untimed = None


class DiscoveryTest(_Entry):
    cdk_section = "discovery"
    timeout_seconds: Untimed = None
    backward_compatibility_tests_config: Annotated[
        BackwardCompatibility | None, Unchecked("the discovered catalog is not compared with the previous version's")
    ] = None
    validate_primary_keys_data_type: Annotated[bool | None, _cat_check("primary key types in the catalog")] = None


class _ReadTest(_Entry):
    configured_catalog_path: str | None = None
    timeout_seconds: Count | None = None
    client_container_config: NoClientContainer = None


class _CdkReadTest(_ReadTest):
    # Read here only to leave alone an entry expecting a failed read or without config; the CDK checks them.
    status: Any = None
    config_dict: Any = None
    ignored_fields: dict[str, list[NameOrNamed] | None] | None = None

    def why_not_run(self) -> str | None:
        if reason := super().why_not_run():
            return reason
        if self.status in ("failed", "exception"):
            return f"status: {self.status} ({CDK_SUITE} checks that this read fails; this runner's checks need a read that succeeds)"
        if self.config_dict is not None and self.config_path is None:
            return f"config_dict without config_path (run by {CDK_SUITE}; this runner needs a config file)"
        return None

    def problems_at_high(self, where: str) -> list[str]:
        problems: list[str] = []
        for stream, fields in (self.ignored_fields or {}).items():
            problems += _unexplained(fields, f"ignored_fields.{stream}")
        return [f"{where}: {problem}" for problem in problems]


class BasicReadTest(_CdkReadTest):
    cdk_section = "basic_read"
    empty_streams: list[NameOrNamed] | None = None
    expect_records: ExpectedRecords | None = None
    validate_schema: bool | None = None
    fail_on_extra_columns: bool = True
    validate_stream_statuses: Annotated[bool | None, _cat_check("stream statuses (STARTED, RUNNING, COMPLETE)")] = None
    validate_state_messages: Annotated[bool | None, _cat_check("the STATE messages of the basic read")] = None
    validate_primary_keys_data_type: Annotated[bool | None, _cat_check("primary key values")] = None
    validate_data_points: Annotated[bool | None, _cat_check("fields that are never filled")] = None
    expect_trace_message_on_failure: Annotated[
        bool | None,
        Unchecked(f"{CDK_SUITE} runs its bad-catalog read (test_fail_read_with_bad_catalog) whatever it says", only=False),
    ] = None
    file_types: Annotated[FileTypes | None, Unchecked("the file-type check of certified file-based connectors is not run")] = None

    def problems_at_high(self, where: str) -> list[str]:
        problems = [f"{where}: {problem}" for problem in _unexplained(self.empty_streams, "empty_streams")]
        problems += super().problems_at_high(where)
        if self.expect_records is None:
            problems.append(f"{where} has no expect_records (give a path, or a bypass_reason)")
        return problems


class FullRefreshTest(_CdkReadTest):
    cdk_section = "full_refresh"


class IncrementalTest(_ReadTest):
    future_state: FutureState | None = None
    skip_comprehensive_incremental_tests: bool = False
    cursor_paths: dict[str, Annotated[list[str], Field(min_length=1)]] | None = None
    threshold_days: Count = 0

    def problems_at_high(self, where: str) -> list[str]:
        future = self.future_state or FutureState()
        problems = []
        if not future.future_state_path and not future.bypass_reason:
            problems.append(f"{where} has no future_state (give a future_state_path, or a bypass_reason)")
        return problems + [f"{where}: {problem}" for problem in _unexplained(future.missing_streams, "missing_streams")]


class AttributesTest(_Model):
    config_path: str | None = None
    timeout_seconds: Count | None = None
    streams_without_primary_key: list[Named] | None = None
    allowed_hosts: Bypass | None = None
    suggested_streams: Bypass | None = None


class DocumentationTest(_Model):
    config_path: str | None = None
    timeout_seconds: Count | None = None


E = TypeVar("E")


class Section(_Model, Generic[E]):
    tests: list[E] | None = None
    bypass_reason: str | None = None

    @model_validator(mode="after")
    def _tests_or_bypass_reason(self) -> Section[E]:
        """A section lists its tests or says why it has none (an empty list passes, as in CAT)."""
        if self.tests and self.bypass_reason:
            return _refuse(self, ["set 'tests' or 'bypass_reason', not both"])
        if self.tests is None and not self.bypass_reason:
            return _refuse(self, ["needs 'tests' or a 'bypass_reason'"])
        return self


class AcceptanceTests(_Model):
    spec: Section[SpecTest] | None = None
    connection: Section[ConnectionTest] | None = None
    discovery: Section[DiscoveryTest] | None = None
    basic_read: Section[BasicReadTest] | None = None
    full_refresh: Section[FullRefreshTest] | None = None
    incremental: Section[IncrementalTest] | None = None
    connector_attributes: Annotated[
        Section[AttributesTest] | None, Unchecked("Airbyte's checks of primary keys and metadata are not run")
    ] = None
    connector_documentation: Annotated[Section[DocumentationTest] | None, Unchecked("Airbyte's documentation checks are not run")] = None
    client_container_config: NoClientContainer = None

    def entries(self, section: str) -> list[Any]:
        body = getattr(self, section)
        return list(body.tests or []) if body else []


class AcceptanceTestConfig(_Model):
    connector_image: str | None = None
    acceptance_tests: AcceptanceTests
    base_path: str | None = None
    test_strictness_level: Literal["high", "low"] = "low"
    custom_environment_variables: dict[Any, Any] | None = None
    cache_discovered_catalog: bool | None = None

    def problems_at_high(self) -> list[str]:
        """CAT's rules at ``high``: what must be declared, and which bypasses stand in for it."""
        tests = self.acceptance_tests
        problems = [
            f"section '{name}' is missing (give it tests, or a bypass_reason)"
            for name in MANDATORY_AT_HIGH
            if getattr(tests, name) is None
        ]
        for section in RUNNER_SECTIONS:
            for index, item in enumerate(tests.entries(section)):
                if not item.why_not_run():
                    problems += item.problems_at_high(f"{section} test #{index + 1} ('{item.config_path or DEFAULT_CONFIG_PATH}')")
        return problems


ENTRY_MODELS: dict[str, type[_Model]] = {
    "spec": SpecTest, "connection": ConnectionTest, "discovery": DiscoveryTest, "basic_read": BasicReadTest,
    "full_refresh": FullRefreshTest, "incremental": IncrementalTest,
}


def notes(model: BaseModel, where: str = "") -> Iterator[str]:
    for name, field in type(model).model_fields.items():
        value, path = getattr(model, name), f"{where}.{name}".lstrip(".")
        for mark in field.metadata:
            if isinstance(mark, Unchecked) and value is not None and mark.only in (None, value):
                yield f"{path}: {NOT_CHECKED}: {mark.why}"
        yield from _notes_within(value, path)


def _notes_within(value: Any, where: str) -> Iterator[str]:
    if isinstance(value, BaseModel):
        yield from notes(value, where)
    elif isinstance(value, list):
        for index, item in enumerate(value):
            yield from _notes_within(item, f"{where}[{index}]")
    elif isinstance(value, dict):
        for key, item in value.items():
            yield from _notes_within(item, f"{where}.{key}")
