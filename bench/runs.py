"""End-to-end throughput and latency of one worker process against the embedded services: the runs that
`./dev bench throughput`, `latency` and the others (bench/pipeline.py), `suite`, `limit` and `backfill` make.

Throughput: N games produced up front, then one `rating-worker run` process consumes them; games/s is
measured from its first processed message to its last (start-up excluded), end to end (decode, dedupe,
lock, rate, write, commit, publish, mark published, commit offsets).
Latency: games produced at a steady rate while the worker runs; for each game the time from its send to
the arrival of its first rating.changed on the output topic; p50 / p99.
"""

from __future__ import annotations

import asyncio
import os
import signal
import statistics
import time
from pathlib import Path

import orjson
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer

from bench.common import (
    drop_db,
    fresh_db,
    produce_any,
    start_worker,
    until_processed,
    worker_env,
)
from worker import dev
from worker.dev.streams import games, player_of

GAMES = int(os.environ.get("BENCH_GAMES", "100000"))  # 20 batches of 5,000: fewer time too little
PLAYERS = int(os.environ.get("BENCH_PLAYERS", "2000"))
LATENCY_RATE = int(os.environ.get("BENCH_RATE", "1000"))
LATENCY_SECONDS = int(os.environ.get("BENCH_SECONDS", "20"))
LATENCY_LINGER_MS = int(os.environ.get("BENCH_LINGER_MS", "5"))
# The embedded broker holds every fetch up to fetch.max.wait.ms even when records are waiting (Apache
# Kafka answers at once): at the worker's default of 500 the first seconds of a stream wait up to 250 ms
# in it (docs/operations.md, "The embedded broker"; ./dev bench broker).
LATENCY_FETCH_WAIT_MS = int(os.environ.get("BENCH_FETCH_MAX_WAIT_MS", "100"))


async def throughput(pg, broker, log: Path, batch_size: int = 1000, values: list[bytes] | None = None,
                     tag: str = "", url: str | None = None, **settings) -> float:
    """Messages/s of one worker process over `values` (default: BENCH_GAMES games), produced up front.

    `url`: a database already prepared (default: a fresh one); `settings`: more worker settings."""
    tag = tag or f"tp{batch_size}"
    own = None if url else f"bench_{tag}"  # a database made here is dropped here, once measured
    url = url or await fresh_db(pg, own)
    await dev.create_topics(broker.bootstrap_servers, {f"in-{tag}": 3, f"out-{tag}": 3, f"dlq-{tag}": 1})
    values = values if values is not None else games(GAMES, PLAYERS, seed=3)
    total = len(values)
    await produce_any(broker.bootstrap_servers, f"in-{tag}", values)
    spawned = time.perf_counter()
    proc = start_worker(worker_env(url, broker.bootstrap_servers, tag, batch_size=batch_size, **settings), log)
    try:
        rate = await until_processed(url, total, [proc], "throughput", spawned, log)
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(60)
    if own:
        await drop_db(pg, own)
    return rate


async def latency(pg, broker, log: Path, rate: int = LATENCY_RATE, seconds: int = LATENCY_SECONDS,
                  players: int = PLAYERS, echo: bool = False) -> tuple[float, float, int]:
    """(p50 ms, p99 ms, games) from each game's send at `rate` games/s to its first rating.changed.

    `echo`: the baseline instead of the worker, bench/echo.py (the same consumer and producer settings,
    no database): what two hops through this broker cost at this rate."""
    tag = f"lat{rate}-{players}" + ("-echo" if echo else "")
    own = f"bench_{tag}".replace("-", "_")
    url = await fresh_db(pg, own)
    await dev.create_topics(broker.bootstrap_servers, {f"in-{tag}": 3, f"out-{tag}": 3, f"dlq-{tag}": 1})
    env = worker_env(url, broker.bootstrap_servers, tag, kafka_fetch_max_wait_ms=LATENCY_FETCH_WAIT_MS)
    proc = start_worker(env, log, module="bench.echo" if echo else None)
    consumer = AIOKafkaConsumer(f"out-{tag}", bootstrap_servers=broker.bootstrap_servers, group_id=None,
                                auto_offset_reset="latest", fetch_max_wait_ms=10)
    await consumer.start()
    producer = AIOKafkaProducer(bootstrap_servers=broker.bootstrap_servers, enable_idempotence=False,
                                linger_ms=LATENCY_LINGER_MS)
    await producer.start()
    total = rate * seconds
    values = games(total + 200, players, seed=4)
    sent: dict[str, float] = {}
    seen: dict[str, float] = {}

    async def receive() -> None:
        while len(seen) < total:
            batch = await consumer.getmany(timeout_ms=100)
            now = time.perf_counter()
            for records in batch.values():
                for r in records:
                    cause = orjson.loads(r.value)["data"]["cause"]["id"]
                    seen.setdefault(cause, now)

    try:
        # warm-up: the worker has joined its group once the first game comes back
        await producer.send_and_wait(f"in-{tag}", values[-1])
        while not seen:
            batch = await consumer.getmany(timeout_ms=200)
            if any(batch.values()):
                break
        receiver = asyncio.create_task(receive())
        start = time.perf_counter()
        for i, v in enumerate(values[:total]):
            due = start + i / rate
            delay = due - time.perf_counter()
            if delay > 0:
                await asyncio.sleep(delay)
            sent[f"game-{i}"] = time.perf_counter()
            await producer.send(f"in-{tag}", v, key=player_of(v))
        await asyncio.wait_for(receiver, 120)
    finally:
        await producer.stop()
        await consumer.stop()
        proc.send_signal(signal.SIGTERM)
        proc.wait(60)
    await drop_db(pg, own)
    _print_timeline(sent, seen, start)
    lat = sorted((seen[k] - t) * 1000 for k, t in sent.items() if k in seen)
    return statistics.median(lat), lat[int(len(lat) * 0.99) - 1], len(lat)


def _print_timeline(sent: dict[str, float], seen: dict[str, float], start: float, window: float = 5.0) -> None:
    """p50 / p99 per window of send time: shows whether latency drifts while the rate stays the same."""
    windows: dict[int, list[float]] = {}
    for k, t in sent.items():
        if k in seen:
            windows.setdefault(int((t - start) // window), []).append((seen[k] - t) * 1000)
    for w, lat in sorted(windows.items()):
        lat.sort()
        print(f"  latency {w * window:>4.0f}-{(w + 1) * window:.0f} s: p50 {statistics.median(lat):7.1f} ms, "
              f"p99 {lat[max(0, int(len(lat) * 0.99) - 1)]:7.1f} ms ({len(lat)} games)")
