"""`./dev bench wal-compression`: what each `wal_compression` method costs a full-page image, on Debian's
PostgreSQL (the embedded server has only pglz), for docs/deploy.md's advice.

Right after a checkpoint the first change of a page logs it whole, and a grown database's worker changes
~1.2-1.5 pages a game for the first time then (`./dev bench lifecycle`). The backend that logs a page
compresses it, on the batch's critical path. Here: two tables of the worker's two kinds of page, indexed
by random keys so that every insert lands on a page of its own, BENCH_WALCOMP_KEYS (6,000,000) rows each:
`digests` (a uuid key: the processed ids' digest, random bytes) and `texts` (a text key and a text column,
like the history's and the ratings' pages). For each method the server has (off, pglz, lz4, zstd), each
table, BENCH_WALCOMP_ROUNDS (2) rounds: CHECKPOINT, then BENCH_WALCOMP_INSERTS (20,000) rows in one
statement, timed; the full pages and WAL bytes it logged. Reported per method: the median time, the time a
full page costs beyond `off`'s, and the WAL against `off`'s. synchronous_commit is off: the commit's flush
is not what is measured. A few minutes; needs `apt-get install postgresql` (.ci/run installs it).
"""

from __future__ import annotations

import asyncio
import os
import shutil
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

import asyncpg

from bench.common import cpu_model
from worker.dev import free_port
from worker.dev.debian_postgres import debian_server_bin_dir, debian_server_user

KEYS = int(os.environ.get("BENCH_WALCOMP_KEYS", "6000000"))
INSERTS = int(os.environ.get("BENCH_WALCOMP_INSERTS", "20000"))
ROUNDS = int(os.environ.get("BENCH_WALCOMP_ROUNDS", "2"))
SETTINGS = {"shared_buffers": "2GB", "max_wal_size": "32GB", "checkpoint_timeout": "1h",
            "synchronous_commit": "off", "autovacuum": "off"}
TABLES = {
    "digests": ("CREATE TABLE digests (k uuid PRIMARY KEY)",
                "INSERT INTO digests SELECT gen_random_uuid() FROM generate_series(1, $1)"),
    "texts": ("CREATE TABLE texts (k text PRIMARY KEY, v text)",
              "INSERT INTO texts SELECT 'p' || (random() * 1e9)::int8 || '/csr/' || i, repeat(md5(i::text), 6) "
              "FROM generate_series(1, $1) AS i ON CONFLICT DO NOTHING"),
}


def server_bin_dir() -> Path:
    if (found := debian_server_bin_dir()) is None:
        raise SystemExit("wal-compression: Debian's PostgreSQL server is not installed: apt-get install postgresql")
    return found


def _as_postgres() -> dict:
    """subprocess' user and group for the server (worker.dev.debian_postgres.debian_server_user)."""
    run_as = debian_server_user()
    if run_as is None:
        raise SystemExit("wal-compression: running as root, and there is no `postgres` or `nobody` user to run "
                         "PostgreSQL as (Debian's package makes `postgres`)")
    return run_as


def _run(command: list, what: str, log: Path | None = None, **kw) -> None:
    """Run a server command; one line naming it and its cause (the log's last FATAL or ERROR) when it fails."""
    done = subprocess.run(command, capture_output=True, text=True, **kw)
    if done.returncode != 0:
        text = log.read_text(errors="replace") if log and log.exists() else done.stderr or done.stdout
        lines = text.strip().splitlines()
        raise SystemExit(f"wal-compression: {what} failed: {_last_error(text) or (lines or [done.returncode])[-1]}")


def _last_error(text: str) -> str:
    """The last FATAL or ERROR line of a server's output ("" for none)."""
    errors = [line for line in text.strip().splitlines() if "FATAL" in line or "ERROR" in line]
    return errors[-1] if errors else ""


async def _insert(conn, table: str) -> tuple[float, int, int]:
    """(seconds, full pages, WAL bytes) of INSERTS rows into `table` right after a CHECKPOINT."""
    await conn.execute("CHECKPOINT")
    await conn.execute("SELECT pg_stat_reset_shared('wal')")
    began = time.perf_counter()
    await conn.execute(TABLES[table][1], INSERTS)
    seconds = time.perf_counter() - began
    await conn.execute("SELECT pg_stat_force_next_flush()")
    await asyncio.sleep(1.2)  # the backend reports its WAL statistics at its next idle moment
    fpi, wal = await conn.fetchrow("SELECT wal_fpi, wal_bytes FROM pg_stat_wal")
    return seconds, fpi, int(wal)


async def measure(url: str) -> dict:
    """(method, table) -> [(seconds, full pages, WAL bytes)] of each round."""
    conn = await asyncpg.connect(url)
    try:
        methods = [m for m in ("off", "pglz", "lz4", "zstd") if m in await conn.fetchval(
            "SELECT enumvals FROM pg_settings WHERE name = 'wal_compression'")]
        for table, (create, insert) in TABLES.items():
            print(f"wal-compression: {KEYS:,} rows into {table}", flush=True)
            await conn.execute(create)
            await conn.execute(insert, KEYS)
            # frozen, as the lifecycle build's rows are (bench/grown_load.py). The indexes (~0.4 GB
            # together at the default size) stay in the 2 GB of buffers they were built in: what the timed
            # inserts touch, besides the heap's last pages
            await conn.execute(f"VACUUM (FREEZE, ANALYZE) {table}")
        runs: dict = {}
        for n in range(ROUNDS):
            for method in methods:
                await conn.execute(f"ALTER SYSTEM SET wal_compression = '{method}'")
                await conn.execute("SELECT pg_reload_conf()")
                await asyncio.sleep(0.5)
                for table in TABLES:
                    runs.setdefault((method, table), []).append(await _insert(conn, table))
            print(f"wal-compression: round {n + 1} of {ROUNDS}", flush=True)
        return runs
    finally:
        await conn.close()


def report(runs: dict, version: str) -> None:
    print(f"\n{cpu_model()}, {os.cpu_count()} CPUs; {version}; `./dev bench wal-compression`: {INSERTS:,} random-key "
          f"inserts right after a CHECKPOINT into {KEYS:,} rows, medians of {ROUNDS} rounds\n")
    print("| table | wal_compression | ms | full pages | us a full page beyond off | WAL | WAL against off |")
    print("|---|---|---|---|---|---|---|")
    for table in TABLES:
        off = statistics.median(s for s, _, _ in runs["off", table])
        off_wal = statistics.median(w for _, _, w in runs["off", table])
        for (method, name), rows in runs.items():
            if name != table:
                continue
            s, fpi, wal = (statistics.median(r[i] for r in rows) for i in range(3))
            # no full page logged (a checkpoint that did not take, say): nothing to divide the time among
            per_page = f"{(s - off) / fpi * 1e6:,.0f}" if fpi else "-"
            print(f"| {table} | {method} | {s * 1000:,.0f} | {fpi:,.0f} | {per_page} "
                  f"| {wal / 1e6:,.1f} MB | {wal / off_wal:.2f} |")


def main() -> None:
    bin_dir = server_bin_dir()
    base = Path(tempfile.mkdtemp(prefix="rw-walcomp-"))
    as_postgres = _as_postgres()
    if as_postgres:
        os.chown(base, as_postgres["user"], as_postgres["group"])
    data, port = base / "data", free_port()
    options = " ".join(f"-c {k}={v}" for k, v in {**SETTINGS, "port": port, "unix_socket_directories": base}.items())
    try:
        _run([bin_dir / "initdb", "-D", data, "-A", "trust", "-U", "postgres"], "initdb", **as_postgres)
        _run([bin_dir / "pg_ctl", "-D", data, "-l", base / "log", "-w", "-o", options, "start"],
             "starting PostgreSQL", base / "log", **as_postgres)
        url = f"postgresql://postgres@/postgres?host={base}&port={port}"
        try:
            version = asyncio.run(_version(url))
            runs = asyncio.run(measure(url))
        except (OSError, asyncpg.PostgresError) as exc:  # the server went away or refused a statement
            log = base / "log"
            said = _last_error(log.read_text(errors="replace")) if log.exists() else ""
            cause = f"; the server: {said}" if said else ""
            raise SystemExit(f"wal-compression: measuring failed: {exc!r}{cause}") from None
        report(runs, version)
    finally:
        subprocess.run([bin_dir / "pg_ctl", "-D", data, "-m", "fast", "stop"], capture_output=True, **as_postgres)
        shutil.rmtree(base, ignore_errors=True)


async def _version(url: str) -> str:
    conn = await asyncpg.connect(url)
    try:
        return "PostgreSQL " + await conn.fetchval("SHOW server_version")
    finally:
        await conn.close()
