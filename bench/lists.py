"""`./dev bench lists`: a FIDE list (`rating.period_closed`) on BENCH_LIST_PLAYERS (100,000) FIDE players.

A fresh database gets the players' standard ratings: a third played in November (an open period for the
December list: closed and published), a third idle since 2025 (marked inactive), a third with nothing to
do. The December list then goes through the worker's own sweep (worker.engine.sweep: pages read without
locks, the states that change applied SWEEP_CHUNK (1,000) at a time, each chunk one transaction), while
"other traffic" runs beside it: every 20 ms a transaction locks one random FIDE player, as a batch with
his game would (`lock_players`), and commits. PostgreSQL runs with durable commits (bench/common.py
PG_SETTINGS).

It prints the sweep's time, its rate and its longest chunk, the other transactions' lock waits (p50, p99,
max) against the same probe with no sweep running, and the baseline measured in the same run: the same
rows changed by the cheapest durable path, one UPDATE of the ratings and one INSERT of the history rows
per chunk, no Python in between.
"""

from __future__ import annotations

import asyncio
import os
import random
import statistics
import time

import asyncpg
import orjson

from bench.common import PG_SETTINGS, cpu_model, fresh_db
from worker import dev
from worker.contract.decode import decode
from worker.engine.sweep import CHUNK, SweepProgress, apply_sweep
from worker.store.postgres import PostgresStore

PLAYERS = int(os.environ.get("BENCH_LIST_PLAYERS", "100000"))
SWEEP_CHUNK = int(os.environ.get("SWEEP_CHUNK", str(CHUNK)))
LIST = orjson.dumps({"specversion": "1.0", "id": "fide-list-2026-12", "source": "/bench", "type": "rating.period_closed",
                     "time": "2026-12-01T00:00:00Z",
                     "data": {"system": "fide", "list": "2026-12", "closed_at": "2026-12-01T00:00:00Z"}})


async def prefill(url: str) -> None:
    """FIDE standard ratings: g % 3 == 0 an open December period (20 x 0.36 live), 1 idle since June 2025,
    2 nothing to do (played in October, no open period)."""
    name = "'f' || lpad(g::text, 7, '0')"
    open_extra = ('jsonb_build_object(\'published\', 1800 + g % 400, \'period\', \'2026-12\', \'k\', 20, '
                  '\'period_games\', 2, \'sum\', 0.36, \'pool\', \'[]\'::jsonb, \'birth_year\', null)')
    listed_extra = ('jsonb_build_object(\'published\', 1800 + g % 400, \'period\', null, \'k\', null, '
                    '\'period_games\', 0, \'sum\', 0.0, \'pool\', \'[]\'::jsonb, \'birth_year\', null)')
    conn = await asyncpg.connect(url)
    try:
        await conn.execute(f"""
            INSERT INTO players (player_id) SELECT {name} FROM generate_series(0, {PLAYERS - 1}) AS g;
            INSERT INTO ratings (player_id, system, category, rating, games, peak, last_at, version, extra)
            SELECT {name}, 'fide', 'standard',
                   CASE WHEN g % 3 = 0 THEN 1800 + g % 400 + 7.2 ELSE 1800 + g % 400 END, 60, 1800 + g % 400,
                   extract(epoch FROM CASE g % 3 WHEN 0 THEN timestamptz '2026-11-20'
                                                 WHEN 1 THEN timestamptz '2025-06-01'
                                                 ELSE timestamptz '2026-10-01' END),
                   5, CASE WHEN g % 3 = 0 THEN {open_extra} ELSE {listed_extra} END
            FROM generate_series(0, {PLAYERS - 1}) AS g;
        """)
        for table in ("players", "ratings"):
            await conn.execute(f"VACUUM ANALYZE {table}")
    finally:
        await conn.close()


async def probe(url: str, stop: asyncio.Event, waits: list[float]) -> None:
    """Other traffic: a transaction every 20 ms that locks one random FIDE player and commits."""
    conn = await asyncpg.connect(url)
    rng = random.Random(7)
    try:
        while not stop.is_set():
            pid = f"f{rng.randrange(PLAYERS):07d}"
            started = time.perf_counter()
            async with conn.transaction():
                await conn.execute("SELECT 1 FROM players WHERE player_id = $1 FOR UPDATE", pid)
            waits.append(time.perf_counter() - started)
            await asyncio.sleep(0.02)
    finally:
        await conn.close()


def _ms(values: list[float]) -> str:
    if not values:
        return "-"
    qs = statistics.quantiles(values, n=100, method="inclusive") if len(values) > 1 else [values[0]] * 99
    return f"p50 {qs[49] * 1000:.1f} ms, p99 {qs[98] * 1000:.1f} ms, max {max(values) * 1000:.1f} ms"


async def baseline(url: str) -> float:
    """The same rows by the cheapest durable path: per chunk of SWEEP_CHUNK states, one UPDATE of the
    ratings and one INSERT of as many history rows, each chunk its own transaction."""
    conn = await asyncpg.connect(url)
    try:
        ids = [r[0] for r in await conn.fetch(
            "SELECT player_id FROM ratings WHERE system = 'fide' AND player_id LIKE 'f%' "
            "AND (extra->>'period' IS NOT NULL OR last_at < extract(epoch FROM timestamptz '2025-12-01')) "
            "ORDER BY player_id")]
        started = time.perf_counter()
        for i in range(0, len(ids), SWEEP_CHUNK):
            part = ids[i:i + SWEEP_CHUNK]
            async with conn.transaction():
                await conn.execute(
                    "UPDATE ratings SET version = version + 1, extra = extra || '{\"bench\": 1}' "
                    "WHERE system = 'fide' AND player_id = ANY($1::text[])", part)
                await conn.execute(
                    "INSERT INTO rating_changes (event_id, player_id, system, category, version, rating, delta, "
                    "cause_type, cause_source, cause_id, cause_ref, changed_at) "
                    "SELECT 'base-' || p, p, 'fide', 'standard', 1000, 1800, 0, 'rating.period_closed', '/base', 'x', "
                    "'2026-12', now() FROM unnest($1::text[]) AS p", part)
        return time.perf_counter() - started
    finally:
        await conn.close()


async def main() -> None:
    pg = (dev.ExternalPostgres(os.environ["DATABASE_URL"]) if os.environ.get("DATABASE_URL")
          else dev.start_postgres(settings=PG_SETTINGS))
    try:
        url = await fresh_db(pg, "bench_lists")
        print(f"bench lists: {PLAYERS:,} FIDE players, sweep chunk {SWEEP_CHUNK:,}; filling...", flush=True)
        await prefill(url)
        quiet: list[float] = []
        stop = asyncio.Event()
        task = asyncio.create_task(probe(url, stop, quiet))
        await asyncio.sleep(3)
        stop.set()
        await task
        store = await PostgresStore.connect(url)
        waits: list[float] = []
        stop = asyncio.Event()
        task = asyncio.create_task(probe(url, stop, waits))
        progress = SweepProgress()
        published = 0

        async def count(part) -> None:
            nonlocal published
            published += len(part.records)
            if progress.chunks % 10 == 0:
                print(f"  {progress.scanned:,} states scanned, {progress.changed:,} changed", flush=True)

        started = time.perf_counter()
        try:
            await apply_sweep(store, decode(LIST), count, SWEEP_CHUNK, progress)
        finally:
            seconds = time.perf_counter() - started
            stop.set()
            await task
            await store.close()
        base = await baseline(url)
        print(f"\nCPU: {cpu_model()} ({os.cpu_count()} cores); PostgreSQL durable commits (bench/common.py PG_SETTINGS)")
        print(f"sweep: {progress.scanned:,} states scanned, {progress.changed:,} changes in {progress.chunks} chunks, "
              f"{seconds:.2f} s ({progress.changed / seconds:,.0f} changes/s); longest chunk "
              f"{progress.longest_chunk_s * 1000:.0f} ms")
        print(f"baseline (the same rows, one UPDATE + one INSERT per chunk): {base:.2f} s; sweep / baseline "
              f"{seconds / base:.1f}x")
        print(f"other traffic, one player locked per transaction: quiet {_ms(quiet)}; during the sweep {_ms(waits)} "
              f"({len(waits)} transactions)")
    finally:
        pg.stop()


if __name__ == "__main__":
    asyncio.run(main())
