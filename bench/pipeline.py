"""`./dev bench throughput`, `latency`, `puzzles`, `chesstempo`, `marathon`, `pipeline` and `all`: one worker
process end to end against the embedded services (the runs are bench/runs.py's, the marathon
bench/marathon.py's).
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from bench.common import PEAK_RSS_MIB, PG_SETTINGS
from bench.runs import GAMES, LATENCY_FETCH_WAIT_MS, LATENCY_RATE, PLAYERS, latency, throughput
from worker import dev


async def main(what: str) -> None:
    # Durable commits, as in production: fsync and synchronous_commit on (the test server has fsync off).
    pg = (dev.ExternalPostgres(os.environ["DATABASE_URL"]) if os.environ.get("DATABASE_URL")
          else dev.start_postgres(settings=PG_SETTINGS))
    broker = dev.broker_from_env_or_start()
    log = Path(tempfile.mkdtemp(prefix="rw-bench-")) / "worker.log"
    try:
        if what in ("throughput", "pipeline", "all"):
            rate = await throughput(pg, broker, log, batch_size=int(os.environ.get("BENCH_BATCH", "5000")))
            print(f"pipeline: {rate:,.0f} games/s end to end, one worker process, "
                  f"{GAMES} games among {PLAYERS} players, 3 partitions, batch {os.environ.get('BENCH_BATCH', '5000')}; "
                  f"worker RSS at most {PEAK_RSS_MIB[0]:.0f} MiB")
        if what in ("puzzles", "all"):
            from worker.dev.streams import puzzle_attempts

            attempts = puzzle_attempts(GAMES, PLAYERS, seed=5)
            rate = await throughput(pg, broker, log, values=attempts, tag="kite")
            print(f"pipeline: {rate:,.0f} ChessKite puzzle attempts/s end to end (about half challenge cards, "
                  f"rated), {GAMES} attempts by {PLAYERS} players")
        if what in ("chesstempo", "all"):
            from worker.dev.streams import chesstempo_attempts

            n = int(os.environ.get("BENCH_ATTEMPTS", "10000"))
            for problems in (10, n):
                attempts = chesstempo_attempts(n, PLAYERS, problems, seed=6, days=2)
                rate = await throughput(pg, broker, log, values=attempts, tag=f"tempo{problems}")
                print(f"pipeline: {rate:,.0f} Chess Tempo attempts/s end to end, {n} attempts by {PLAYERS} users "
                      f"on {problems} problems (standard and blitz)", flush=True)
        if what in ("latency", "pipeline", "all"):
            p50, p99, n = await latency(pg, broker, log)
            print(f"pipeline: latency produce -> rating.changed at {LATENCY_RATE} games/s over "
                  f"{n} games: p50 {p50:.1f} ms, p99 {p99:.1f} ms (KAFKA_FETCH_MAX_WAIT_MS={LATENCY_FETCH_WAIT_MS})")
        if what in ("marathon", "all"):
            from bench.marathon import marathon

            await marathon(pg, broker, log)
    finally:
        broker.stop()
        pg.stop()
