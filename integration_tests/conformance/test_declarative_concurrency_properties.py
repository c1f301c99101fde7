"""Concurrent reading of declarative sources as a property (Hypothesis): whatever the concurrency,
the order in which partitions finish fetching and where a sync is killed, the state a killed sync
of a YAML-manifest connector left is covered by its tables, no table holds a record twice, and the
sync resumed after it (with a NEW source built with that state, at another concurrency) leaves in
each table exactly the records airbyte-cdk's own ``read`` of the connector lands, once each.

``test_concurrency_properties.py`` states the same of our own stream classes. Sources on
airbyte-cdk's concurrent framework differ where it matters for a resume: their streams are
``DefaultStream``s whose cursors take the state when the source is constructed (a user's
``run.py`` builds the source with ``--state``), their partitions are closed by airbyte-cdk's
cursors, and the per-partition state of a ``SubstreamPartitionRouter`` is airbyte-cdk's, not ours.
Four connectors of the conformance suite cover the shapes:

- ``declarative_datetime``: ``DatetimeBasedCursor`` date windows, two incremental streams, a
  manifest ``concurrency_level`` of 2 (which caps what the config asks for);
- ``declarative_substream``: ``SubstreamPartitionRouter`` + a cursor per store (per-partition
  state), next to two full-refresh streams that replace their tables at the end;
- ``declarative_global_substream``: the same with ``global_substream_cursor``, one cursor for
  every store, which moves only once all of them are read (a kill before re-reads every store,
  and the tables' look-up keeps what they hold from being written twice);
- ``declarative_incremental_parent``: a cursor per store and, with ``incremental_dependency``,
  the parent's (incremental) cursor kept in the child's state.

The concurrency of the killed sync is the config's ``concurrency_level`` (as a process started
with airbyte-cdk's command line gets it, ``harness.ours_config``); the resumed one's is
``--concurrency``. Each API request waits a drawn time, so partitions read ahead finish fetching in
an order of the example's drawing. A kill is a ``SimulatedCrash`` at one of the runtime's fault
points (from then on every fault point raises, so queued commits are abandoned); a kill point
never reached that often leaves a completed sync, which must end the same. The killed run's
printed lines are kept (the ``output`` the crash carries out of ``testing.read``), as an orchestrator keeps the
STATEs of a process that died; the resume starts either from those STATEs (``--state``) or from
the state file the killed run kept (``--state-file``): what a user has either way.
"""

from __future__ import annotations

import copy
import json
import threading
import time
from collections import Counter
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from itertools import pairwise
from pathlib import Path
from typing import Any

import conformance_harness as harness
import pytest
from airbyte_cdk.sources.declarative import concurrent_declarative_source as declarative
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from source_framework.destinations.spark.destination import SparkDestination
from source_framework.helpers.faults import SimulatedCrash, crash_at
from source_framework.streams.cursor import parse_datetime
from source_framework.testing import read
from source_framework.testing.table_checks import record_rows

pytestmark = pytest.mark.slow

# The points of a commit into a Delta table, the default (the Parquet folder's "commit.record_written"
# is not among them: a Delta commit is one transaction; the Parquet folder's kills are in
# test_crash_recovery.py and test_state_workflow_properties.py).
KILLS = ["commit.start", "commit.files_written", "commit.done", "state.printed"]
CONNECTORS = ("declarative_datetime", "declarative_substream", "declarative_global_substream",
              "declarative_incremental_parent")
#: per stream with a partition router: the partition's field in the state, the record's field naming it
PARTITIONS = {"store_orders": ("store_id", "storeId")}
#: cursor fields other than ``updatedAt``, and their start: the stores of ``declarative_incremental_parent``
CURSORS = {"stores": "openedAt"}
STARTS = {"stores": "2000-01-01T00:00:00Z"}
#: the partition key of airbyte-cdk's global substream cursor (``global_substream_cursor``): it covers all
ALL_PARTITIONS = "*"


class PacedApi(harness.ShopApi):
    """The conformance API whose requests each wait ``waits[n % len(waits)]`` ms (n counting every
    request), so the partitions read at once finish fetching in an order of the example's drawing."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.waits: tuple[int, ...] = (0,)
        self._asked = 0
        self._asked_lock = threading.Lock()

    def respond(self, method: str, target: str, headers: Any, body: bytes) -> Any:
        with self._asked_lock:
            self._asked += 1
            wait = self.waits[self._asked % len(self.waits)]
        time.sleep(wait / 1000)
        return super().respond(method, target, headers, body)


class Connector:
    """One connector against an API of its own, and what airbyte-cdk's own ``read`` of it lands.
    (A plain class: Hypothesis prints a dataclass fixture field by field with a failing example.)"""

    def __init__(self, style: str) -> None:
        self.style = style
        #: the folder of its tables in a warehouse: the source's name
        self.namespace = str(harness.connector(style).build_source(None, None, None).name)
        self.api = PacedApi(records=harness.RECORDS, api_key=harness.API_KEY, seed=harness.SEED, stores=harness.STORES)
        self.api.start()
        try:
            config = harness.source_config(self.api)
            self.catalog = harness.configured_catalog(style, config)
            self.infos = harness.infos(self.catalog)
            self.reference = harness.cdk_read(style, config, self.catalog)
            assert self.reference.ok() and self.reference.records(), self.reference.describe()
            #: the reference's records of each stream as the comparable rows a table read back gives
            self.expected = {name: record_rows(self.reference.records(name), info) for name, info in self.infos.items()}
            for name, rows in self.expected.items():  # else "exactly once" would prove little
                assert rows and max(rows.values()) == 1, f"airbyte-cdk's own read lands {name} records twice, or none"
        except BaseException:
            self.api.stop()
            raise

    def __repr__(self) -> str:
        return f"Connector({self.style!r})"

    def config(self, warehouse: str, concurrency: int) -> dict[str, Any]:
        return harness.ours_config(self.api, warehouse, concurrency)

    def tables(self, spark: Any, warehouse: str) -> tuple[SparkDestination, dict[str, Counter | None]]:
        """The warehouse's tables read back as comparable rows (``harness.landed_tables`` without building a source
        each time), and the destination that finds them."""
        destination = SparkDestination(warehouse, default_namespace=self.namespace)
        return destination, harness.landed(spark, destination, self.infos)


@pytest.fixture(scope="module")
def connectors() -> Iterator[dict[str, Connector]]:
    """Each connector with its API (the data of ``harness.start_api``, never touched) and
    airbyte-cdk's read of it, once for all examples."""
    # Each declarative source parses airbyte-cdk's component schema (a YAML file of the package)
    # again as it is constructed: 0.3 s, a third of a sync here, where every sync builds a source.
    # Parsed once; each source gets a copy of its own, as if it had parsed the file itself.
    schema = declarative.get_declarative_component_schema()
    built: dict[str, Connector] = {}
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(declarative, "get_declarative_component_schema", lambda: copy.deepcopy(schema))
        try:
            for style in CONNECTORS:
                built[style] = Connector(style)
            yield built
        finally:
            for connector in built.values():
                connector.api.stop()


# --- running ours as a user's run.py would, in this process --------------------------------------


@dataclass
class Sync:
    """What one ``read`` of ours printed, and its exit code (None: killed)."""

    messages: list[dict[str, Any]]
    returncode: int | None

    def states(self) -> list[dict[str, Any]]:
        return [m["state"] for m in self.messages if m.get("type") == "STATE"]

    def last_states(self) -> dict[str, dict[str, Any]]:
        """Each stream's last printed state: what an orchestrator keeps of a run."""
        return {s["stream"]["stream_descriptor"]["name"]: s["stream"]["stream_state"] for s in self.states()}

    def errors(self) -> list[str]:
        return [json.dumps(m["trace"]["error"])[:2000] for m in self.messages
                if m.get("type") == "TRACE" and m["trace"].get("type") == "ERROR"]


def sync(connector: Connector, config: Mapping[str, Any], state: list[dict[str, Any]] | None, args: Sequence[str],
         folder: Path) -> Sync:
    """``read`` of a source built, as the connector's ``run.py`` builds it, with ``state``; killed
    (``returncode`` None), the lines it printed before the kill, as an orchestrator holds them."""
    source = harness.build_source(connector.style, config, connector.catalog, state)
    try:
        output = read(source, config, connector.catalog, args=args, workdir=str(folder))
    except SimulatedCrash as crash:
        return Sync(crash.output.messages, None)
    return Sync(output.messages, output.returncode)


def state_list(states: Mapping[str, Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Per-stream states in the list form ``--state`` takes and ``run.py`` builds the source with."""
    return [{"type": "STREAM", "stream": {"stream_descriptor": {"name": name}, "stream_state": dict(state)}}
            for name, state in states.items()]


def file_states(path: Path) -> dict[str, dict[str, Any]]:
    """Each stream's state in the state file (none: no file yet)."""
    if not path.exists():
        return {}
    return {entry["stream"]["stream_descriptor"]["name"]: entry["stream"]["stream_state"] for entry in json.loads(path.read_text())}


# --- what a state covers ----------------------------------------------------------------------


def cursors(state: Mapping[str, Any], stream: str) -> dict[Any, Any]:
    """A state's cursors as instants, by partition: ``{None: ...}`` for one cursor (a date window's
    ``{"updatedAt": ...}``), by store for airbyte-cdk's per-partition state (``{"states": [...]}``;
    its ``"state"`` is the highest cursor of any partition, no promise for all, so it is left
    out); ``{}`` for a full refresh's. A shape not known here fails rather than covering nothing."""
    if state.get("use_global_cursor"):  # a substream's one cursor for all its partitions; none before it moved
        return {ALL_PARTITIONS: parse_datetime(state["state"]["updatedAt"])} if "state" in state else {}
    if "states" in state:
        field = PARTITIONS[stream][0]
        return {entry["partition"][field]: parse_datetime(entry["cursor"]["updatedAt"]) for entry in state["states"]}
    field = CURSORS.get(stream, "updatedAt")
    if field in state:
        return {None: parse_datetime(state[field])}
    assert not state or set(state) == {"__ab_no_cursor_state_message"}, f"{stream}: a state of unknown shape: {state}"
    return {}


def covered(connector: Connector, stream: str, state: Mapping[str, Any]) -> Counter:
    """The reference records at or below ``state``'s cursors (of their partition), as table rows.

    A partition at the config's start date covers nothing: that is where airbyte-cdk's
    per-partition state puts the partitions it has not read yet, and the resume reads from it
    inclusive (``since``), whereas a record of the data sits exactly on it."""
    start = parse_datetime(STARTS.get(stream, harness.START_DATE))
    tops = {partition: top for partition, top in cursors(state, stream).items() if top > start}
    partition_field = PARTITIONS[stream][1] if stream in PARTITIONS else None
    chosen = []
    for record in connector.reference.records(stream):
        partition = record[partition_field] if partition_field else None
        top = tops.get(ALL_PARTITIONS, tops.get(partition))
        if top is not None and parse_datetime(record[CURSORS.get(stream, "updatedAt")]) <= top:
            chosen.append(record)
    return record_rows(chosen, connector.infos[stream])


def twice(connector: Connector, stream: str, rows: Counter) -> list[Any]:
    """The primary keys plus cursors (primary keys alone without a cursor; whole rows without
    either) that more than one row of ``rows`` holds."""
    info = connector.infos[stream]
    names = [path[0] for path in info.primary_key] + list(info.cursor_path or ())
    by_key = Counter(tuple(dict(row)[name] for name in names) if names else row for row in rows.elements())
    return [key for key, times in by_key.items() if times > 1]


def examples(rows: Counter) -> str:
    return "; ".join(json.dumps(dict(row), default=str)[:200] for row in list(rows)[:3])


def check_states_in_order(states: Sequence[Mapping[str, Any]], label: str, repeats: bool = False) -> None:
    """Per stream, no cursor of any partition goes back, and (unless ``repeats``: two runs' STATEs
    put end to end) no two STATEs in a row are the same."""
    by_stream: dict[str, list[dict[str, Any]]] = {}
    for state in states:
        by_stream.setdefault(state["stream"]["stream_descriptor"]["name"], []).append(state["stream"]["stream_state"])
    for stream, printed in by_stream.items():
        if not repeats:
            assert all(a != b for a, b in pairwise(printed)), f"{label}: two identical {stream} STATEs in a row: {printed}"
        for before, after in pairwise(printed):
            moved = cursors(after, stream)
            for partition, top in cursors(before, stream).items():
                assert partition in moved and moved[partition] >= top, (
                    f"{label}: a {stream} cursor went backwards (partition {partition}): {before} -> {after}")


# --- the property ------------------------------------------------------------------------------


@settings(max_examples=6, deadline=None, derandomize=True, database=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(
    style=st.sampled_from(CONNECTORS),
    concurrency=st.sampled_from([1, 2, 4]),
    resumed_concurrency=st.sampled_from([1, 4]),
    kill=st.sampled_from(KILLS),
    count=st.integers(1, 6),
    resume_with=st.sampled_from(["--state", "--state-file"]),
    waits=st.lists(st.integers(0, 25), min_size=1, max_size=8),
)
# store_orders' fourth commit landed, its STATE not printed: the table is ahead of the per-partition
# state the orchestrator holds, the NEW source is built with that older state, and the runtime must go
# on from the table's (the boundary's skips included), four partitions at once, writing nothing twice.
@example(style="declarative_substream", concurrency=1, resumed_concurrency=4, kill="commit.done", count=4,
         resume_with="--state", waits=[25, 0, 0, 10])
# Two streams of date windows synced at once, killed while a commit writes its files: the other
# stream's commit may have landed without its STATE; the resume goes on from the state file.
@example(style="declarative_datetime", concurrency=4, resumed_concurrency=4, kill="commit.files_written", count=3,
         resume_with="--state-file", waits=[0, 25])
def test_declarative_syncs_killed_anywhere_then_resumed_land_cdk_records_exactly_once(
    spark: Any, connectors: dict[str, Connector], tmp_path_factory: pytest.TempPathFactory,
    style: str, concurrency: int, resumed_concurrency: int, kill: str, count: int, resume_with: str, waits: list[int],
) -> None:
    connector = connectors[style]
    connector.api.waits = tuple(waits)
    folder = tmp_path_factory.mktemp("declarative-concurrent")
    warehouse = str(folder / "warehouse")
    state_file = folder / "state.json"
    config = connector.config(warehouse, concurrency)
    drawn = (f"{style}, concurrency_level {concurrency} then --concurrency {resumed_concurrency}, "
             f"killed at {kill} #{count}, resumed with {resume_with}, waits {waits}")

    with crash_at(kill, count):
        killed = sync(connector, config, None, ["--state-file", str(state_file)], folder)
    printed = killed.last_states()
    if killed.returncode is not None:  # the point was not reached that often: the sync completed
        assert killed.returncode == 0 and not killed.errors(), f"{drawn}: the sync failed: {killed.errors()}"
    check_states_in_order(killed.states(), f"the killed sync ({drawn})")
    # (the file is rewritten after each STATE line, before anything else can happen)
    assert file_states(state_file) == printed, (
        f"{drawn}: the state file is not the last STATEs printed: {file_states(state_file)} != {printed}")

    destination, tables = connector.tables(spark, warehouse)
    for name, rows in tables.items():
        checkpoint = destination.committed_table(None, name, spark).last_checkpoint()
        if rows is None:
            assert name not in printed, f"{drawn}: a {name} STATE left before any commit landed: {printed[name]}"
            continue
        # Whatever the kill cost, what the table holds is there once, and it covers the state of
        # its own newest commit and the last one printed (a STATE leaves after its commit).
        doubled = twice(connector, name, rows)
        assert not doubled, f"{drawn}: {name}: {len(doubled)} records committed twice (e.g. {doubled[:3]})"
        if name in harness.overwrite_streams(connector.catalog):  # replaced at the end, never half a snapshot
            assert rows == connector.expected[name], f"{drawn}: {name}: a committed full refresh is not every record"
        for state in ((checkpoint.state if checkpoint else None) or {}, printed.get(name, {})):
            missing = covered(connector, name, state) - rows
            assert not missing, (
                f"{drawn}: {name}: {sum(missing.values())} records at or below {json.dumps(state)[:600]} are not in "
                f"the table (e.g. {examples(missing)})")

    left = printed if resume_with == "--state" else file_states(state_file)
    given_state = state_list(left) if left else None
    args = ["--concurrency", str(resumed_concurrency)]
    if resume_with == "--state-file":
        args += ["--state-file", str(state_file)]
    elif given_state is not None:
        state_path = folder / "state-given.json"
        state_path.write_text(json.dumps(given_state))
        args += ["--state", str(state_path)]
    # The user's config file is the killed run's; ``--concurrency`` overrides its concurrency_level.
    resumed = sync(connector, config, given_state, args, folder)
    assert resumed.returncode == 0 and not resumed.errors(), f"{drawn}: the resumed sync failed: {resumed.errors()}"
    check_states_in_order(resumed.states(), f"the resumed sync ({drawn})")
    check_states_in_order([*killed.states(), *resumed.states()], f"the killed sync then the resumed one ({drawn})", repeats=True)

    _, tables = connector.tables(spark, warehouse)
    problems = []
    for name, expected in connector.expected.items():
        rows = tables.get(name) or Counter()
        if rows != expected:
            missing, extra = expected - rows, rows - expected
            copies = sum(times for row, times in extra.items() if row in expected)
            problems.append(f"{name}: {sum(missing.values())} of airbyte-cdk's records missing (e.g. {examples(missing)}); "
                            f"{sum(extra.values())} rows too many, {copies} of them second copies of a record "
                            f"(e.g. {examples(extra)})")
    assert not problems, f"{drawn}: after the resumed sync:\n" + "\n".join(problems)
