"""Command line: serve the demo API from its own process until SIGINT or SIGTERM.

Why: connector runs in a separate process (or another machine's container) need a source to
talk to; with the same knobs this process serves byte-identical data to an embedded DemoApi.
Only one line goes to stderr, announcing the URL; stdout stays empty.
"""

from __future__ import annotations

import argparse
import dataclasses
import signal
import sys
import threading
from collections.abc import Sequence

from source_framework.demo.api.faults import Faults
from source_framework.demo.api.server import DemoApi


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m source_framework.demo.api", description=__doc__)
    parser.add_argument("--host", default="127.0.0.1", help="interface to bind (default 127.0.0.1)")
    parser.add_argument("--port", type=int, default=8000, help="port to bind; 0 picks a free one")
    parser.add_argument("--records", type=int, default=10_000, help="users and orders count")
    parser.add_argument("--seed", type=int, default=42)
    parser.add_argument("--stores", type=int, default=10)
    parser.add_argument("--api-key", default=None, help="require 'Authorization: Bearer KEY' on data endpoints")
    parser.add_argument("--generation", type=int, default=0, help="touch rounds applied at start-up")
    parser.add_argument("--touch-count", type=int, default=None, help="records per touch round (default records // 100)")
    parser.add_argument("--rate-limit-every", type=int, default=0, help="every Nth data request answers 429")
    parser.add_argument("--retry-after", type=float, default=1, help="seconds advertised in Retry-After")
    parser.add_argument("--error-every", type=int, default=0, help="every Nth data request answers 500/503")
    parser.add_argument("--delay-ms", type=int, default=0, help="latency added to each data request")
    parser.add_argument("--unsorted-pages", action="store_true", help="reverse records within /users pages")
    parser.add_argument("--verbose", action="store_true", help="log requests to stderr")
    parser.add_argument("--cache-pages", action="store_true",
                        help="serve a request seen before from memory (the benchmark: measure the client, not the API)")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    options = vars(args).copy()
    try:
        faults = Faults(**{field.name: options.pop(field.name) for field in dataclasses.fields(Faults)})
        api = DemoApi(faults=faults, **options)
    except ValueError as error:
        print(f"demo API: {error}", file=sys.stderr)
        return 2

    stopping = threading.Event()

    def request_stop(signum: int, frame: object) -> None:
        stopping.set()

    signal.signal(signal.SIGINT, request_stop)
    signal.signal(signal.SIGTERM, request_stop)
    try:
        api.start()
    except OSError as error:
        print(f"demo API: cannot listen on {args.host}:{args.port}: {error}", file=sys.stderr)
        return 1
    print(f"demo API listening on {api.url}", file=sys.stderr, flush=True)
    try:
        while not stopping.wait(0.5):
            pass
    finally:
        api.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
