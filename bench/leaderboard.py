"""`./dev bench leaderboard`: the leaderboard and history queries on 1,000,000 players (EXPLAIN ANALYZE).

Starts an embedded PostgreSQL (or uses DATABASE_URL), migrates a fresh database, fills it with
BENCH_LEADERBOARD_PLAYERS players (default 1,000,000) with a CSR blitz rating each (a third
established) and ten history rows for one in ten players, then prints the plan and time of
`rating-worker leaderboard csr blitz --top 100` and `rating-worker player ID --history 20`.
"""

from __future__ import annotations

import asyncio
import os
import time

import asyncpg

from worker import dev
from worker.dev.databases import new_database
from worker.store.queries import QUERIES


async def run() -> None:
    players = int(os.environ.get("BENCH_LEADERBOARD_PLAYERS", "1000000"))
    with dev.postgres_from_env_or_start() as pg:
        url = await new_database(pg.url, f"bench_leaderboard_{os.getpid()}", migrated=True)
        conn = await asyncpg.connect(url)
        try:
            started = time.perf_counter()
            print(f"filling {players:,} players ...", flush=True)
            await conn.execute(f"""
                INSERT INTO players (player_id) SELECT 'p' || g FROM generate_series(1, {players}) AS g;
                INSERT INTO ratings (player_id, system, category, rating, rd, volatility, games, version)
                SELECT 'p' || g, 'csr', 'blitz', 800 + (g::int8 * 7919 % 2000) + g % 97 / 100.0,
                       CASE WHEN g % 3 = 0 THEN 80 ELSE 200 END, 0.06, 10, 10
                FROM generate_series(1, {players}) AS g;
                INSERT INTO rating_changes (event_id, player_id, system, category, version, rating, delta,
                                            cause_type, cause_source, cause_id, cause_ref, changed_at, payload)
                SELECT 'e' || g, 'p' || (g % {players // 10}), 'csr', 'blitz', g / {players // 10} + 1, 1500, 1,
                       'game.finished', '/s', 'g' || g, 'g' || g, now(), '\\x00'::bytea
                FROM generate_series(1, {players}) AS g;
            """)
            for table in ("players", "ratings", "rating_changes"):
                await conn.execute(f"VACUUM ANALYZE {table}")
            print(f"filled in {time.perf_counter() - started:.1f} s\n")
            for title, sql, args in (
                ("leaderboard csr blitz --top 100", QUERIES["leaderboard"], ("csr", "blitz", 100)),
                ("player p4242 --history 20", QUERIES["player_history"], ("p4242", 20, None, None)),
            ):
                plan = await conn.fetch("EXPLAIN (ANALYZE, BUFFERS) " + sql, *args)
                print(f"== {title}")
                print("\n".join(r[0] for r in plan) + "\n")
        finally:
            await conn.close()


def main() -> None:
    asyncio.run(run())
