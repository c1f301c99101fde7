"""Giving a concurrent (declarative) source's streams the state this sync starts from.

A ``DefaultStream`` takes its state when it is built, but the runtime knows the start state only after looking at the
table (``runtime.resume``): so the state goes into the source's state manager and the stream is built anew. Sources
without such a manager get it from any ``ConnectorStateManager`` asked while ``streams()`` runs, in that thread only.
"""

from __future__ import annotations

import copy
import threading
from collections.abc import Callable, Iterator, Mapping, MutableMapping
from contextlib import contextmanager
from typing import Any

from airbyte_cdk.sources.connector_state_manager import ConnectorStateManager
from airbyte_cdk.sources.streams.concurrent.abstract_stream import AbstractStream

from source_framework.runtime.stream_adapter_base import StateNotApplicable, concurrent_stream, is_concurrent, short_state

StateSetter = Callable[[str, str | None, Mapping[str, Any]], AbstractStream]


def state_setter(source: Any, config: Mapping[str, Any]) -> StateSetter:
    """A function that builds one of ``source``'s concurrent streams with a given state."""
    manager = getattr(source, "_connector_state_manager", None)

    def build(name: str, namespace: str | None, state: Mapping[str, Any]) -> AbstractStream:
        with _one_build, _same_api_budget(source):  # streams synced at once start in several threads
            if isinstance(manager, ConnectorStateManager):
                manager.update_state_for_stream(name, namespace, dict(state or {}))
                streams = source.streams(config)
            else:
                with _handed_out(name, namespace, state) as asked:
                    streams = source.streams(config)
                if not asked:
                    raise StateNotApplicable(
                        f"stream '{name}' belongs to a source that takes its state when it is constructed and did not "
                        f"ask a ConnectorStateManager for it when its streams were built again, and this sync must start "
                        f"from {short_state(state)}; construct the source with that state (as its own main does with --state)"
                    )
        for stream in streams:
            if stream.name == name and is_concurrent(stream):
                return concurrent_stream(stream)
        raise KeyError(f"the source no longer has a concurrent stream '{name}'")

    return build


_one_build = threading.Lock()


@contextmanager
def _same_api_budget(source: Any) -> Iterator[None]:
    """Keep the source's API budget while it builds its streams again: a budget per stream synced at once would let
    each send the manifest's rate."""
    constructor: Any = getattr(source, "_constructor", None)
    if getattr(constructor, "_api_budget", None) is None or not hasattr(constructor, "set_api_budget"):
        yield  # no budget yet (the first build makes it), or not a declarative source
        return
    constructor.set_api_budget = lambda *args, **kwargs: None  # the instance's, over the class's method
    try:
        yield
    finally:
        del constructor.set_api_budget


@contextmanager
def _handed_out(name: str, namespace: str | None, state: Mapping[str, Any]) -> Iterator[list[bool]]:
    """While this thread builds streams, ``get_stream_state`` returns ``state`` for ``name``; the list says if it was asked."""
    asked: list[bool] = []
    original = ConnectorStateManager.get_stream_state
    thread = threading.get_ident()

    def get_stream_state(manager: ConnectorStateManager, stream_name: str, stream_namespace: str | None) -> MutableMapping[str, Any]:
        if threading.get_ident() == thread and (stream_name, stream_namespace) == (name, namespace):
            asked.append(True)
            return copy.deepcopy(dict(state or {}))
        return original(manager, stream_name, stream_namespace)

    ConnectorStateManager.get_stream_state = get_stream_state  # type: ignore[method-assign, assignment]
    try:
        yield asked
    finally:
        ConnectorStateManager.get_stream_state = original  # type: ignore[method-assign]
