"""`./dev bench suite|naive|scale|mixed|horizontal`: the figures of the README's Performance section.

suite       all of the below plus the latency at BENCH_RATE (2,000) games/s, ending with a table
            (about 10 minutes on a 2-core machine): the one to run on your own hardware
naive       the batch design against the naive one (one transaction per message: BATCH_SIZE=1,
            MAX_INFLIGHT_BATCHES=1), same games, same run
scale       throughput with 1,000 players in the database, then with 1,000,000 (games among all of
            them: almost every game reads rows that are not cached)
mixed       each message type alone (CSR games, TSR events, US Chess events, ChessKite and Chess
            Tempo attempts), then all of them mixed in one stream
horizontal  1, 2 and 4 worker processes in one consumer group on 6 partitions, one PostgreSQL

Every throughput figure is end to end (consume, validate, dedupe, lock, rate, write, commit, publish, commit
offsets), from the first processed message to the last, with PostgreSQL committing durably. Sizes
follow BENCH_GAMES (default 50,000) and BENCH_PLAYERS (2,000); BENCH_SCALE_PLAYERS sets the large
population (1,000,000). A progress line is printed while each figure runs.
"""

from __future__ import annotations

import os
import random
import signal
import time
from pathlib import Path

from bench.common import (
    PEAK_RSS_MIB,
    PG_SETTINGS,
    fresh_db,
    prefill,
    produce_any,
    start_worker,
    until_processed,
    worker_env,
)
from bench.pipeline import GAMES, LATENCY_FETCH_WAIT_MS, PLAYERS, latency, throughput
from worker import dev
from worker.dev.streams import chesstempo_attempts, games, puzzle_attempts, turbo_events, uscf_events

#: (figure, result) rows for the table at the end of `suite`
TABLE: list[tuple[str, str]] = []


def _row(what: str, result: str) -> None:
    TABLE.append((what, result))


async def naive(pg, broker, log: Path) -> None:
    n = min(GAMES, 5000)  # one transaction per message runs at about a hundred games a second
    values = games(GAMES, PLAYERS, seed=21)
    batched = await throughput(pg, broker, log, batch_size=5000, values=values, tag="naive-batched")
    batched_rss = PEAK_RSS_MIB[0]
    one_by_one = await throughput(pg, broker, log, batch_size=1, values=values[:n], tag="naive-single",
                                  max_inflight_batches=1)
    print(f"naive: {batched:,.0f} games/s in batches of 5,000 ({GAMES:,} games) against {one_by_one:,.0f} games/s "
          f"with one transaction per message ({n:,} games): {batched / one_by_one:.0f}x", flush=True)
    _row(f"CSR games/s, one worker, batches of 5,000 ({GAMES:,} games, {PLAYERS:,} players)",
         f"{batched:,.0f}, RSS {batched_rss:.0f} MiB")
    _row("CSR games/s, one transaction per message (the naive design)",
         f"{one_by_one:,.0f} ({batched / one_by_one:.0f}x slower)")


async def latency_at_rate(pg, broker, log: Path) -> None:
    rate = int(os.environ.get("BENCH_RATE", "2000"))
    p50, p99, n = await latency(pg, broker, log, rate=rate)
    print(f"latency: produce -> rating.changed at {rate:,} games/s over {n:,} games: p50 {p50:.0f} ms, "
          f"p99 {p99:.0f} ms", flush=True)
    _row(f"latency produce -> rating.changed at {rate:,} games/s (fetch wait {LATENCY_FETCH_WAIT_MS} ms)",
         f"p50 {p50:.0f} ms, p99 {p99:.0f} ms")


async def scale(pg, broker, log: Path) -> None:
    """Three runs: BENCH_SCALE_ACTIVE (1,000) players, all playing; BENCH_SCALE_PLAYERS (1,000,000) players of
    whom the same ones play (the size of the tables alone); and all 1,000,000 playing (a 5,000-game batch
    then writes ~10,000 distinct ratings instead of at most 1,000), left out with BENCH_SCALE_ALL=0.
    Issue 21's case: BENCH_SCALE_ACTIVE=20000 BENCH_GAMES=100000 BENCH_SCALE_ALL=0 ./dev bench scale."""
    big = int(os.environ.get("BENCH_SCALE_PLAYERS", "1000000"))
    active = int(os.environ.get("BENCH_SCALE_ACTIVE", "1000"))
    cases = [(active, active), (big, active)] + ([(big, big)] if os.environ.get("BENCH_SCALE_ALL", "1") != "0" else [])
    results, rss = {}, {}
    for stored, playing in cases:
        tag = f"scale{stored}-{playing}"
        url = await fresh_db(pg, f"bench_{tag}")
        started = time.perf_counter()
        await prefill(url, stored)
        print(f"  scale: {stored:,} players written in {time.perf_counter() - started:.0f} s", flush=True)
        values = games(GAMES, playing, seed=22, speeds=False)  # blitz only: every game reads stored ratings
        results[stored, playing] = rate = await throughput(pg, broker, log, batch_size=5000, values=values, tag=tag,
                                                           url=url)
        rss[stored, playing] = PEAK_RSS_MIB[0]
        print(f"scale: {stored:,} players stored, {playing:,} of them playing: {rate:,.0f} games/s, worker RSS at "
              f"most {PEAK_RSS_MIB[0]:.0f} MiB", flush=True)
    base = results[active, active]
    same = results[big, active]
    print(f"scale: against {active:,} players: {(same - base) / base:+.0%} with {big:,} stored (same players "
          f"playing)" + (f", {(results[big, big] - base) / base:+.0%} with all {big:,} playing"
                         if (big, big) in results else ""), flush=True)
    _row(f"scale: blitz games/s, {active:,} players stored and playing", f"{base:,.0f}, RSS {rss[active, active]:.0f} MiB")
    _row(f"scale: {big:,} players stored, the same {active:,} playing",
         f"{same:,.0f} ({(same - base) / base:+.0%}), RSS {rss[big, active]:.0f} MiB")
    if (big, big) in results:
        _row(f"scale: {big:,} players stored, all of them playing",
             f"{results[big, big]:,.0f} ({(results[big, big] - base) / base:+.0%}), RSS {rss[big, big]:.0f} MiB")


def _mixed_streams() -> dict[str, list[bytes]]:
    n = GAMES
    return {
        "CSR games": games(n, PLAYERS, seed=23),
        "TSR events (8 players)": turbo_events(n // 8, PLAYERS, seed=24),
        "US Chess events (6 players, 4 rounds)": uscf_events(n // 25, PLAYERS, seed=25),
        "ChessKite attempts": puzzle_attempts(n, PLAYERS, seed=26),
        "Chess Tempo attempts": chesstempo_attempts(n // 2, PLAYERS, 500, seed=27),
    }


def _batch_for(values: list[bytes]) -> int:
    """At most 5,000, and small enough for 20 batches: the rate is timed from the first batch's commit
    to the last, so a stream of one or two batches would time nothing."""
    return max(50, min(5000, len(values) // 20))


async def mixed(pg, broker, log: Path) -> None:
    streams = _mixed_streams()
    for i, (what, values) in enumerate(streams.items()):
        rate = await throughput(pg, broker, log, batch_size=_batch_for(values), values=values, tag=f"mixed{i}")
        print(f"mixed: {what}: {rate:,.0f} messages/s alone ({len(values):,})", flush=True)
        _row(f"alone: {what}, messages/s", f"{rate:,.0f}")
    everything = [v for values in streams.values() for v in values]
    random.Random(28).shuffle(everything)
    rate = await throughput(pg, broker, log, batch_size=_batch_for(everything), values=everything, tag="mixed-all")
    print(f"mixed: all five types in one stream: {rate:,.0f} messages/s ({len(everything):,})", flush=True)
    _row("all five types mixed in one stream, messages/s", f"{rate:,.0f}")


async def horizontal(pg, broker, log: Path) -> None:
    values = games(GAMES, PLAYERS, seed=29)
    for workers in (1, 2, 4):
        tag = f"horizontal{workers}"
        url = await fresh_db(pg, f"bench_{tag}")
        await dev.create_topics(broker.bootstrap_servers, {f"in-{tag}": 6, f"out-{tag}": 6, f"dlq-{tag}": 1})
        await produce_any(broker.bootstrap_servers, f"in-{tag}", values)
        env = worker_env(url, broker.bootstrap_servers, tag, batch_size=5000, db_pool_size=5, max_inflight_batches=3,
                   kafka_session_timeout_ms=6000, kafka_heartbeat_interval_ms=500)
        spawned = time.perf_counter()
        procs = [start_worker(env, log) for _ in range(workers)]
        try:
            rate = await until_processed(url, len(values), procs, f"horizontal {workers}", spawned, log)
        finally:
            for p in procs:
                p.send_signal(signal.SIGTERM)
            for p in procs:
                p.wait(60)
        print(f"horizontal: {workers} worker process(es), 6 partitions: {rate:,.0f} games/s", flush=True)
        _row(f"{workers} worker process(es) in one group, 6 partitions, games/s", f"{rate:,.0f}")


async def main(what: str) -> None:
    pg = (dev.ExternalPostgres(os.environ["DATABASE_URL"]) if os.environ.get("DATABASE_URL")
          else dev.start_postgres(settings=PG_SETTINGS))
    broker = dev.broker_from_env_or_start()
    log = Path(os.environ.get("BENCH_LOG", "/tmp/rw-bench-worker.log"))
    print(f"worker logs: {log}", flush=True)
    try:
        for name, run in (("naive", naive), ("latency", latency_at_rate), ("scale", scale), ("mixed", mixed),
                          ("horizontal", horizontal)):
            if what in (name, "suite"):
                await run(pg, broker, log)
    finally:
        broker.stop()
        pg.stop()
    if what == "suite":
        print_table(f"{os.cpu_count()} CPUs, embedded broker and PostgreSQL (durable commits) on the same machine")


def print_table(title: str) -> None:
    width = max(len(what) for what, _ in TABLE)
    print(f"\n{title}\n{'figure':<{width}}  result\n{'-' * width}  {'-' * 24}")
    for what, result in TABLE:
        print(f"{what:<{width}}  {result}")
