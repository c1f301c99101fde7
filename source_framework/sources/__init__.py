from source_framework.sources.source import Source

__all__ = ["Source"]
