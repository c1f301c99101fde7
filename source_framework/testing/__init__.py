"""Acceptance tests for source_framework connectors, driven by ``acceptance-test-config.yml``::

    from source_framework.testing import AcceptanceSuite, StandardSourceSuite

    class TestStandardSuite(StandardSourceSuite):
        connector = "main.py"            # script calling launch(), or "pkg.module:SourceClass"

    class TestAcceptance(AcceptanceSuite):
        connector = "main.py"
"""

from importlib import import_module
from typing import Any

# Imported on first use: the subprocess launcher and expected-records tool should not pay for pytest.
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
