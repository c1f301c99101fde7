"""Both acceptance suites pointed at a second connector that lives in the tests.

``tiny_connector/`` is what a connector author has: an entrypoint script (``main.py``), a
``Source`` with two streams (one incremental on an integer cursor), a spec, schemas, and an
``acceptance-test-config.yml`` with its files. Nothing here is specific to the demo connector:
the two classes below are all an author writes to get the same tests.
"""

import pytest

from source_framework.testing import AcceptanceSuite, StandardSourceSuite

pytestmark = pytest.mark.slow  # many syncs of the tiny connector: the quick tier (-m "not slow") leaves it out

TINY_YAML = "tiny_connector/acceptance-test-config.yml"


class TestTinyStandardSuite(StandardSourceSuite):
    connector = "main.py"  # the entrypoint script: its source is loaded in-process
    acceptance_test_config_path = TINY_YAML


class TestTinyAcceptance(AcceptanceSuite):
    connector = "tiny_source:TinySource"  # module:Class, run as a subprocess in the YAML's folder
    acceptance_test_config_path = TINY_YAML
