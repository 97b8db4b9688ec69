"""`rating-worker import` at scale: a million imported players (every system) into PostgreSQL.

    ./dev bench imports                          BENCH_IMPORTS players (default 1,000,000), --database-url mode
    BENCH_IMPORTS=100000 ./dev bench imports     a quicker run
    BENCH_IMPORTS_BROKER=1 ./dev bench imports   also through the broker with one worker running
    BENCH_IMPORTS_AGAIN=1 ./dev bench imports    also the same file a second time (everything skipped)
    BENCH_IMPORTS_RELAY=1 ./dev bench imports    also a worker started afterwards: its outbox relay publishing
                                                 the imports' rating.changed, timed until the outbox is empty

The file is generated first (not timed), as CSV. The command runs as a user runs it, in its own process
(`python -m worker import FILE --database-url URL --batch-size BENCH_BATCH`, default 5000); the time is
its wall time, start-up included, and the counts are checked in PostgreSQL afterwards. PostgreSQL runs
with durable commits (fsync, full_page_writes, synchronous_commit on), as in the pipeline benchmarks.
With BENCH_IMPORTS_BROKER: the same file produced to a 3-partition topic while one `rating-worker run`
process consumes it, timed from the start of the command to the last message processed; then the
outbox relay is not involved (the worker publishes as it goes).
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import asyncpg

from bench.common import fresh_db, start_worker, worker_env
from worker import dev
from worker.dev.streams import import_rows, write_csv

COUNT = int(os.environ.get("BENCH_IMPORTS", "1000000"))
BATCH = int(os.environ.get("BENCH_BATCH", "5000"))


def _import(path: Path, *args: str) -> tuple[float, str]:
    started = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "worker", "import", str(path), "--quiet", *args],
                          capture_output=True, text=True)
    elapsed = time.perf_counter() - started
    if proc.returncode != 0:
        raise RuntimeError(f"import exited with {proc.returncode}:\n{proc.stdout}\n{proc.stderr}")
    return elapsed, proc.stdout


async def _counts(url: str) -> dict[str, int]:
    conn = await asyncpg.connect(url)
    try:
        return {t: await conn.fetchval(f"SELECT count(*) FROM {t}")
                for t in ("ratings", "rating_changes", "outbox", "processed_messages")}
    finally:
        await conn.close()


def _systems(rows: list[dict]) -> str:
    seen: dict[str, int] = {}
    for r in rows:
        seen[r["system"]] = seen.get(r["system"], 0) + 1
    return ", ".join(f"{s} {n * 100 / len(rows):.0f}%" for s, n in sorted(seen.items(), key=lambda x: -x[1]))


async def database_mode(pg, path: Path, rows: list[dict]) -> str:
    url = await fresh_db(pg, "bench_imports")
    elapsed, summary = _import(path, "--database-url", url, "--batch-size", str(BATCH))
    counts = await _counts(url)
    assert counts == {"ratings": COUNT, "rating_changes": COUNT, "outbox": COUNT, "processed_messages": COUNT}, counts
    print(f"imports: {COUNT:,} players ({_systems(rows)}) with --database-url, batch {BATCH}: "
          f"{elapsed:.1f} s, {COUNT / elapsed:,.0f} rows/s (command wall time, start-up included)", flush=True)
    if os.environ.get("BENCH_IMPORTS_AGAIN"):
        elapsed, summary = _import(path, "--database-url", url, "--batch-size", str(BATCH))
        assert "nothing new" in summary, summary
        assert await _counts(url) == counts
        print(f"imports: the same file again (all {COUNT:,} skipped as imported before): {elapsed:.1f} s, "
              f"{COUNT / elapsed:,.0f} rows/s", flush=True)
    return url


async def relay(broker, url: str, log: Path) -> None:
    """A worker started on the imported database publishes the outbox (its relay, at start-up: every row)."""
    tag = "imports_relay"
    await dev.create_topics(broker.bootstrap_servers, {f"in-{tag}": 1, f"out-{tag}": 3, f"dlq-{tag}": 1})
    conn = await asyncpg.connect(url)
    started = time.perf_counter()
    worker = start_worker(worker_env(url, broker.bootstrap_servers, tag), log)
    try:
        while await conn.fetchval("SELECT count(*) FROM outbox"):
            if worker.poll() is not None:
                raise RuntimeError(f"worker exited with {worker.returncode}, see {log}")
            await asyncio.sleep(0.5)
        elapsed = time.perf_counter() - started
    finally:
        await conn.close()
        worker.send_signal(signal.SIGTERM)
        worker.wait(120)
    print(f"imports: a worker started afterwards published the {COUNT:,} rating.changed from the outbox in "
          f"{elapsed:.1f} s ({COUNT / elapsed:,.0f}/s, worker start-up included)", flush=True)


async def broker_mode(pg, broker, path: Path, log: Path) -> None:
    tag = "imports"
    url = await fresh_db(pg, f"bench_{tag}_broker")
    await dev.create_topics(broker.bootstrap_servers, {f"in-{tag}": 3, f"out-{tag}": 3, f"dlq-{tag}": 1})
    worker = start_worker(worker_env(url, broker.bootstrap_servers, tag, batch_size=BATCH), log)
    conn = await asyncpg.connect(url)
    # Its output to a file, not a pipe: a pipe read only at the end stops the import once it fills (64 KiB).
    output = tempfile.TemporaryFile()
    try:
        started = time.perf_counter()
        proc = subprocess.Popen([sys.executable, "-m", "worker", "import", str(path), "--quiet", "--topic", f"in-{tag}",
                                 "--bootstrap-servers", broker.bootstrap_servers, "--batch-size", str(BATCH)],
                                stdout=output, stderr=subprocess.STDOUT)
        produced_at = None
        while True:
            if produced_at is None and proc.poll() is not None:
                produced_at = time.perf_counter() - started
                if proc.returncode != 0:
                    output.seek(0)
                    raise RuntimeError(f"import exited with {proc.returncode}: {output.read().decode()[-2000:]}")
            n = await conn.fetchval("SELECT count(*) FROM processed_messages")
            if n >= COUNT:
                break
            if worker.poll() is not None:
                raise RuntimeError(f"worker exited with {worker.returncode}, see {log}")
            await asyncio.sleep(0.5)
        done_at = time.perf_counter() - started
        if produced_at is None:
            proc.wait()
            produced_at = time.perf_counter() - started
    finally:
        output.close()
        await conn.close()
        worker.send_signal(signal.SIGTERM)
        worker.wait(120)
    print(f"imports: {COUNT:,} players through the broker (3 partitions) with one worker, batch {BATCH}: "
          f"produced in {produced_at:.1f} s ({COUNT / produced_at:,.0f} rows/s), all applied after {done_at:.1f} s "
          f"({COUNT / done_at:,.0f} rows/s end to end)", flush=True)


async def main() -> None:
    # Durable commits, as in production (the test server has fsync off).
    pg = (dev.ExternalPostgres(os.environ["DATABASE_URL"]) if os.environ.get("DATABASE_URL")
          else dev.start_postgres(settings={"fsync": "on", "full_page_writes": "on",
                                                    "synchronous_commit": "on"}))
    tmp = Path(tempfile.mkdtemp(prefix="rw-bench-imports-"))
    path = tmp / "ratings.csv"
    broker = None
    try:
        generated = time.perf_counter()
        rows = import_rows(COUNT, seed=12)
        write_csv(path, rows)
        print(f"imports: generated {COUNT:,} lines ({path.stat().st_size / 1e6:.0f} MB of CSV) in "
              f"{time.perf_counter() - generated:.1f} s (not timed)", flush=True)
        url = await database_mode(pg, path, rows)
        if os.environ.get("BENCH_IMPORTS_RELAY") or os.environ.get("BENCH_IMPORTS_BROKER"):
            broker = dev.broker_from_env_or_start()
        if os.environ.get("BENCH_IMPORTS_RELAY"):
            await relay(broker, url, tmp / "worker.log")
        if os.environ.get("BENCH_IMPORTS_BROKER"):
            await broker_mode(pg, broker, path, tmp / "worker.log")
    finally:
        if broker is not None:
            broker.stop()
        pg.stop()
        path.unlink(missing_ok=True)


if __name__ == "__main__":
    asyncio.run(main())
