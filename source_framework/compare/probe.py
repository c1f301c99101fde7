"""Run a connector's ``read`` in this process, unpatched, with every record counted as it reaches the destination."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Mapping
from concurrent.futures import Future
from typing import Any

from source_framework.compare.counters import ReadCounters
from source_framework.destinations.base import Destination, StreamSink, StreamTarget, ValuesNotKept
from source_framework.runtime.entrypoint import run_script


class CountingSink(StreamSink):
    """Passes everything to ``inner`` and counts the records; other calls are forwarded so the sink interface may grow."""

    def __init__(self, inner: StreamSink, counters: ReadCounters, slot: int) -> None:
        self._inner, self._counters, self._slot = inner, counters, slot
        # The base's default ("nothing committed") would shadow ``__getattr__``.
        self.earlier_commits = inner.earlier_commits
        if slot < 0:  # a stream nobody counts (the benchmark watches commits only): no cost per record
            self.write = inner.write  # type: ignore[method-assign]
        else:  # the first record is timed, then the counting write takes over: no test per record
            self.write = self._first_write  # type: ignore[method-assign]

    def _first_write(self, record: Mapping[str, Any]) -> None:
        self._counters.mark_first_record()
        self.write = self._counted_write  # type: ignore[method-assign]
        self._counted_write(record)

    def _counted_write(self, record: Mapping[str, Any]) -> None:
        self._inner.write(record)
        self._counters.add(self._slot)

    def write(self, record: Mapping[str, Any]) -> None:
        self._counted_write(record)

    def commit(self, *args: Any, **kwargs: Any) -> Future[Any]:
        # Each commit asked prints one STATE once done: counted to tell how far reading ran ahead.
        self._counters.mark_first_checkpoint(self._slot)
        self._counters.add_checkpoint(self._slot)
        return self._inner.commit(*args, **kwargs)

    def finish(self, *args: Any, **kwargs: Any) -> Future[Any]:
        self._counters.mark_first_checkpoint(self._slot)  # a one-slice stream's only checkpoint
        return self._inner.finish(*args, **kwargs)

    def abort(self) -> None:
        self._inner.abort()

    def values_not_kept(self) -> ValuesNotKept:
        return self._inner.values_not_kept()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


class CountingDestination(Destination):
    def __init__(self, inner: Destination, counters: ReadCounters) -> None:
        self._inner, self._counters = inner, counters

    def reserve(self, streams: Any) -> None:
        self._inner.reserve(streams)

    def open_stream(self, target: StreamTarget) -> StreamSink:
        return CountingSink(self._inner.open_stream(target), self._counters, self._counters.slot(target.name))

    def close(self) -> None:
        self._inner.close()

    def describe(self) -> str:
        return self._inner.describe()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


def counted_read(counters: ReadCounters) -> Any:
    from source_framework.runtime.entrypoint import build_parser, run_read

    def handle(source: Any, args: list[str]) -> None:
        parsed = build_parser().parse_args(args)
        sys.exit(run_read(source, parsed, wrap_destination=lambda inner: CountingDestination(inner, counters)))

    return handle


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(prog="python -m source_framework.compare.probe")
    parser.add_argument("--counters", required=True, help="counters file created by the parent")
    parser.add_argument("--streams", required=True,
                        help="comma-separated stream names, in the file's slot order (\"\": count no records, "
                             "note the first checkpoint only)")
    parser.add_argument("script", help="the connector's entry script, e.g. main.py")
    parser.add_argument("args", nargs=argparse.REMAINDER, help="its arguments, e.g. read --config C --catalog K")
    parsed = parser.parse_args(argv)
    counters = ReadCounters.open(parsed.counters, [s for s in parsed.streams.split(",") if s])
    args = parsed.args[1:] if parsed.args[:1] == ["--"] else parsed.args
    run_script(parsed.script, args, counted_read(counters))


if __name__ == "__main__":
    main(sys.argv[1:])
