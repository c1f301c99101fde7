"""Peak memory of a process and everything it starts (the Spark JVM), sampled from ``/proc``.

Why sampling ``VmHWM``: it is the kernel's own high-water mark of a process's resident memory,
so a sample taken at any time already includes every earlier peak; sampling only has to
happen before the process exits. The JVM that pyspark starts is a child of the Python process
(``spark-submit`` execs ``java``), found by walking ``/proc/<pid>/task/*/children``.

Usage::

    with PeakMemory(process.pid) as peaks:
        process.wait()
    peaks.python_mb, peaks.jvm_mb, peaks.converters_mb
"""

from __future__ import annotations

import os
import threading

SAMPLE_SECONDS = 0.05
CONVERTER = "page_conversion_process.py"  # the page converter's command line names its program


class PeakMemory:
    """Samples the process tree under ``pid`` in a thread until ``stop()``."""

    def __init__(self, pid: int, interval: float = SAMPLE_SECONDS) -> None:
        self.pid = pid
        self.interval = interval
        self._peaks_kb: dict[int, int] = {}
        self._names: dict[int, str] = {}
        self._commands: dict[int, str] = {}
        self._stopping = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"peak-memory-{pid}", daemon=True)

    def __enter__(self) -> PeakMemory:
        self._thread.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    def stop(self) -> None:
        self._stopping.set()
        self._thread.join()

    def sample(self) -> None:
        for pid in _tree(self.pid):
            high_water = _vm_hwm_kb(pid)
            if high_water is not None:
                self._peaks_kb[pid] = max(self._peaks_kb.get(pid, 0), high_water)
                # Not cached: spark-submit is a shell script that execs java under the same pid.
                self._names[pid] = _comm(pid) or self._names.get(pid, "")
                if pid not in self._commands:
                    self._commands[pid] = _cmdline(pid)

    @property
    def python_mb(self) -> float:
        """The measured Python process itself. Not "the largest non-java process": Hadoop forks
        the JVM to run ``chmod``, and each fork briefly shows the JVM's peak under a thread's name."""
        return self._peaks_kb.get(self.pid, 0) / 1024

    @property
    def jvm_mb(self) -> float:
        """The Spark JVM. The largest java process: spark-submit first runs a small, short-lived
        java launcher to build the real JVM's command line, and the two never overlap."""
        return max((kb for pid, kb in self._peaks_kb.items() if self._is_jvm(pid)), default=0) / 1024

    @property
    def converters_mb(self) -> float:
        """The page converters' processes (one per stream read from its pages' bytes), added up: a
        sync's streams each start one, and they are not assumed to never overlap."""
        return sum(kb for pid, kb in self._peaks_kb.items() if CONVERTER in self._commands.get(pid, "")) / 1024

    def processes(self) -> list[dict[str, object]]:
        """Every process seen in the tree with its peak, so a surprising figure can be traced."""
        return [
            {"pid": pid, "name": self._names.get(pid, ""), "peak_mb": round(kb / 1024, 1), "command": self._commands.get(pid, "")}
            for pid, kb in sorted(self._peaks_kb.items(), key=lambda item: -item[1])
        ]

    def _is_jvm(self, pid: int) -> bool:
        return self._names.get(pid) == "java"

    def _run(self) -> None:
        while not self._stopping.is_set():
            self.sample()
            self._stopping.wait(self.interval)


def self_peak_mb() -> float:
    """This process's own peak resident memory, in MB."""
    return (_vm_hwm_kb(os.getpid()) or 0) / 1024


def _tree(root: int) -> list[int]:
    found, pending = [], [root]
    while pending:
        pid = pending.pop()
        found.append(pid)
        pending.extend(_children(pid))
    return found


def _children(pid: int) -> list[int]:
    children: list[int] = []
    try:
        tasks = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return children
    for task in tasks:
        try:
            with open(f"/proc/{pid}/task/{task}/children") as handle:
                children.extend(int(child) for child in handle.read().split())
        except OSError:
            continue
    return children


def _vm_hwm_kb(pid: int) -> int | None:
    try:
        with open(f"/proc/{pid}/status") as handle:
            for line in handle:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1])
    except OSError:
        return None
    return None


def _cmdline(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as handle:
            return handle.read().replace(b"\0", b" ").decode(errors="replace").strip()[:160]
    except OSError:
        return ""


def _comm(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/comm") as handle:
            return handle.read().strip()
    except OSError:
        return ""
