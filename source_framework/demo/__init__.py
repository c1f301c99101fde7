"""The bundled demo: a deterministic SaaS-like API (``demo.api``) and its connector."""

from source_framework.demo.source import DemoSource

__all__ = ["DemoSource"]
