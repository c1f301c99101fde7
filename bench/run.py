"""The benchmark: the framework, airbyte-cdk and a bare HTTP loop against the demo API, side by side.

::

    python bench/run.py                                   # 200,000 records, 3 repetitions
    python bench/run.py --records 50000 --repeat 2
    python bench/run.py --records 1000000,4000000 --cases full-slice --repeat 1   # memory growth
    python bench/run.py --streams users,orders --json /tmp/bench.json
    python bench/run.py --latency-ms 100 --page-size 100 --records 100000 --repeat 1 \
        --cases full-slice-c1,full-slice-c8,cdk-declarative-c8      # a slow API: concurrency

It starts the demo API (its own process) with N users and N orders, then runs every case once
per repetition, interleaved (the order rotates each repetition), each in a fresh process:

1. ``framework-null``: our read loop over the same streams, records dropped;
2. ``cdk-devnull``: airbyte-cdk's own entrypoint reading the same source to /dev/null;
3. ``bare-requests``: a plain requests + orjson loop over the same pages;
4. ``cdk-declarative-c<N>``: airbyte-cdk's declarative engine on ``bench/manifests/orders.yaml``
   (orders as a low-code manifest) at ``concurrency_level`` N, to /dev/null;
5. ``full-slice-c<N>``: ``main.py read`` into Spark at slice checkpoints, N slices at once;
   ``full-10000``, ``full-1000``, ``full-100``: the same, one slice at a time, at those
   ``state_checkpoint_interval`` values (all in the run's table format, Delta by default);
   ``parquet-slice``, ``parquet-100``: into Parquet folders; ``spark-writer-slice``: into Delta
   by Spark's Delta writer (``writer: spark``);
6. ``dlt-delta``: dlt's ``filesystem`` destination with ``table_format="delta"`` over the same
   orders pages, in a virtual environment of its own (``bench/dlt_case.py``; made on first use).

It prints medians of records/s, the ratios between cases against the issue's targets, Spark
commits and data files, and the peak memory of the Python process and the Spark JVM; the same
goes to JSON (default ``bench/results/bench-<N>.json``). Not a test: run it on a quiet machine.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from collections.abc import Sequence

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if ROOT not in sys.path:  # run as a script: make the repository importable
    sys.path.insert(0, ROOT)

from bench.api_process import DemoApiProcess  # noqa: E402
from bench.cases import BenchEnv, Case, Measurement, all_cases, remove_warehouses  # noqa: E402
from bench.cpu import children_cpu_seconds  # noqa: E402
from bench.dlt_case import DltDeltaCase  # noqa: E402
from bench.report import BenchReport, memory_growth, memory_growth_text  # noqa: E402

API_KEY = "bench-api-key-8c21"
CATALOG = os.path.join(ROOT, "integration_tests", "configured_catalog.json")


def parse_args(argv: Sequence[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python bench/run.py", description=__doc__.split("\n\n")[0])
    parser.add_argument("--records", default="200000",
                        help="users and orders the API serves (default 200000); a comma list runs the benchmark per count")
    parser.add_argument("--repeat", type=int, default=3, help="interleaved repetitions; medians are reported (default 3)")
    parser.add_argument("--streams", default="orders", help="streams to read (default orders: monthly slices)")
    parser.add_argument("--page-size", type=int, default=1000, help="records per API page (1-1000, default 1000)")
    parser.add_argument("--cases", help="comma-separated subset of: " + ",".join(c.name for c in [*all_cases(), DltDeltaCase()]))
    parser.add_argument("--latency-ms", type=int, default=0, help="the API waits this long before each page (default 0)")
    parser.add_argument("--generate-pages", action="store_true",
                        help="the API builds every page anew (default: pages are served from memory once the warm-up "
                             "pass has seen them, so the API answers at once and the client is what is measured)")
    parser.add_argument("--concurrency", default="1,4,8",
                        help="concurrency levels of the -c<N> cases (ours and airbyte-cdk's declarative; default 1,4,8)")
    parser.add_argument("--spark-master", help="Spark master for the full syncs (default: the runtime's, local[*])")
    parser.add_argument("--table-format", choices=("delta", "parquet"), default=None,
                        help="the full syncs' table format (the destination's table_format; default: the runtime's)")
    parser.add_argument("--writer", choices=("auto", "arrow", "spark"), default="auto",
                        help="who writes the full syncs' commits (the destination's writer setting; default auto)")
    parser.add_argument("--json", help="results file (default bench/results/bench-<records>.json)")
    parser.add_argument("--workdir", help="scratch folder for warehouses and logs (default: a temporary folder)")
    return parser.parse_args(argv)


def main(argv: Sequence[str]) -> int:
    args = parse_args(argv)
    counts = [int(text.replace("_", "")) for text in args.records.split(",") if text.strip()]
    levels = tuple(int(text) for text in args.concurrency.split(",") if text.strip())
    cases = select_cases([*all_cases(args.spark_master, levels), DltDeltaCase()], args.cases)
    streams = [s.strip() for s in args.streams.split(",") if s.strip()]
    reports = []
    warehouses: list[str] = []  # removed at the very end: see ``BenchEnv.new_warehouse``
    try:
        for records in counts:
            report = run_benchmark(records, cases, streams, args, warehouses)
            sys.stdout.write(report.text())
            path = args.json or os.path.join(ROOT, "bench", "results", f"bench-{records}.json")
            if len(counts) > 1 and args.json:
                path = f"{os.path.splitext(args.json)[0]}-{records}.json"
            write_json(path, report.to_json())
            sys.stdout.write(f"(written to {path})\n\n")
            reports.append(report)
    finally:
        remove_warehouses(warehouses)
    growth = memory_growth(reports)
    if growth:
        sys.stdout.write(memory_growth_text(growth))
        write_json(os.path.join(os.path.dirname(path), "memory-growth.json"), growth)
    return 0


def select_cases(cases: list[Case], names: str | None) -> list[Case]:
    if not names:
        return cases
    wanted = [n.strip() for n in names.split(",") if n.strip()]
    unknown = set(wanted) - {c.name for c in cases}
    if unknown:
        raise SystemExit(f"unknown case(s): {', '.join(sorted(unknown))}")
    return [c for c in cases if c.name in wanted]


def run_benchmark(records: int, cases: list[Case], streams: list[str], args: argparse.Namespace,
                  warehouses: list[str]) -> BenchReport:
    workdir = args.workdir or tempfile.mkdtemp(prefix=f"bench-{records}-")
    os.makedirs(workdir, exist_ok=True)
    measurements: dict[str, list[Measurement]] = {c.name: [] for c in cases}
    log(f"starting the demo API with {records:,} records")
    with DemoApiProcess(records=records, api_key=API_KEY, delay_ms=args.latency_ms, cache_pages=not args.generate_pages) as api:
        env = BenchEnv(root=ROOT, workdir=workdir, base_config=base_config(api.url, args.page_size, args.writer, args.table_format),
                       catalog_path=write_catalog(workdir, streams), streams=streams, warehouses=warehouses)
        log("warm-up: one bare pass over the pages (not counted)")
        next(c for c in all_cases() if c.name == "bare-requests").run(env)
        for repetition in range(args.repeat):
            shift = repetition % len(cases)
            for case in cases[shift:] + cases[:shift]:  # rotate, so no case always runs first or last
                started = time.perf_counter()
                cpu_before, api_before = children_cpu_seconds(), api.cpu_seconds()
                measurement = case.run(env)
                api_after = api.cpu_seconds()
                measurement.cpu_seconds = children_cpu_seconds() - cpu_before
                measurement.api_cpu_seconds = None if api_before is None or api_after is None else api_after - api_before
                measurements[case.name].append(measurement)
                log(f"rep {repetition + 1}/{args.repeat} {case.name:<15} {measurement.records_per_second:>10,.0f} rec/s "
                    f"({measurement.records:,} records, {measurement.seconds:.2f}s; process {time.perf_counter() - started:.1f}s)")
    settings = {"streams": streams, "page_size": args.page_size, "repeat": args.repeat, "cpus": os.cpu_count(),
                "latency_ms": args.latency_ms, "pages_cached": not args.generate_pages,
                "spark_master": args.spark_master or "local[*]", "writer": args.writer,
                "table_format": args.table_format, "workdir": workdir}
    return BenchReport(records, measurements, {c.name: c.label for c in cases}, settings)


def base_config(api_url: str, page_size: int, writer: str = "auto", table_format: str | None = None) -> dict:
    return {"api_key": API_KEY, "api_url": api_url, "start_date": "2025-01-01T00:00:00Z", "page_size": page_size,
            "destination": {"type": "spark", "writer": writer, **({"table_format": table_format} if table_format else {})}}


def write_catalog(workdir: str, streams: list[str]) -> str:
    with open(CATALOG) as handle:
        catalog = json.load(handle)
    chosen = [entry for entry in catalog["streams"] if entry["stream"]["name"] in streams]
    missing = set(streams) - {entry["stream"]["name"] for entry in chosen}
    if missing:
        raise SystemExit(f"unknown stream(s): {', '.join(sorted(missing))}")
    path = os.path.join(workdir, "catalog.json")
    with open(path, "w") as handle:
        json.dump({"streams": chosen}, handle)
    return path


def write_json(path: str, content: dict) -> None:
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    with open(path, "w") as handle:
        json.dump(content, handle, indent=2)


def log(message: str) -> None:
    sys.stderr.write(f"[bench {time.strftime('%H:%M:%S')}] {message}\n")
    sys.stderr.flush()


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
