"""CPU time of what the benchmark runs: each case's processes, and the demo API beside them.

Why: records/s alone cannot tell a sync that waits on the machine's cores from one that waits on
Python's interpreter lock. With the cores used beside the rate, it can: on 2 CPUs a full sync at
~1.05 cores while the API uses ~0.05 leaves a core idle, so the sync is bound by its one
interpreter, and more cores would not make it faster.

Usage::

    before = children_cpu_seconds()
    process = subprocess.run([...])             # waited for: its CPU time, and its children's, count
    used = children_cpu_seconds() - before      # user + system seconds of that process tree
    process_cpu_seconds(api_pid)                # a process still running (the demo API), from /proc
"""

from __future__ import annotations

import os
import resource


def children_cpu_seconds() -> float:
    """User + system CPU seconds of every child process this one has waited for, and of theirs
    (a case's Python process and the JVM it started and reaped)."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def process_cpu_seconds(pid: int) -> float | None:
    """User + system CPU seconds a running process has used so far; None where ``/proc`` cannot
    tell (the process is gone, or not Linux)."""
    try:
        with open(f"/proc/{pid}/stat") as handle:
            stat = handle.read()
    except OSError:
        return None
    # The command name (field 2) is in parentheses and may hold spaces: count fields after it.
    fields = stat[stat.rindex(")") + 2:].split()
    utime, stime = int(fields[11]), int(fields[12])  # fields 14 and 15 of proc(5)
    return (utime + stime) / os.sysconf("SC_CLK_TCK")
