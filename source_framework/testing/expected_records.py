"""Write an expected-records file (Airbyte's JSONL format) from a full-refresh read.

::

    python -m source_framework.testing.expected_records --connector main.py \\
        --config integration_tests/config.json --catalog integration_tests/configured_catalog.json \\
        --per-stream 3 > integration_tests/expected_records.jsonl

Reads every stream of the catalog (or, without ``--catalog``, every discovered stream) in
full refresh, and keeps ``--per-stream`` records of each, spread evenly over the stream (first
and last included). Look the file over before you commit it: it is what ``basic_read`` then
expects to read back.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile

from source_framework.runtime.process import EXIT_OK
from source_framework.testing.catalogs import (
    as_full_refresh,
    from_discovered,
    load_catalog,
    stream_names,
)
from source_framework.testing.connector_reference import ConnectorReference
from source_framework.testing.connector_runs import ConnectorRunner


def spread(items: list, count: int) -> list:
    if count <= 0 or not items:
        return []
    if count >= len(items):
        return list(items)
    return [items[round(k * (len(items) - 1) / max(count - 1, 1))] for k in range(count)]  # first and last included


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--connector", default="main.py", help="script calling launch(), or module:Class")
    parser.add_argument("--config", required=True)
    parser.add_argument("--catalog", help="configured catalog (default: every discovered stream)")
    parser.add_argument("--per-stream", type=int, default=3)
    options = parser.parse_args(argv)

    connector = ConnectorReference.parse(options.connector, base_dir=os.getcwd())
    with tempfile.TemporaryDirectory(prefix="expected-records-") as workdir:
        runner = ConnectorRunner(connector, workdir=workdir)
        config = os.path.abspath(options.config)
        catalog = load_catalog(options.catalog) if options.catalog else from_discovered(runner.discover(config))
        read = runner.read(config, as_full_refresh(catalog), label="full-refresh read")
    for name in stream_names(catalog):
        for message in spread([m for m in read.record_messages() if m["stream"] == name], options.per_stream):
            sys.stdout.write(json.dumps({"stream": name, "data": message["data"], "emitted_at": message["emitted_at"]}) + "\n")
    return EXIT_OK


if __name__ == "__main__":
    sys.exit(main())
