"""`./dev bench stages`: where a batch's time goes, stage by stage, without Kafka.

For each case (BENCH_STAGES_CASES, default "1000:1000,1000000:1000,1000000:1000000": players stored,
players playing), a fresh database gets the stored players (a CSR blitz rating each, as `./dev bench
scale` writes them) and BENCH_STAGES_BATCHES (8) batches of BENCH_BATCH (5,000) blitz games among the
playing players go through the worker's own engine and PostgreSQL store, one after another: plan
(engine.plan_batch: snapshot reads and the rating math, outside any lock), then apply (engine.apply_batch:
locks, dedupe, the plan's check, the writes, commit). It prints, per batch, the time of each store call
as the worker sees it (round trip included) and, from pg_stat_statements, the server's own time, buffer
hits and WAL of each statement. PostgreSQL is configured as for the other benchmarks (durable commits,
bench/common.py PG_SETTINGS).

What it is for: the difference between two cases is the price of the rows that differ (with 1,000,000
players playing, a 5,000-game batch touches ~10,000 distinct ratings instead of at most 1,000).
"""

from __future__ import annotations

import collections
import os
import time

import asyncpg

from bench.common import PG_SETTINGS, fresh_db, prefill
from worker import dev
from worker.contract.decode import decode
from worker.dev.streams import games
from worker.engine import apply_batch, plan_batch
from worker.store import postgres as pg_store
from worker.store.postgres import PostgresStore

BATCH = int(os.environ.get("BENCH_BATCH", "5000"))
BATCHES = int(os.environ.get("BENCH_STAGES_BATCHES", "8"))
CASES = [tuple(int(n) for n in case.split(":"))
         for case in os.environ.get("BENCH_STAGES_CASES", "1000:1000,1000000:1000,1000000:1000000").split(",")]
STORE_CALLS = ("lock_players", "processed", "load_states", "versions_changed", "save")

_spent: collections.Counter = collections.Counter()


def _timed(name: str, call):
    async def timed(*args, **kwargs):
        started = time.perf_counter()
        try:
            return await call(*args, **kwargs)
        finally:
            _spent[name] += time.perf_counter() - started
    return timed


async def _case(pg, stored: int, playing: int) -> None:
    url = await fresh_db(pg, f"bench_stages_{stored}_{playing}")
    started = time.perf_counter()
    await prefill(url, stored)
    print(f"  stages: {stored:,} players written in {time.perf_counter() - started:.0f} s", flush=True)
    conn = await asyncpg.connect(url)
    await conn.execute("CREATE EXTENSION IF NOT EXISTS pg_stat_statements")
    await conn.execute("SELECT pg_stat_statements_reset()")
    store = await PostgresStore.connect(url, min_size=2, max_size=4)
    messages = [decode(v) for v in games(BATCH * BATCHES, playing, seed=22, speeds=False)]
    _spent.clear()
    plan_s = apply_s = 0.0
    try:
        for i in range(BATCHES):
            batch = messages[i * BATCH:(i + 1) * BATCH]
            t0 = time.perf_counter()
            plan = await plan_batch(store, batch, [])
            t1 = time.perf_counter()
            await apply_batch(store, batch, plan=plan)
            plan_s, apply_s = plan_s + t1 - t0, apply_s + time.perf_counter() - t1
            print(f"  stages: {stored:,} stored, {playing:,} playing: batch {i + 1}/{BATCHES}", flush=True)
        print(f"stages: {stored:,} players stored, {playing:,} playing, batches of {BATCH:,} games: "
              f"plan {1000 * plan_s / BATCHES:.0f} ms, apply {1000 * apply_s / BATCHES:.0f} ms per batch")
        print("  store call (worker's view, per batch): " + ", ".join(
            f"{name} {1000 * _spent[name] / BATCHES:.1f} ms" for name in STORE_CALLS if _spent[name]))
        rows = await conn.fetch("""
            SELECT calls, total_exec_time, shared_blks_hit, shared_blks_read, wal_bytes,
                   left(regexp_replace(query, '\\s+', ' ', 'g'), 60) AS query
            FROM pg_stat_statements
            WHERE dbid = (SELECT oid FROM pg_database WHERE datname = current_database())
              AND total_exec_time / $1 >= 0.5
            ORDER BY total_exec_time DESC""", BATCHES)
        print(f"  {'server ms':>9} {'calls':>5} {'buffer hits':>11} {'reads':>6} {'WAL kB':>7}  statement (per batch)")
        for r in rows:
            print(f"  {r['total_exec_time'] / BATCHES:9.1f} {r['calls'] // BATCHES:5d} "
                  f"{r['shared_blks_hit'] // BATCHES:11d} {r['shared_blks_read'] // BATCHES:6d} "
                  f"{int(r['wal_bytes']) // BATCHES // 1024:7d}  {r['query']}", flush=True)
    finally:
        await store.close()
        await conn.close()


async def main() -> None:
    for name in STORE_CALLS:
        setattr(pg_store.PostgresTx, name, _timed(name, getattr(pg_store.PostgresTx, name)))
    settings = {**PG_SETTINGS, "shared_preload_libraries": "pg_stat_statements", "pg_stat_statements.track": "all"}
    pg = (dev.ExternalPostgres(os.environ["DATABASE_URL"]) if os.environ.get("DATABASE_URL")
          else dev.start_postgres(settings=settings))
    try:
        for stored, playing in CASES:
            await _case(pg, stored, playing)
    finally:
        pg.stop()
