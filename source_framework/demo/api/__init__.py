"""Deterministic SaaS-like demo HTTP API on 127.0.0.1, for connector tests and demos.

``DemoApi`` serves it (in-process, on a free port by default); ``Faults`` schedules rate
limits, server errors, latency and unsorted pages. Run ``python -m source_framework.demo.api``
to serve it from a separate process.
"""

from source_framework.demo.api.faults import Faults
from source_framework.demo.api.server import DemoApi

__all__ = ["DemoApi", "Faults"]
