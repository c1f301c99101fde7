"""Giving a concurrent (declarative) source's streams the state this sync starts from.

A ``DefaultStream`` takes its state when it is built: its cursor reads it from the source's
``ConnectorStateManager``. airbyte-cdk's declarative sources (``YamlDeclarativeSource`` and
every ``ConcurrentDeclarativeSource``) build their streams from the state they were constructed
with. The runtime decides the start state per stream only once it has looked at the stream's
table (``runtime.resume``), so it puts that state into the source's state manager and builds
the stream anew::

    set_state = state_setter(source, config)     # None for sources that cannot take it
    stream = set_state("users", None, {"updated_at": "2025-02-01T00:00:00Z"})
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping
from typing import Any

from airbyte_cdk.sources.connector_state_manager import ConnectorStateManager
from airbyte_cdk.sources.streams.concurrent.abstract_stream import AbstractStream

StateSetter = Callable[[str, str | None, Mapping[str, Any]], AbstractStream]


def state_setter(source: Any, config: Mapping[str, Any]) -> StateSetter | None:
    """A function that builds one of ``source``'s streams with a given state, or None when the
    source keeps no state manager its streams are built from."""
    manager = getattr(source, "_connector_state_manager", None)
    if not isinstance(manager, ConnectorStateManager):
        return None

    lock = threading.Lock()  # streams synced at once start in several threads; one build at a time

    def build(name: str, namespace: str | None, state: Mapping[str, Any]) -> AbstractStream:
        with lock:
            manager.update_state_for_stream(name, namespace, dict(state or {}))
            for stream in source.streams(config):
                if stream.name == name:
                    return stream
        raise KeyError(f"the source no longer has stream '{name}'")

    return build
