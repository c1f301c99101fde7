"""The test classes ``python -m source_framework.testing`` runs; without its environment the module defines none."""

import os

from source_framework.testing.standard_suite import StandardSourceSuite
from source_framework.testing.suite import AcceptanceSuite

CONNECTOR = os.environ.get("SOURCE_FRAMEWORK_ACCEPTANCE_CONNECTOR")
CONFIG = os.environ.get("SOURCE_FRAMEWORK_ACCEPTANCE_CONFIG")

if CONNECTOR and CONFIG:

    class TestStandardSuite(StandardSourceSuite):
        connector = CONNECTOR
        acceptance_test_config_path = CONFIG

    class TestAcceptance(AcceptanceSuite):
        connector = CONNECTOR
        acceptance_test_config_path = CONFIG
