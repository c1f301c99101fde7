"""Deterministic SaaS-like demo HTTP API on 127.0.0.1 (``DemoApi``, with ``Faults``), for connector tests and demos."""

from source_framework.demo.api.faults import Faults
from source_framework.demo.api.server import DemoApi

__all__ = ["DemoApi", "Faults"]
