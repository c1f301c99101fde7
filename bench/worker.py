"""One in-process measurement, run in its own child process by ``bench/run.py``.

::

    python -m bench.worker framework-null --config C --catalog K --result R.json
    python -m bench.worker cdk-devnull    --config C --catalog K --result R.json
    python -m bench.worker bare-requests  --config C --catalog K --result R.json
    python -m bench.worker cdk-declarative --config C --catalog K --result R.json

- ``framework-null``: our runtime's ``read_streams`` over the demo streams into a destination
  that drops records (``null_destination``); protocol lines go to /dev/null.
- ``cdk-devnull``: airbyte-cdk's own ``launch(DemoSource(), ["read", ...])`` with stdout on
  /dev/null (RECORD lines counted on the way out).
- ``cdk-declarative``: airbyte-cdk's declarative engine on ``bench/manifests/orders.yaml`` (the
  orders stream as a low-code manifest), concurrency from the config's ``concurrency_level``.
- ``bare-requests``: the same pages with a plain ``requests`` session, each parsed once with
  ``orjson`` (``page_json``), at the garbage collector's pace our read sets: the stream objects
  only say which URL and parameters come next. The ceiling for one client.

Each writes ``{"records", "seconds", "states", "python_peak_mb"}`` to ``--result``. ``seconds``
covers the reading only (not the interpreter start or imports), as for every case.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections.abc import Callable
from typing import Any


def framework_null(config: dict[str, Any], catalog_path: str) -> dict[str, Any]:
    from bench.null_destination import NullDestination
    from source_framework.demo import DemoSource
    from source_framework.runtime.inputs import load_catalog
    from source_framework.runtime.output import ProtocolOutput
    from source_framework.runtime.read import read_streams
    from source_framework.runtime.stream_adapters import adapt

    catalog = load_catalog(catalog_path)
    streams = {stream.name: stream for stream in DemoSource().streams(config)}
    adapters = {c.stream.name: adapt(streams[c.stream.name], c) for c in catalog.streams}
    with open(os.devnull, "wb") as null:
        output = ProtocolOutput(null)
        started = time.perf_counter()
        result = read_streams(adapters, catalog, {}, NullDestination(), output,
                              concurrency=config.get("concurrency_level", 4))
        output.flush()
        seconds = time.perf_counter() - started
    failed = [f"{s.name}: {s.error!r}" for s in result.streams if s.error]
    if failed:
        raise RuntimeError(f"streams failed: {failed}")
    return {"records": sum(s.records for s in result.streams), "seconds": seconds,
            "states": sum(s.states for s in result.streams)}


class _CountingNull:
    """stdout for the CDK: counts RECORD and STATE lines, writes them to /dev/null."""

    def __init__(self) -> None:
        self._null = open(os.devnull, "w")
        self.records = 0
        self.states = 0

    def write(self, text: str) -> int:
        # The CDK's print buffer hands over whole lines, many at a time.
        self.records += text.count('{"type":"RECORD"')
        self.states += text.count('{"type":"STATE"')
        return self._null.write(text)

    def flush(self) -> None:
        self._null.flush()

    def isatty(self) -> bool:
        return False


def cdk_devnull(config_path: str, catalog_path: str) -> dict[str, Any]:
    from airbyte_cdk.entrypoint import launch

    from source_framework.demo import DemoSource

    sink = _CountingNull()
    # The CDK prints through its PrintBuffer, which writes to sys.__stdout__.
    real = sys.stdout, sys.__stdout__
    sys.stdout = sys.__stdout__ = sink  # type: ignore[misc]
    try:
        started = time.perf_counter()
        launch(DemoSource(), ["read", "--config", config_path, "--catalog", catalog_path])
        seconds = time.perf_counter() - started
    finally:
        sys.stdout, sys.__stdout__ = real  # type: ignore[misc]
    return {"records": sink.records, "seconds": seconds, "states": sink.states}


MANIFEST = os.path.join(os.path.dirname(os.path.abspath(__file__)), "manifests", "orders.yaml")


def cdk_declarative(config: dict[str, Any], config_path: str, catalog_path: str) -> dict[str, Any]:
    """airbyte-cdk's declarative engine on ``manifests/orders.yaml`` (its concurrency is the
    config's ``concurrency_level``), built as manifest-only connectors build it, to /dev/null."""
    from airbyte_cdk.entrypoint import launch
    from airbyte_cdk.sources.declarative.yaml_declarative_source import YamlDeclarativeSource

    from source_framework.runtime.inputs import load_catalog

    source = YamlDeclarativeSource(path_to_yaml=MANIFEST, config=config, catalog=load_catalog(catalog_path), state=None)
    sink = _CountingNull()
    real = sys.stdout, sys.__stdout__
    sys.stdout = sys.__stdout__ = sink  # type: ignore[misc]
    try:
        started = time.perf_counter()
        launch(source, ["read", "--config", config_path, "--catalog", catalog_path])
        seconds = time.perf_counter() - started
    finally:
        sys.stdout, sys.__stdout__ = real  # type: ignore[misc]
    return {"records": sink.records, "seconds": seconds, "states": sink.states}


def bare_requests(config: dict[str, Any], catalog_path: str) -> dict[str, Any]:
    import requests

    from source_framework.demo import DemoSource
    from source_framework.runtime.inputs import load_catalog
    from source_framework.runtime.process import gc_for_streaming
    from source_framework.streams.responses import page_json

    catalog = load_catalog(catalog_path)
    streams = {stream.name: stream for stream in DemoSource().streams(config)}
    session = requests.Session()
    session.headers["Authorization"] = f"Bearer {config['api_key']}"
    records = pages = 0
    with gc_for_streaming():  # the collector's pace our read runs at: a ceiling no setting of ours beats
        started = time.perf_counter()
        for configured in catalog.streams:
            stream = streams[configured.stream.name]
            slices = stream.stream_slices(sync_mode=configured.sync_mode, cursor_field=configured.cursor_field, stream_state={})
            for stream_slice in slices:
                token = None
                while True:
                    params = stream.request_params(stream_state={}, stream_slice=stream_slice, next_page_token=token)
                    response = session.get(stream.url_base + stream.path(stream_slice=stream_slice), params=params, timeout=60)
                    response.raise_for_status()
                    # Parsed once with orjson and kept on the response, where the stream's own paging
                    # rule (``next_page_token``) finds it: one parse a page, as in our read.
                    for _record in page_json(response)["data"]:
                        records += 1
                    pages += 1
                    token = stream.next_page_token(response)
                    if not token:
                        break
        seconds = time.perf_counter() - started
    return {"records": records, "seconds": seconds, "states": 0, "pages": pages}


CASES: dict[str, Callable[[argparse.Namespace, dict[str, Any]], dict[str, Any]]] = {
    "framework-null": lambda args, config: framework_null(config, args.catalog),
    "cdk-devnull": lambda args, config: cdk_devnull(args.config, args.catalog),
    "bare-requests": lambda args, config: bare_requests(config, args.catalog),
    "cdk-declarative": lambda args, config: cdk_declarative(config, args.config, args.catalog),
}


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.worker")
    parser.add_argument("case", choices=sorted(CASES))
    parser.add_argument("--config", required=True)
    parser.add_argument("--catalog", required=True)
    parser.add_argument("--result", required=True)
    args = parser.parse_args(argv)
    with open(args.config) as handle:
        config = json.load(handle)
    result = CASES[args.case](args, config)
    from bench.memory import self_peak_mb

    result["python_peak_mb"] = self_peak_mb()
    with open(args.result, "w") as handle:
        json.dump(result, handle)


if __name__ == "__main__":
    main(sys.argv[1:])
