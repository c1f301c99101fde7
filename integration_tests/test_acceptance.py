"""source_framework.testing's acceptance runner against the demo connector (``main.py``).

Driven by the top-level ``acceptance-test-config.yml``: expected records, two identical
full-refresh reads, Airbyte's incremental checks, and the Spark tables. ``main.py`` runs as a
subprocess; the embedded demo API gives every run the same data.
"""

import pytest

from source_framework.testing import AcceptanceSuite

pytestmark = pytest.mark.slow  # the whole acceptance suite: the quick tier (-m "not slow") leaves it out


class TestDemoAcceptance(AcceptanceSuite):
    connector = "main.py"
