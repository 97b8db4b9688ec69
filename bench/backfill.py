"""`./dev bench backfill`: `rating-worker backfill` against streaming the same history through the worker
(issue 22, item 3: at least 5x), both in the same run, into PostgreSQL at its default memory settings with
durable commits (the realistic case, bench/common.py's REALISTIC_PG_SETTINGS).

The history: BENCH_BACKFILL_GAMES (100,000) rated CSR games among BENCH_BACKFILL_PLAYERS (20,000) players
of all speeds (worker.dev.streams.games, seed 3). The worker: the games produced up front, one `rating-worker
run` process (batch 5,000), games/s from its first commit to its last (bench.runs.throughput: its
start-up is left out). The backfill: `python -m worker backfill FILE` into a fresh database, games/s of its
whole run as a user times it (interpreter start, loading, every chunk committed). Each round runs both, in
turns (BENCH_BACKFILL_ROUNDS, 3); the median round's ratio is reported. Both databases must hold as many
processed messages, ratings and changes at the end (not the same numbers: the worker's three partitions
interleave the games in another order; tests/integration/test_backfill.py checks the rows themselves).
"""

from __future__ import annotations

import asyncio
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import asyncpg

from bench.common import PEAK_RSS_MIB, REALISTIC_PG_SETTINGS, cpu_model, fresh_db, rss_mib
from bench.runs import throughput
from worker import dev
from worker.commands import backfill as backfill_command
from worker.dev.streams import games

GAMES = int(os.environ.get("BENCH_BACKFILL_GAMES", "100000"))
PLAYERS = int(os.environ.get("BENCH_BACKFILL_PLAYERS", "20000"))
ROUNDS = int(os.environ.get("BENCH_BACKFILL_ROUNDS", "3"))  # odd: the median round is one of them
CHUNK = os.environ.get("BENCH_BACKFILL_CHUNK", str(backfill_command.CHUNK))  # the command's default
COUNTS = "SELECT (SELECT count(*) FROM processed_messages), (SELECT count(*) FROM ratings), " \
         "(SELECT count(*) FROM rating_changes)"


def backfill(path: Path, url: str) -> tuple[float, float]:
    """(seconds, largest RSS in MiB) of one `python -m worker backfill` run."""
    started = time.perf_counter()
    # stderr to a file, not a pipe: a history with bad lines reports each, and a pipe nobody reads until the
    # end fills at 64 KiB and stops the backfill for good.
    with tempfile.TemporaryFile() as errors:
        proc = subprocess.Popen([sys.executable, "-m", "worker", "backfill", str(path), "--database-url", url,
                                 "--chunk", CHUNK, "--quiet"], stdout=subprocess.DEVNULL, stderr=errors)
        peak = 0.0
        while proc.poll() is None:
            peak = max(peak, rss_mib(proc.pid))
            time.sleep(0.05)
        seconds = time.perf_counter() - started
        if proc.returncode:
            errors.seek(0)
            raise RuntimeError(f"backfill failed: {errors.read().decode()[-2000:]}")
    return seconds, peak


async def same_counts(a: str, b: str) -> None:
    ca, cb = await asyncpg.connect(a), await asyncpg.connect(b)
    try:
        mine, theirs = tuple(await ca.fetchrow(COUNTS)), tuple(await cb.fetchrow(COUNTS))
    finally:
        await ca.close()
        await cb.close()
    if mine != theirs or mine[0] != GAMES:
        raise AssertionError(f"processed, ratings, changes: backfill {mine}, worker {theirs}")


async def main() -> None:
    pg = dev.start_postgres(settings=REALISTIC_PG_SETTINGS)
    broker = dev.broker_from_env_or_start()
    work = Path(tempfile.mkdtemp(prefix="rw-bench-backfill-"))
    log = work / "worker.log"
    values = games(GAMES, PLAYERS, seed=3)
    path = work / "history.jsonl"
    path.write_bytes(b"".join(v + b"\n" for v in values))
    print(f"backfill: {GAMES:,} CSR games among {PLAYERS:,} players, {path.stat().st_size / 2**20:,.0f} MiB, "
          f"{ROUNDS} rounds", flush=True)
    rounds = []
    try:
        for n in range(ROUNDS):
            url = await fresh_db(pg, f"bench_backfill_{n}")
            seconds, rss = backfill(path, url)
            bulk = GAMES / seconds
            streamed = await fresh_db(pg, f"bench_streamed_{n}")
            worker = await throughput(pg, broker, log, batch_size=5000, values=values, tag=f"bf{n}", url=streamed)
            await same_counts(url, streamed)
            rounds.append((bulk / worker, bulk, worker, rss, PEAK_RSS_MIB[0]))
            print(f"  round {n + 1}: backfill {bulk:,.0f} games/s ({seconds:.1f} s, RSS {rss:.0f} MiB), worker "
                  f"{worker:,.0f} games/s (RSS {PEAK_RSS_MIB[0]:.0f} MiB): {bulk / worker:.2f}x", flush=True)
    finally:
        broker.stop()
        pg.stop()
    ratio, bulk, worker, rss, worker_rss = sorted(rounds)[len(rounds) // 2]
    print(f"backfill: {ratio:.2f}x the worker streaming the same history (median of {ROUNDS} rounds, "
          f"{statistics.median(r[0] for r in rounds):.2f}x): {bulk:,.0f} against {worker:,.0f} games/s, "
          f"RSS {rss:.0f} against {worker_rss:.0f} MiB; {GAMES:,} games, {PLAYERS:,} players, PostgreSQL at its "
          f"default memory settings, durable commits; {cpu_model()}")


if __name__ == "__main__":
    asyncio.run(main())
