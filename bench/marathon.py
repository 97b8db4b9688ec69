"""A 500-player Weekly Marathon through the worker: how long its one transaction takes, and how long a
batch of games queued behind it waits. `./dev bench marathon`."""

from __future__ import annotations

import asyncio
import time
from datetime import UTC, datetime

import asyncpg
import orjson

from bench.common import fresh_db, produce, produce_any, start_worker, worker_env
from worker import dev
from worker.dev.streams import games, turbo_event


async def marathon(pg, broker, log, players: int = 500) -> None:
    tag = "marathon"
    url = await fresh_db(pg, f"bench_{tag}")
    await dev.create_topics(broker.bootstrap_servers, {f"in-{tag}": 1, f"out-{tag}": 3, f"dlq-{tag}": 1})
    proc = start_worker(worker_env(url, broker.bootstrap_servers, tag), log)
    conn = await asyncpg.connect(url)
    try:
        warm = games(1, 2, seed=1, source="/warm")
        await produce(broker.bootstrap_servers, f"in-{tag}", warm)
        while await conn.fetchval("SELECT count(*) FROM processed_messages") < 1:
            await asyncio.sleep(0.05)
        at = datetime(2026, 11, 29, 20, tzinfo=UTC)
        entries = [(f"m{i:03d}", (i % 97) / 97, 10 + i % 30, (i % 3, i % 2, (i + 1) % 3)) for i in range(players)]
        event = orjson.dumps(turbo_event(1, entries, at, fmt="weekly_marathon"))
        behind = games(2000, 4000, seed=9, source="/behind")  # a batch of games for other players
        start = time.perf_counter()
        await produce_any(broker.bootstrap_servers, f"in-{tag}", [event] + behind)
        done_event = done_games = None
        while done_games is None:
            now = time.perf_counter()
            if done_event is None and await conn.fetchval(
                    "SELECT count(*) FROM processed_messages WHERE source = '/test/turbo'"):
                done_event = now - start
            if await conn.fetchval("SELECT count(*) FROM processed_messages WHERE source = '/behind'") >= 2000:
                done_games = now - start
            await asyncio.sleep(0.01)
        changes = await conn.fetchval("SELECT count(*) FROM rating_changes WHERE system = 'tsr'")
        print(f"marathon: a {players}-player Weekly Marathon applied {done_event * 1000:.0f} ms after it was sent "
              f"({changes} TSR changes, one transaction); 2,000 games sent right behind it all applied after "
              f"{done_games * 1000:.0f} ms")
    finally:
        await conn.close()
        proc.terminate()
        proc.wait(60)
