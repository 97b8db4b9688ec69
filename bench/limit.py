"""`./dev bench limit`: the worker against the machine's limit for the same work, measured in one run
(issue 21), in the realistic case: BENCH_LIMIT_GAMES (100,000) CSR games among BENCH_LIMIT_PLAYERS
(20,000) players, batches of 5,000, PostgreSQL at its default memory settings with durable commits
(BENCH_LIMIT_PG=tuned: production-sized as in the other benchmarks, the best case with 2,000 players).

Five figures, on the same games, one after the other (never at the same time: 2 cores):

worker   one `rating-worker run` process, end to end (consume, decode, lock, rate, write, commit,
         publish, commit offsets), games/s from its first commit to its last;
naive    the same worker with one transaction per message (BATCH_SIZE=1, MAX_INFLIGHT_BATCHES=1), on the
         first BENCH_LIMIT_NAIVE (3,000) games;
python   the worker's own Python work per game, nothing else: decode, rate and encode the
         rating.changed bytes, through the engine on the memory store, in batches of 5,000, with the
         garbage collector tuned as the worker tunes it (worker/runtime.py);
database the same durable rows by the cheapest path: per batch, one transaction that COPYs the new
         ratings (into a temporary table, then one upsert), the history rows, the outbox rows and the
         processed ids, and commits (fsync);
clients  beside the limit, what the client libraries alone cost the worker's thread for the same games
         (bench/clients.py: consume with aiokafka, publish the rating.changed records, COPY the rows with
         asyncpg, the rows built beforehand), and the ceiling that puts on the worker's ratio: no worker
         that also does that work can pass it;
cpu      where a game's CPU goes in the worker's run, from its first commit to its last: the worker process,
         PostgreSQL (all of its processes), the broker, and how busy the machine's cores were; beside it
         PostgreSQL's CPU for the database figure's COPY path (bench/cpu.py). The limit assumes the worker's
         Python and PostgreSQL overlap perfectly: on 2 cores that holds only while their CPU fits in them.

The limit is what one worker process could reach if its Python thread and PostgreSQL overlapped
perfectly: 1 / max(python, database) per game. The worker, python, database and clients figures are taken
BENCH_LIMIT_ROUNDS (3) times, each round's one right after the other (python before and after the
worker, their mean), because a shared machine's speed drifts by tens of percent within minutes (the same
code measured 4,470 and 6,637 games/s here): it prints each round's ratio and the median round's
figures, the worker as a multiple of naive (measured once), with the CPU model beside them: ratios hold
from one machine to another, absolute figures do not.
"""

from __future__ import annotations

import asyncio
import os
import tempfile
from pathlib import Path

from bench.against_limit import BATCH, GAMES, PLAYERS, ROUNDS, describe, measure
from bench.common import PG_SETTINGS, REALISTIC_PG_SETTINGS, cpu_model
from worker import dev
from worker.dev.streams import games

# BENCH_LIMIT_PG=tuned takes the other benchmarks' production sizing (PG_SETTINGS) instead of the realistic
# case's PostgreSQL (REALISTIC_PG_SETTINGS).
TUNED = os.environ.get("BENCH_LIMIT_PG", "default") == "tuned"


async def main() -> None:
    values = games(GAMES, PLAYERS, seed=3)
    pg = dev.start_postgres(settings=PG_SETTINGS if TUNED else REALISTIC_PG_SETTINGS)
    broker = dev.broker_from_env_or_start()
    log = Path(tempfile.mkdtemp(prefix="bench-limit-")) / "worker.log"
    try:
        print(f"bench limit: {GAMES:,} games among {PLAYERS:,} players, batches of {BATCH:,}; PostgreSQL "
              f"{'production-sized (PG_SETTINGS)' if TUNED else 'at its default memory settings'}, durable commits; "
              f"{ROUNDS} rounds", flush=True)
        result = await measure(pg, broker, log, values)
        m = result.median
        print(f"\nCPU: {cpu_model()} ({os.cpu_count()} cores)")
        print(f"median round: limit (1 / max(python, database)) {m.limit:,.0f} games/s (python "
              f"{m.python_s / GAMES * 1e6:.1f} us, database {m.database_s / GAMES * 1e6:.1f} us per game); client "
              f"libraries {m.clients_s / GAMES * 1e6:.1f} us per game")
        print(describe(result))
        print(f"median round's {m.cpu_line()}")
    finally:
        broker.stop()
        pg.stop()


if __name__ == "__main__":
    asyncio.run(main())
