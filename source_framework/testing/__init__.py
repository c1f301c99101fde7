"""Acceptance tests for source_framework connectors, driven by ``acceptance-test-config.yml``.

Two suites read the one YAML file (Airbyte's connector-acceptance-test format):

- ``StandardSourceSuite``: airbyte-cdk's own standard source tests
  (``airbyte_cdk.test.standard_tests.SourceTestSuiteBase``: spec, check, discover, full-refresh
  read), run in-process through the CDK's entrypoint;
- ``AcceptanceSuite``: what the CDK's suite does not run, with the connector's ``main.py`` as a
  subprocess through the source_framework runtime and Spark writer: ``expect_records``, two
  identical full-refresh reads, the incremental checks of Airbyte's acceptance tests (two
  sequential reads, reads from intermediate STATEs, a future state), and that the Spark tables
  hold exactly the records the source produced and a rerun from the final STATE adds no rows.

In a test module of your connector::

    from source_framework.testing import AcceptanceSuite, StandardSourceSuite

    class TestStandardSuite(StandardSourceSuite):
        connector = "main.py"            # script calling launch(), or "pkg.module:SourceClass"

    class TestAcceptance(AcceptanceSuite):
        connector = "main.py"

Both find ``acceptance-test-config.yml`` by walking up from the test file, or take
``acceptance_test_config_path`` (relative to the test file). ``connector`` is relative to the
YAML's folder. From a shell, without writing a test module::

    python -m source_framework.testing --connector main.py --acceptance-config acceptance-test-config.yml [-- pytest args]

Modules: ``acceptance_config`` (the YAML), ``acceptance_schema`` (CAT's keys and rules, as pydantic
models), ``connector_reference`` (script or module:Class),
``connector_runs`` (subprocess runs and their parsed output), ``in_process`` (``read`` in this
process, for tests that need no process of their own: ``from source_framework.testing import
read``), ``catalogs``, ``cursors``,
``incremental_checks``, ``record_checks``, ``table_checks`` (the checks, pytest-free),
``acceptance_reads`` (which reads, run once each), ``suite`` and ``standard_suite`` (pytest
classes), ``expected_records`` (write an expected-records file from a read).
"""

from importlib import import_module
from typing import Any

# Imported on first use: the subprocess launcher (``connector_reference``) and the
# expected-records tool should not pay for pytest and airbyte-cdk's test modules.
_EXPORTS = {
    "AcceptanceConfig": "acceptance_config",
    "AcceptanceConfigError": "acceptance_config",
    "AcceptanceSuite": "suite",
    "ConnectorReference": "connector_reference",
    "ConnectorRunError": "connector_runs",
    "ConnectorRunner": "connector_runs",
    "ReadOutput": "connector_runs",
    "StandardSourceSuite": "standard_suite",
    "read": "in_process",
    "standard_suite_for": "standard_suite",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    if name not in _EXPORTS:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(import_module(f"{__name__}.{_EXPORTS[name]}"), name)
