"""The reads the acceptance checks need, each run once; only the two Spark reads start Spark (each its own JVM)."""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Mapping, Sequence
from contextlib import closing
from typing import Any

from source_framework.runtime.process import EXIT_OK
from source_framework.testing.acceptance_config import (
    AcceptanceConfig,
    IncrementalEntry,
    ReadEntry,
)
from source_framework.testing.catalogs import (
    StreamInfo,
    as_full_refresh,
    from_discovered,
    incremental_only,
    load_catalog,
    stream_infos,
)
from source_framework.testing.connector_runs import ConnectorRunError, ConnectorRunner, ReadOutput


class AcceptanceReads:
    def __init__(self, runner: ConnectorRunner, config: AcceptanceConfig, spark_master: str | None = None) -> None:
        self.runner = runner
        self.config = config
        self.spark_master = spark_master
        self._cache: dict[tuple[Any, ...], Any] = {}

    def _once(self, key: tuple[Any, ...], make: Any) -> Any:
        if key not in self._cache:
            try:
                self._cache[key] = make()
            except AssertionError as error:
                self._cache[key] = error
        value = self._cache[key]
        if isinstance(value, AssertionError):
            raise value
        return value

    def catalog(self, entry: Any) -> dict[str, Any]:
        """The entry's configured catalog or, without one, CAT's default built from the discovered streams."""
        if entry.configured_catalog_path:
            return load_catalog(entry.configured_catalog_path)
        discovered = self._once(
            ("discover", entry.config_path),
            lambda: self.runner.discover(entry.config_path, timeout=entry.timeout_seconds),
        )
        catalog = from_discovered(discovered, without=tuple(getattr(entry, "empty_streams", ())))
        return incremental_where_supported(catalog) if isinstance(entry, IncrementalEntry) else catalog

    def full_refresh_catalog(self, entry: ReadEntry) -> dict[str, Any]:
        return as_full_refresh(self.catalog(entry))

    def incremental_catalog(self, entry: IncrementalEntry) -> dict[str, Any]:
        return incremental_only(self.catalog(entry))

    def incremental_streams(self, entry: IncrementalEntry) -> dict[str, StreamInfo]:
        return stream_infos(self.incremental_catalog(entry))

    def _read(self, tag: str, entry: Any, catalog: Mapping[str, Any], state: Sequence[Any] | None = None) -> ReadOutput:
        key = (tag, entry.config_path, json.dumps(catalog, sort_keys=True), json.dumps(state, sort_keys=True))
        return self._once(
            key,
            lambda: self.runner.read(
                entry.config_path, catalog, state=state, timeout=entry.timeout_seconds, label=f"{tag} ({entry.id})"
            ),
        )

    def basic_read(self, entry: ReadEntry) -> ReadOutput:
        return self._read("full-refresh read", entry, self.full_refresh_catalog(entry))

    def second_full_refresh_read(self, entry: ReadEntry) -> ReadOutput:
        return self._read("second full-refresh read", entry, self.full_refresh_catalog(entry))

    def incremental_first(self, entry: IncrementalEntry) -> ReadOutput:
        return self._read("first incremental read", entry, self.incremental_catalog(entry))

    def incremental_second(self, entry: IncrementalEntry) -> ReadOutput:
        state = self.incremental_first(entry).final_state_list()
        return self._read("second incremental read", entry, self.incremental_catalog(entry), state)

    def from_state(self, entry: IncrementalEntry, state: list[dict[str, Any]]) -> ReadOutput:
        return self._read("read from an intermediate state", entry, self.incremental_catalog(entry), state)

    def future_state(self, entry: IncrementalEntry, state: list[dict[str, Any]]) -> ReadOutput:
        return self._read("read from the future state", entry, self.incremental_catalog(entry), state)

    def reference_read(self, entry: IncrementalEntry) -> ReadOutput:
        return self._read("reference read to stdout", entry, self.catalog(entry))

    def _spark_flags(self, entry: IncrementalEntry) -> list[str]:
        extra = ["--spark-master", self.spark_master] if self.spark_master else []
        return ["--destination", "spark", "--warehouse", self.spark_warehouse(entry), *extra]

    def _spark_read(self, tag: str, entry: IncrementalEntry, state: list[Any] | None) -> ReadOutput:
        """A sync into Spark tables: in this process when a Spark session already runs here (no JVM per sync), else a subprocess."""
        catalog = self.catalog(entry)
        if _spark_runs_here() and not self.runner.env:
            return self._spark_read_in_process(tag, entry, catalog, state)
        args = ["read", "--config", entry.config_path, "--catalog", self.runner.write_json("catalog", catalog)]
        if state is not None:
            args += ["--state", self.runner.write_json("state", state)]
        args += self._spark_flags(entry)
        return self.runner.run(args, timeout=entry.timeout_seconds, label=f"{tag} ({entry.id})")

    def _spark_read_in_process(
        self, tag: str, entry: IncrementalEntry, catalog: Mapping[str, Any], state: list[Any] | None
    ) -> ReadOutput:
        from source_framework.testing.in_process import read

        output = read(
            self.runner.connector.load_source(), _load_json(entry.config_path), catalog, state,
            args=self._spark_flags(entry), workdir=self.runner.workdir,
        )
        output.label = f"{tag} ({entry.id}, in this process)"
        if output.returncode != EXIT_OK:
            raise ConnectorRunError(f"{output.label} exited with {output.returncode}: {output.errors()}")
        return output

    def spark_warehouse(self, entry: IncrementalEntry) -> str:
        return os.path.join(self.runner.workdir, "warehouse-" + entry.id.replace(":", "-").replace(".", "-"))

    def spark_destination(self, entry: IncrementalEntry) -> Any:
        """The Spark destination the Spark reads write with, built by ``read``'s own code: it alone says where a table is."""
        from source_framework.runtime.destination_setup import spark_destination
        from source_framework.runtime.entrypoint import build_parser

        # The catalog does not place tables; read's parser wants one all the same.
        argv = ["read", "--config", entry.config_path, "--catalog", os.devnull, *self._spark_flags(entry)]
        source = self.runner.connector.load_source()
        return spark_destination(source, _load_json(entry.config_path), build_parser().parse_args(argv))

    def spark_first(self, entry: IncrementalEntry, snapshot: Callable[[Any], Any]) -> tuple[ReadOutput, Any]:
        return self._spark_sync("first sync into Spark", entry, None, snapshot)

    def spark_rerun(self, entry: IncrementalEntry, snapshot: Callable[[Any], Any]) -> tuple[ReadOutput, Any]:
        first, _ = self.spark_first(entry, snapshot)
        return self._spark_sync("rerun into Spark", entry, first.final_state_list(), snapshot)

    def _spark_sync(
        self, tag: str, entry: IncrementalEntry, state: list[Any] | None, snapshot: Callable[[Any], Any]
    ) -> tuple[ReadOutput, Any]:
        """Once per entry: the sync, and ``snapshot`` of the destination it wrote."""

        def run() -> tuple[ReadOutput, Any]:
            output = self._spark_read(tag, entry, state)
            with closing(self.spark_destination(entry)) as destination:
                return output, snapshot(destination)

        return self._once((tag, entry.id), run)


def _load_json(path: str) -> Any:
    with open(path, encoding="utf-8") as handle:
        return json.load(handle)


def _spark_runs_here() -> bool:
    try:
        from pyspark import SparkContext
    except ImportError:
        return False
    return SparkContext._active_spark_context is not None


def incremental_where_supported(catalog: Mapping[str, Any]) -> dict[str, Any]:
    """``catalog`` with incremental-capable streams read incrementally: CAT's default catalog for an incremental test."""
    streams = []
    for configured in catalog["streams"]:
        stream = configured["stream"]
        if "incremental" in (stream.get("supported_sync_modes") or []):
            configured = {
                **configured,
                "sync_mode": "incremental",
                "destination_sync_mode": "append",
                "cursor_field": list(stream.get("default_cursor_field") or []),
            }
        streams.append(configured)
    return {"streams": streams}
