"""airbyte-cdk's own standard source tests, pointed at a source_framework connector; passing them proves it a plain Airbyte source."""

from __future__ import annotations

import functools
import inspect
import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any, ClassVar

import pytest
from airbyte_cdk.test.standard_tests import SourceTestSuiteBase
from airbyte_cdk.test.standard_tests import pytest_hooks as cdk_hooks
from airbyte_cdk.utils.connector_paths import ACCEPTANCE_TEST_CONFIG, METADATA_YAML
from boltons.typeutils import classproperty

from source_framework.testing.acceptance_config import load_for_standard_suite
from source_framework.testing.connector_reference import ConnectorReference

_CDK_HOOKS_PLUGIN = "airbyte_cdk.test.standard_tests.pytest_hooks"


class StandardSourceSuite(SourceTestSuiteBase):
    """airbyte-cdk's ``SourceTestSuiteBase`` for a source_framework connector and its YAML.

    Subclass it and set ``connector`` (a class, a script path or ``module:Class``, relative to the YAML's folder) and
    optionally ``acceptance_test_config_path`` (relative to the test file).
    """

    # a "module:Class" path too, which the CDK base does not type
    connector: str | Callable[[], Any] | None = None  # type: ignore[assignment]
    acceptance_test_config_path: ClassVar[str | None] = None

    @classmethod
    def get_connector_root_dir(cls) -> Path:
        if cls.acceptance_test_config_path:  # relative to the test file (an absolute path replaces its folder)
            test_dir = Path(inspect.getfile(sys.modules[cls.__module__])).resolve().parent
            return (test_dir / cls.acceptance_test_config_path).resolve().parent
        return super().get_connector_root_dir()

    @classproperty
    def acceptance_test_config(cls) -> Any:  # noqa: N805 - a class property
        """The YAML as the CDK's suite reads it (see ``load_for_standard_suite``)."""
        path = cls.get_connector_root_dir() / Path(cls.acceptance_test_config_path or ACCEPTANCE_TEST_CONFIG).name
        if not path.exists():
            raise FileNotFoundError(f"Acceptance test config file not found at: {path}")
        content = load_for_standard_suite(str(path))
        if "acceptance_tests" not in content:
            raise ValueError(f"Acceptance tests config not found in {path}.")
        return content

    @classmethod
    def create_connector(cls, scenario: Any) -> Any:
        connector = cls.connector
        if isinstance(connector, str):
            return ConnectorReference.parse(connector, base_dir=str(cls.get_connector_root_dir())).load_source()
        if connector is None:
            raise NotImplementedError(f"{cls.__name__}.connector is not set (a Source class, factory, script or module:Class)")
        return connector()

    def test_config_matches_spec(self, scenario: Any) -> None:
        """The CDK's test without the catalog: airbyte-cdk 7 passes ``--catalog`` to ``spec``, which rejects it."""
        super().test_config_matches_spec(scenario.model_copy(update={"configured_catalog_path": None}))

    def pytest_generate_tests(self, metafunc: pytest.Metafunc) -> None:
        """One test per config of the YAML, as the CDK's ``pytest_hooks`` plugin does."""
        if not metafunc.config.pluginmanager.has_plugin(_CDK_HOOKS_PLUGIN):
            cdk_hooks.pytest_generate_tests(metafunc)

    @pytest.fixture
    def connector_image_override(self, request: pytest.FixtureRequest) -> str | None:
        return request.config.getoption("--connector-image", default=None)

    @pytest.fixture
    def connector_base_image_override(self, request: pytest.FixtureRequest) -> str | None:
        return request.config.getoption("--connector-base-image", default=None)

    @pytest.fixture
    def read_from_streams(self, request: pytest.FixtureRequest) -> Any:
        value = str(request.config.getoption("--read-from-streams", default=None) or "default")
        if value.lower() in ("false", "none"):
            return "none"
        if value.lower() in ("true", "suggested", "default", "all"):
            return "all" if value.lower() == "all" else "default"
        return value.split(",")

    @pytest.fixture
    def read_scenarios(self, request: pytest.FixtureRequest) -> Any:
        value = str(request.config.getoption("--read-scenarios", default="default"))
        if value.lower() in ("default", "all"):
            return value.lower()
        return [] if value.lower() == "none" else [n.strip().lower().removesuffix(".json") for n in value.split(",")]

    @pytest.fixture(autouse=True)
    def _image_tests_need_an_image(self, request: pytest.FixtureRequest) -> None:
        if request.node.get_closest_marker("image_tests") is None:
            return
        reason = self.why_no_image()
        if reason:
            pytest.skip(reason)

    @classmethod
    def why_no_image(cls) -> str | None:
        """Why the image tests cannot run here (no ``metadata.yaml`` or no Docker daemon), or None when they can."""
        if not (cls.get_connector_root_dir() / METADATA_YAML).exists():
            return (
                f"image test: no {METADATA_YAML} in {cls.get_connector_root_dir()}, which the CDK's image "
                "tests need to build or describe the connector image (they run with `airbyte-cdk image test`)"
            )
        if not _docker_daemon_answers():
            return "image test: no Docker daemon answers (`docker info` fails)"
        return None


@functools.cache
def _docker_daemon_answers() -> bool:
    docker = shutil.which("docker")
    if not docker:
        return False
    try:
        return subprocess.run([docker, "info"], capture_output=True, timeout=20).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


def standard_suite_for(
    connector: str | Callable[[], Any],
    acceptance_test_config_path: str | os.PathLike,
    name: str = "TestStandardSuite",
) -> type:
    """A ``StandardSourceSuite`` subclass for ``connector`` and an absolute YAML path."""
    return type(
        name,
        (StandardSourceSuite,),
        {"connector": connector, "acceptance_test_config_path": os.path.abspath(acceptance_test_config_path)},
    )
