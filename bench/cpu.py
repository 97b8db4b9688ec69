"""Who uses the machine's cores during a benchmark: CPU seconds of given processes (a worker), of the local
PostgreSQL (every `postgres` process, with the backends its postmaster has reaped), of the embedded broker
(`tansu`), and of the whole machine (/proc/stat), so that a figure can say where a game's CPU goes.
PostgreSQL's is also split: its client backends (the statements) against the rest (autovacuum, the
checkpointer, the background and WAL writers, the I/O workers, and every process that exited in between),
told apart by process title (with `update_process_title = off` every process counts as the rest).

On 2 cores the worker, PostgreSQL and the broker share the CPU: a limit that assumes the worker's Python
and PostgreSQL overlap perfectly holds only while their CPU together fits in the cores (bench/limit.py).
Linux only (/proc); elsewhere `read` gives None. With DATABASE_URL or KAFKA_BOOTSTRAP_SERVERS pointing at
another machine, its CPU is not seen here (the figures say 0).
"""

from __future__ import annotations

import os
import re
import time
from collections.abc import Iterable
from dataclasses import dataclass

_TICK = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
# A client backend's process title: "postgres: <user> <database> <host>(<port>) <state>" or "... [local] ...".
_CLIENT_BACKEND = re.compile(rb"postgres: \S+ \S+ (?:\[local\]|\S*\(\d+\))")


@dataclass(frozen=True)
class Reading:
    at: float  # time.perf_counter()
    processes: float  # CPU seconds of the given pids
    postgresql: float
    broker: float
    machine: float  # busy seconds of all cores together (user, nice, system, irq, softirq)
    backends: float  # the part of `postgresql` in its client backends alive at the reading


@dataclass(frozen=True)
class Usage:
    """CPU seconds between two readings, and the wall time."""

    wall: float
    processes: float
    postgresql: float
    broker: float
    machine: float
    backends: float  # of `postgresql`: in the client backends alive at the later reading (the statements)

    def per_game(self, games: int, who: str = "worker") -> str:
        us = 1e6 / games
        return (f"{who} {self.processes * us:.0f}, PostgreSQL {self.postgresql * us:.0f}, broker "
                f"{self.broker * us:.0f} us of CPU a game; {self.machine / self.wall / (os.cpu_count() or 1):.0%} of "
                f"the {os.cpu_count()} cores busy")


def _stat(pid: str) -> tuple[str, int, list[int]] | None:
    """(comm, parent pid, [utime, stime, cutime, cstime] in ticks) of a process, None once it is gone."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            text = f.read()
    except OSError:
        return None
    comm = text[text.index("(") + 1:text.rindex(")")]
    fields = text[text.rindex(")") + 2:].split()
    return comm, int(fields[1]), [int(x) for x in fields[11:15]]


def read(pids: Iterable[int] = ()) -> Reading | None:
    if not os.path.exists("/proc/stat"):
        return None
    at = time.perf_counter()
    stats = {pid: s for pid in os.listdir("/proc") if pid.isdigit() and (s := _stat(pid)) is not None}
    wanted = {str(p) for p in pids}
    processes = postgresql = broker = backends = 0
    for pid, (comm, parent, (utime, stime, cutime, cstime)) in stats.items():
        if pid in wanted:
            processes += utime + stime
        if comm == "postgres":
            postgresql += utime + stime
            if _is_client_backend(pid):
                backends += utime + stime
            if stats.get(str(parent), ("",))[0] != "postgres":  # the postmaster: its reaped backends too
                postgresql += cutime + cstime
        elif comm == "tansu":
            broker += utime + stime + cutime + cstime
    with open("/proc/stat") as f:
        user, nice, system, _idle, _iowait, irq, softirq = (int(x) for x in f.readline().split()[1:8])
    machine = user + nice + system + irq + softirq
    return Reading(at, processes / _TICK, postgresql / _TICK, broker / _TICK, machine / _TICK, backends / _TICK)


def _is_client_backend(pid: str) -> bool:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return is_client_backend_title(f.read(200))
    except OSError:
        return False


def is_client_backend_title(title: bytes) -> bool:
    """Whether a `postgres` process's title (its /proc cmdline) is a client connection's, not one of the
    server's own processes (checkpointer, writers, autovacuum, I/O workers, the postmaster)."""
    return _CLIENT_BACKEND.match(title) is not None


def between(before: Reading | None, after: Reading | None) -> Usage | None:
    if before is None or after is None:
        return None
    return Usage(after.at - before.at, after.processes - before.processes, after.postgresql - before.postgresql,
                 after.broker - before.broker, after.machine - before.machine, after.backends - before.backends)
