"""airbyte-cdk's own standard source suite against the demo connector, in-process.

The scenarios come from the top-level ``acceptance-test-config.yml`` (the CDK finds it by
walking up from this file). The incremental section, ``expect_records`` and the Spark tables
are checked by ``test_acceptance.py`` (source_framework.testing's runner).
"""

from source_framework.demo import DemoSource
from source_framework.testing import StandardSourceSuite


class TestDemoStandardSuite(StandardSourceSuite):
    connector = DemoSource
