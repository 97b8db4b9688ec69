"""What the benchmarks share: their PostgreSQL settings, a fresh database, a worker process, producing a
stream, waiting for it to be processed, and the worker's memory. The streams themselves come from
worker.dev.streams, the services from worker.dev (as in the tests and the demo)."""

from __future__ import annotations

import asyncio
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import asyncpg
from aiokafka import AIOKafkaProducer

from bench import cpu
from worker.dev.databases import drop_database, new_database
from worker.dev.streams import player_of

# The benchmarks' PostgreSQL: durable commits as in production (the test server runs without fsync),
# with the usual production sizing of a dedicated server (docs/deploy.md): a buffer cache that holds
# the working set, compressed full-page images and checkpoints spaced by WAL volume. Without the last
# two, every first write to a page after a checkpoint logs the whole 8 kB page, and with a million
# players nearly every row a game touches is on such a page.
PG_SETTINGS = {
    "fsync": "on", "full_page_writes": "on", "synchronous_commit": "on",
    "shared_buffers": os.environ.get("BENCH_PG_SHARED_BUFFERS", "1GB"),
    "wal_compression": "on", "max_wal_size": "4GB", "checkpoint_timeout": "15min",
}
# The realistic case's PostgreSQL: durable commits, and nothing else changed: PostgreSQL's own memory defaults
# (shared_buffers 128 MB). bench/limit.py, the suite's realistic case, bench/backfill.py.
REALISTIC_PG_SETTINGS = {"fsync": "on", "full_page_writes": "on", "synchronous_commit": "on"}


def start_worker(env: dict, log: Path, module: str | None = None) -> subprocess.Popen:
    """`rating-worker run` in its own process (or `python -m module`, e.g. bench.echo, with the same env)."""
    profile = ["-m", "cProfile", "-o", os.environ["BENCH_PROFILE"]] if os.environ.get("BENCH_PROFILE") else []
    command = ["-m", module] if module else [*profile, "-m", "worker", "run"]
    return subprocess.Popen([sys.executable, *command], env={**os.environ, **env},
                            stdout=open(log, "ab"), stderr=subprocess.STDOUT)  # noqa: SIM115


def cpu_model() -> str:
    """The CPU's model name, printed beside every figure: ratios hold from one machine to another, absolute
    figures do not."""
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown CPU"


async def copy_db(pg, template: str, name: str) -> str:
    """A new database `name` as a copy of `template` (PostgreSQL copies the files: seconds for a million
    players, where writing them again takes a minute), ending with a checkpoint.

    By its files (STRATEGY FILE_COPY, PostgreSQL 15+), not by the default since 15 (WAL_LOG), which writes
    the whole copy to the WAL: 217 MB for the 1,000,000 players of `scale`, 8 for 20,000. That WAL brought
    checkpoints (max_wal_size 1 GB) into the middle of the runs that followed a large copy, and after a
    checkpoint each page is written whole to the WAL at its first change: one case paid for the other's
    copy. FILE_COPY checkpoints before and after copying, so every run starts right after a checkpoint."""
    return await new_database(pg.url, name, template=template, file_copy=True)


# What PostgreSQL wrote and read, server-wide (PostgreSQL 16+: pg_stat_io): a run's share is the difference
# of two readings. Backends report their counters when they exit or at most once a second, hence the wait.
_IO = """
SELECT (SELECT wal_fpi FROM pg_stat_wal) AS full_pages_logged,
       (SELECT wal_bytes FROM pg_stat_wal) / 1048576.0 AS wal_mib,
       (SELECT coalesce(sum(reads), 0) FROM pg_stat_io WHERE object = 'relation') AS pages_read,
       (SELECT coalesce(sum(writes), 0) FROM pg_stat_io WHERE object = 'relation') AS pages_written
"""


async def io_counters(pg) -> dict[str, float] | None:
    """PostgreSQL's WAL and buffer I/O counters so far (None before PostgreSQL 16)."""
    await asyncio.sleep(1.5)
    conn = await asyncpg.connect(pg.url)
    try:
        if conn.get_server_version().major < 16:
            return None
        return {k: float(v) for k, v in (await conn.fetchrow(_IO)).items()}
    finally:
        await conn.close()


def io_between(before: dict[str, float] | None, after: dict[str, float] | None) -> str:
    """The I/O of what ran between two io_counters readings, for a progress line ("" if unknown)."""
    if before is None or after is None:
        return ""
    d = {k: after[k] - before[k] for k in before}
    return (f"WAL {d['wal_mib']:,.0f} MiB ({d['full_pages_logged']:,.0f} whole pages), {d['pages_read']:,.0f} pages "
            f"read and {d['pages_written']:,.0f} written outside the WAL")


async def drop_db(pg, name: str) -> None:
    """Drop a benchmark's database once measured. One left behind is vacuumed and analyzed by autovacuum
    while the next runs are measured on the same server: in a suite run of 2026-12-03 the first `scale`
    run after the realistic case's databases wrote 259 MiB of WAL and 5,897 pages instead of 222 MiB and
    none, and ran at 9,149 games/s against 11,698-12,490 in its other rounds."""
    await drop_database(pg.url, name)


async def fresh_db(pg, name: str) -> str:
    """A new migrated database `name` (dropped first if it exists): worker.dev.databases, as the tests'."""
    return await new_database(pg.url, name, migrated=True)


async def produce(bootstrap: str, topic: str, values) -> None:
    p = AIOKafkaProducer(bootstrap_servers=bootstrap, enable_idempotence=False, linger_ms=10,
                         max_batch_size=1_048_576)
    await p.start()
    futures = [await p.send(topic, v, key=player_of(v)) for v in values]
    await asyncio.gather(*futures)
    await p.stop()


async def produce_any(bootstrap: str, topic: str, values) -> None:
    """Produce without keys (the worker does not rely on them)."""
    p = AIOKafkaProducer(bootstrap_servers=bootstrap, enable_idempotence=False, linger_ms=10,
                         max_batch_size=1_048_576)
    await p.start()
    futures = [await p.send(topic, v) for v in values]
    await asyncio.gather(*futures)
    await p.stop()


def worker_env(url: str, bootstrap: str, tag: str, **extra) -> dict:
    env = {"DATABASE_URL": url, "KAFKA_BOOTSTRAP_SERVERS": bootstrap, "KAFKA_INPUT_TOPICS": f"in-{tag}",
           "KAFKA_OUTPUT_TOPIC": f"out-{tag}", "KAFKA_DLQ_TOPIC": f"dlq-{tag}", "KAFKA_GROUP_ID": f"g-{tag}",
           "METRICS_PORT": "0", "LOG_LEVEL": "WARNING"}
    env.update({k.upper(): str(v) for k, v in extra.items()})
    return env


#: the largest RSS (MiB) of the worker processes during the last `until_processed`
PEAK_RSS_MIB: list[float] = [0.0]
#: the CPU used from the first batch's commit to the last during the last `until_processed` (bench/cpu.py:
#: the workers, PostgreSQL, the broker, the machine), and the messages processed in that time
WINDOW_CPU: list[tuple[cpu.Usage | None, int]] = [(None, 0)]


# `python -m worker`, writing its own largest RSS (VmHWM) to $BENCH_PEAK_FILE as it exits. Not wait4's
# ru_maxrss: Linux counts in it the RSS of the process that spawned it (the bench, with its history in
# memory) as it was when the child called exec, so a small replay was reported as large as its parent.
_WORKER_WITH_PEAK = """
import atexit, os, runpy, sys
def peak():
    with open('/proc/self/status') as status, open(os.environ['BENCH_PEAK_FILE'], 'w') as out:
        out.write(next(line.split()[1] for line in status if line.startswith('VmHWM:')))
atexit.register(peak)
runpy.run_module('worker', run_name='__main__', alter_sys=True)
"""


def replay_process(source: Path, out: Path, code: Path | None = None) -> tuple[float, float, list[str]]:
    """(seconds, largest RSS in MiB, stderr's lines) of one `python -m worker replay SOURCE -o OUT` process,
    run from `code` (a checkout) or this repository; raises if it fails. Its largest RSS is printed beside
    its speed: a process that grows its heap pays for each new page on this machine (docs/performance.md)."""
    with tempfile.TemporaryDirectory(prefix="bench-replay-") as tmp:
        peak_file = Path(tmp) / "peak"
        started = time.perf_counter()
        with open(Path(tmp) / "stderr", "w+b") as stderr:  # a file, not a pipe: a pipe nobody reads stops it
            proc = subprocess.Popen([sys.executable, "-c", _WORKER_WITH_PEAK, "replay", str(source), "-o", str(out)],
                                    cwd=code, stdout=subprocess.DEVNULL, stderr=stderr,
                                    env={**os.environ, "BENCH_PEAK_FILE": str(peak_file)})
            proc.wait()
            seconds = time.perf_counter() - started
            stderr.seek(0)
            errors = stderr.read().decode(errors="replace").splitlines()
        if proc.returncode != 0:
            raise RuntimeError(f"replay from {code or 'this repository'} failed ({proc.returncode}): {errors[-5:]}")
        return seconds, int(peak_file.read_text()) / 1024, errors


def rss_mib(pid: int) -> float:
    try:
        with open(f"/proc/{pid}/status") as f:
            return next(int(line.split()[1]) for line in f if line.startswith("VmRSS:")) / 1024
    except (OSError, StopIteration):
        return 0.0


async def until_processed(url: str, total: int, procs, label: str, spawned: float, log: Path) -> float:
    """Wait until `total` messages are processed, printing progress; messages/s from the first batch's
    commit to the last (start-up excluded), or since `spawned` when everything came in one batch. The
    workers' largest RSS on the way goes to PEAK_RSS_MIB, the CPU of that window to WINDOW_CPU."""
    conn = await asyncpg.connect(url)
    first = n_first = None
    last_print = 0.0
    PEAK_RSS_MIB[0] = 0.0
    WINDOW_CPU[0] = (None, 0)
    pids = [p.pid for p in procs]
    at_first = None
    try:
        while True:
            n = await conn.fetchval("SELECT count(*) FROM processed_messages")
            PEAK_RSS_MIB[0] = max(PEAK_RSS_MIB[0], max(rss_mib(p.pid) for p in procs))
            now = time.perf_counter()
            if n and first is None:
                first, n_first = now, n
                at_first = cpu.read(pids)
            if now - last_print > 2:
                print(f"  {label}: {n}/{total} processed", flush=True)
                last_print = now
            if n >= total:
                WINDOW_CPU[0] = (cpu.between(at_first, cpu.read(pids)), total - n_first)
                return (total - n_first) / (now - first) if n_first < total else total / (now - spawned)
            if any(p.poll() is not None for p in procs):
                raise RuntimeError(f"a worker exited, see {log}")
            await asyncio.sleep(0.05)
    finally:
        await conn.close()


async def prefill(url: str, players: int) -> None:
    """`players` players with a CSR blitz rating each, named as worker.dev.streams.games names them."""
    conn = await asyncpg.connect(url)
    try:
        name = "'p' || CASE WHEN g < 1000 THEN lpad(g::text, 3, '0') ELSE g::text END"
        await conn.execute(f"""
            INSERT INTO players (player_id) SELECT {name} FROM generate_series(0, {players - 1}) AS g;
            INSERT INTO ratings (player_id, system, category, rating, rd, volatility, games, last_at, version)
            SELECT {name}, 'csr', 'blitz', 1200 + (g::int8 * 7919 % 1000), 60 + g % 200, 0.06, 30,
                   extract(epoch FROM timestamptz '2025-12-01'), 30
            FROM generate_series(0, {players - 1}) AS g;
        """)
        for table in ("players", "ratings"):
            await conn.execute(f"VACUUM ANALYZE {table}")
    finally:
        await conn.close()
