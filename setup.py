from setuptools import find_packages, setup

setup(
    name="source_framework",
    version="0.1.0",
    description="Write HTTP API connectors as Airbyte CDK streams; land them in Spark tables with exactly-once checkpoints.",
    packages=find_packages(include=["source_framework", "source_framework.*"]),
    # scaffold/template: what `python -m source_framework init NAME` writes.
    package_data={"source_framework": ["demo/schemas/*.json", "demo/spec.json", "scaffold/template/*", "scaffold/template/*/*"]},
    python_requires=">=3.11",
    install_requires=[
        "airbyte-cdk>=7,<8",
        # [connect]: the Spark Connect client (grpcio, zstandard, pandas, ...), for sc:// masters.
        # 4.2.x: Delta Lake's newest release (delta-spark 4.4) is built for Spark 4.2, not 4.3.
        "pyspark[connect]>=4.2.1,<4.3",
        # Delta Lake tables (table_format: delta), written and read by this process without a JVM:
        # delta-rs, the Delta protocol's Rust implementation (app transactions, MERGE, VACUUM).
        "deltalake>=1.6.6,<2",
        # Spark DataFrames are built from Arrow tables, never row by row (25: per-key null placement in sorts).
        "pyarrow>=25",
        "requests>=2.31,<3",
        # The demo API serialises pages and the runtime writes protocol lines with it: 5-10x faster than json.
        "orjson>=3.9,<4",
        # The acceptance runner reads acceptance-test-config.yml itself, and checks it against
        # CAT's schema written as pydantic models (pydantic also comes with airbyte-cdk).
        "PyYAML>=6",
        "pydantic>=2",
        # The live progress table of `read` on a terminal: redraws in place, keeps log lines above it.
        "rich>=13",
    ],
    extras_require={
        # The tools, each with what it needs (a connector's own command line needs none of them):
        # python -m source_framework.compare draws its throughput / records-at-risk chart (PNG, Agg backend);
        "compare": ["matplotlib>=3.8,<4"],
        # python -m source_framework.testing runs the acceptance suites with pytest.
        "testing": ["pytest>=8,<10"],
        # Our own test suite: the tools' needs, hypothesis for the state workflow's property test,
        # and the style and type checks scripts/test.sh runs first (pinned: new rules land in minors).
        "tests": [
            "pytest>=8,<10",
            # Two test processes share the 2-core machine: the suite waits on processes, the JVM and
            # the network more than it computes (one Spark session per worker, not per test).
            "pytest-xdist>=3.6,<4",
            "matplotlib>=3.8,<4",
            "hypothesis>=6.100",
            "ruff>=0.17,<0.18",
            "mypy>=2.4,<2.5",
            # The docs site (mkdocs.yml, docs/): scripts/test.sh builds it with --strict, so a broken link,
            # a missing anchor or a page left out of the nav fails the run as a failing test does.
            "mkdocs>=1.6,<1.7",
            # A local S3 server on 127.0.0.1 (conditional writes included) for the object-store tests.
            "moto[server]>=5.1,<6",
            # A connector other people wrote, published by Airbyte, that runs without a network: the
            # conformance suite runs it unchanged under both entrypoints (tests only, not the product).
            "airbyte-source-hardcoded-records==0.0.48",
            # A reader of Delta tables through their log, for the reader matrix (test_delta_readers.py).
            "polars==2.1.0",
        ],
    },
    entry_points={"console_scripts": ["source-framework-demo-api=source_framework.demo.api.__main__:main"]},
)
