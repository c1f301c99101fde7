"""compare-checkpoints: crash-proof record counters and the probe's counting destination."""

import multiprocessing
import os
import signal
from concurrent.futures import Future

from source_framework.compare.counters import ReadCounters
from source_framework.compare.probe import CountingDestination
from source_framework.destinations.base import Destination, StreamSink, StreamTarget, done


def test_counts_written_by_one_mapping_are_read_by_another(tmp_path):
    path = str(tmp_path / "c")
    parent = ReadCounters.create(path, ["users", "orders"])
    child = ReadCounters.open(path, ["users", "orders"])
    for _ in range(5):
        child.add(child.slot("orders"))
    child.add(child.slot("users"), 3)
    child.add(child.slot("unknown"))  # not announced: ignored
    assert parent.snapshot() == {"users": 3, "orders": 5}
    assert parent.total() == 8 and parent.read("nope") == 0
    child.close()
    parent.close()


def _count_then_die(path):
    counters = ReadCounters.open(path, ["orders"])
    for _ in range(1234):
        counters.add(0)
    os.kill(os.getpid(), signal.SIGKILL)


def test_counts_survive_a_sigkill_of_the_writer(tmp_path):
    path = str(tmp_path / "c")
    counters = ReadCounters.create(path, ["orders"])
    process = multiprocessing.get_context("fork").Process(target=_count_then_die, args=(path,))
    process.start()
    process.join(10)
    assert process.exitcode == -signal.SIGKILL
    assert counters.read("orders") == 1234


class ListSink(StreamSink):
    def __init__(self):
        self.records, self.finished = [], None

    def write(self, record):
        self.records.append(record)

    def commit(self, state, notes=None) -> Future:
        return done(("commit", state, notes))

    def finish(self, state, notes=None) -> Future:
        self.finished = (state, notes)
        return done("finished")


class ListDestination(Destination):
    def __init__(self):
        self.sinks, self.closed = {}, False
        self.spark = "the session"

    def open_stream(self, target):
        self.sinks[target.name] = ListSink()
        return self.sinks[target.name]

    def close(self):
        self.closed = True


def test_the_counting_destination_passes_everything_through_and_counts_writes(tmp_path):
    counters = ReadCounters.create(str(tmp_path / "c"), ["users"])
    inner = ListDestination()
    destination = CountingDestination(inner, counters)
    sink = destination.open_stream(StreamTarget(name="users", namespace=None, json_schema={}, incremental=True))
    for i in range(3):
        sink.write({"id": i})
    assert sink.commit({"c": 1}, {"n": 1}).result() == ("commit", {"c": 1}, {"n": 1})
    assert sink.finish({"c": 1}, notes={"n": 2}).result() == "finished"
    destination.close()
    assert inner.sinks["users"].records == [{"id": 0}, {"id": 1}, {"id": 2}]
    assert inner.sinks["users"].finished == ({"c": 1}, {"n": 2})
    assert inner.closed and destination.spark == "the session"
    assert counters.read("users") == 3
