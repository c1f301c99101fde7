"""airbyte-cdk's own standard source tests, pointed at a source_framework connector.

airbyte-cdk 7 ships the suite Airbyte runs on every Python source
(``airbyte_cdk.test.standard_tests.SourceTestSuiteBase``): ``spec`` lint, ``check`` against the
declared status (and no secret in its output), ``discover`` catalog checks, full-refresh
``read`` with schema validation, a bad catalog. It runs the connector in-process through the
CDK's own entrypoint, so it also proves the connector is a plain Airbyte source. Scenarios come
from ``acceptance-test-config.yml``.

Use it from any test module, no conftest or plugin needed::

    from source_framework.testing import StandardSourceSuite

    class TestStandardSuite(StandardSourceSuite):
        connector = "main.py"    # or MySource, or "my_pkg.source:MySource"; relative to the YAML's folder
        acceptance_test_config_path = "../acceptance-test-config.yml"   # relative to this file

What this class adds to the CDK's base class, and why:

- ``connector`` may be a script path or ``module:Class`` (relative to the YAML's folder) as well
  as a class or factory;
- ``acceptance_test_config_path`` names the YAML (default: the CDK's own search upwards from the
  test file); its folder is the connector root the YAML's paths are relative to;
- the suite is given the YAML in the shape it reads (``acceptance_config.load_for_standard_suite``):
  without the CAT keys it refuses because it no longer acts on them (``expect_records``,
  ``timeout_seconds``, ``validate_data_points``, ...; this package's runner reads those from the
  file itself), with CAT's legacy ``tests:`` layout migrated and ``base_path`` applied;
- the scenario parametrization and the command-line fixtures the suite needs come with the
  class (the CDK normally adds them with ``-p airbyte_cdk.test.standard_tests.pytest_hooks``);
- the Docker image tests (marked ``image_tests``; ``airbyte-cdk image test`` runs them) are
  skipped, with the reason, when they cannot run: they need the connector's ``metadata.yaml``
  and a Docker daemon that answers (the CDK itself only skips them when there is no ``docker``
  command at all).
"""

from __future__ import annotations

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
    """airbyte-cdk's ``SourceTestSuiteBase`` for a source_framework connector and its YAML."""

    # a "module:Class" path too, which the CDK base does not type
    connector: str | Callable[[], Any] | None = None  # type: ignore[assignment]
    acceptance_test_config_path: ClassVar[str | None] = None

    # --- where things are -------------------------------------------------------------------

    @classmethod
    def _test_file_dir(cls) -> Path:
        return Path(inspect.getfile(sys.modules[cls.__module__])).resolve().parent

    @classmethod
    def get_connector_root_dir(cls) -> Path:
        """The folder holding the YAML (the CDK searches upwards from the test file if unset)."""
        if cls.acceptance_test_config_path:
            path = Path(cls.acceptance_test_config_path)
            if not path.is_absolute():
                path = cls._test_file_dir() / path
            return path.resolve().parent
        return super().get_connector_root_dir()

    @classproperty
    def acceptance_test_config(cls) -> Any:  # noqa: N805 - a class property
        """The YAML as the CDK's suite reads it (see ``load_for_standard_suite``)."""
        path = cls._config_file()
        if not path.exists():
            raise FileNotFoundError(f"Acceptance test config file not found at: {path}")
        content = load_for_standard_suite(str(path))
        if "acceptance_tests" not in content:
            raise ValueError(f"Acceptance tests config not found in {path}.")
        return content

    @classmethod
    def _config_file(cls) -> Path:
        if cls.acceptance_test_config_path:
            return cls.get_connector_root_dir() / Path(cls.acceptance_test_config_path).name
        return cls.get_connector_root_dir() / ACCEPTANCE_TEST_CONFIG

    # --- the connector ----------------------------------------------------------------------

    @classmethod
    def create_connector(cls, scenario: Any) -> Any:
        """A fresh source: from a class or factory, a script path or ``module:Class``."""
        connector = cls.connector
        if isinstance(connector, str):
            return ConnectorReference.parse(connector, base_dir=str(cls.get_connector_root_dir())).load_source()
        if connector is None:
            raise NotImplementedError(f"{cls.__name__}.connector is not set (a Source class, factory, script or module:Class)")
        return connector()

    # --- one fix to the CDK's suite ---------------------------------------------------------

    def test_config_matches_spec(self, scenario: Any) -> None:
        """The CDK's test, run without the scenario's configured catalog.

        airbyte-cdk 7.x's ``run_test_job`` adds ``--catalog <configured_catalog_path>`` to every
        verb but ``check``/``discover``, ``spec`` included, and ``spec`` rejects the argument; so a
        config listed under ``spec`` and under a read section with a catalog fails there.
        ``spec`` takes no catalog; everything else about the test is unchanged.
        """
        super().test_config_matches_spec(scenario.model_copy(update={"configured_catalog_path": None}))

    # --- what the CDK's pytest plugin would otherwise provide -------------------------------

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
        """Skip the Docker image tests when there is no image to test (reason in the skip)."""
        if request.node.get_closest_marker("image_tests") is None:
            return
        reason = self.why_no_image()
        if reason:
            pytest.skip(reason)

    @classmethod
    def why_no_image(cls) -> str | None:
        """Why the image tests cannot run here, or None when they can.

        They read ``metadata.yaml`` (to build the image, or for its version and streams) even
        when ``--connector-image`` names one, and they need a Docker daemon.
        """
        if not (cls.get_connector_root_dir() / METADATA_YAML).exists():
            return (
                f"image test: no {METADATA_YAML} in {cls.get_connector_root_dir()}, which the CDK's image "
                "tests need to build or describe the connector image (they run with `airbyte-cdk image test`)"
            )
        if not _docker_daemon_answers():
            return "image test: no Docker daemon answers (`docker info` fails)"
        return None


_docker_status: dict = {}


def _docker_daemon_answers() -> bool:
    if "ok" not in _docker_status:
        docker = shutil.which("docker")
        ok = False
        if docker:
            try:
                ok = subprocess.run([docker, "info"], capture_output=True, timeout=20).returncode == 0
            except (OSError, subprocess.TimeoutExpired):
                ok = False
        _docker_status["ok"] = ok
    return bool(_docker_status["ok"])


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
