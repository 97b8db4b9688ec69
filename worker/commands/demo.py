"""`rating-worker demo`: the whole thing on one machine, with ratings changing on screen.

Starts an embedded PostgreSQL and broker (or uses DATABASE_URL / KAFKA_BOOTSTRAP_SERVERS), migrates,
runs the worker in this process and streams games between players of hidden strengths: all speeds,
a few duplicates (the same message sent twice) and a few bad messages (they land in the DLQ).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import math
import random
import signal
import sys
import time
from datetime import UTC, datetime, timedelta

import asyncpg
import orjson

from worker import config as config_mod
from worker import kafka_clients
from worker.observability import setup_logging
from worker.ratings.csr import CATEGORIES

TIME_CONTROLS = [
    ({"base_seconds": 60, "increment_seconds": 0}, 3), ({"base_seconds": 120, "increment_seconds": 1}, 2),
    ({"base_seconds": 180, "increment_seconds": 2}, 4), ({"base_seconds": 300, "increment_seconds": 0}, 5),
    ({"base_seconds": 600, "increment_seconds": 5}, 3), ({"base_seconds": 900, "increment_seconds": 10}, 2),
    ({"base_seconds": 1800, "increment_seconds": 20}, 1), ({"days_per_move": 3}, 1),
]
BAD_MESSAGES = [
    b"{not json",
    b'{"specversion": "1.0", "id": "x", "source": "/demo", "type": "game.finished"}',
    orjson.dumps({"specversion": "1.0", "id": "bad-result", "source": "/demo", "type": "game.finished",
                  "time": "2026-11-30T12:00:00Z",
                  "data": {"game_id": "g", "rated": True, "variant": "standard",
                           "time_control": {"base_seconds": 300, "increment_seconds": 0},
                           "white": {"player_id": "a"}, "black": {"player_id": "b"}, "result": "2-0",
                           "finished_at": "2026-11-30T12:00:00Z"}}),
]


class GameStream:
    """Games between players with a hidden strength; the stronger wins more often (Elo odds)."""

    def __init__(self, players: int, seed: int) -> None:
        self.rng = random.Random(seed)
        self.strength = {f"player-{i:04d}": self.rng.gauss(1500, 300) for i in range(players)}
        self.names = list(self.strength)
        self.clock = datetime(2026, 11, 1, tzinfo=UTC)
        self.count = 0

    def next_game(self) -> tuple[str, bytes]:
        self.count += 1
        white, black = self.rng.sample(self.names, 2)
        diff = self.strength[white] + 35 - self.strength[black]
        p_white = 1 / (1 + 10 ** (-diff / 400))
        draw = 0.2 * math.exp(-abs(diff) / 400)
        u = self.rng.random()
        result = "1/2-1/2" if u < draw else "1-0" if u < draw + (1 - draw) * p_white else "0-1"
        tc = self.rng.choices([t for t, _ in TIME_CONTROLS], [w for _, w in TIME_CONTROLS])[0]
        self.clock += timedelta(seconds=self.rng.randint(1, 30))
        at = self.clock.strftime("%Y-%m-%dT%H:%M:%SZ")
        game = {"game_id": f"demo-{self.count}", "rated": self.rng.random() > 0.03, "variant": "standard",
                "time_control": tc, "white": {"player_id": white}, "black": {"player_id": black},
                "result": result, "finished_at": at}
        event = {"specversion": "1.0", "id": f"demo-{self.count}", "source": "/demo/game-server", "time": at,
                 "type": "game.finished", "datacontenttype": "application/json", "data": game}
        return white, orjson.dumps(event)


async def _stream(producer, topic: str, stream: GameStream, rate: float, games: int, counts: dict,
                  stop: asyncio.Event) -> None:
    started = time.monotonic()
    last_value = None
    while not stop.is_set() and (games == 0 or counts["games"] < games):
        due = started + counts["games"] / rate
        await asyncio.sleep(max(0.0, due - time.monotonic()))
        key, value = stream.next_game()
        await producer.send(topic, value=value, key=key.encode())
        counts["games"] += 1
        if last_value is not None and stream.rng.random() < 0.01:  # a duplicate delivery
            await producer.send(topic, value=last_value)
            counts["duplicates"] += 1
        if stream.rng.random() < 0.005:  # a bad message
            await producer.send(topic, value=stream.rng.choice(BAD_MESSAGES))
            counts["bad"] += 1
        last_value = value
    await producer.flush()


TOP_QUERY = """
SELECT category, player_id, rating, rd, games FROM (
  SELECT category, player_id, rating, rd, games,
         row_number() OVER (PARTITION BY category ORDER BY (rd <= 110) DESC, rating DESC) AS n
  FROM ratings WHERE system = 'csr') t
WHERE n <= 10 ORDER BY category, n
"""


async def _screen(pool, counts: dict, metrics_url: str, started: float) -> str:
    rows = await pool.fetch(TOP_QUERY)
    stats = await pool.fetchrow(
        "SELECT (SELECT count(*) FROM processed_messages) AS processed,"
        " (SELECT count(*) FROM rating_changes) AS changes,"
        " (SELECT count(*) FROM outbox) AS unpublished"
    )
    elapsed = max(time.monotonic() - started, 1e-9)
    by_cat: dict[str, list] = {c: [] for c in CATEGORIES}
    for r in rows:
        mark = "" if r["rd"] <= 110 else "?"
        by_cat[r["category"]].append(f"{r['player_id']} {r['rating']:6.0f}{mark:1} ±{r['rd']:3.0f} ({r['games']})")
    lines = [
        f"rating-worker demo: {counts['games']} games sent ({counts['games'] / elapsed:.0f}/s), "
        f"{counts['duplicates']} duplicates, {counts['bad']} bad; {stats['processed']} messages processed, "
        f"{stats['changes']} rating changes ({stats['unpublished']} awaiting publish); "
        f"dead letters: {counts['dead_letters']}",
        f"metrics: {metrics_url}    (? = provisional, RD > 110)    Ctrl-C stops everything",
        "",
    ]
    for cat in CATEGORIES:
        entries = by_cat[cat] or ["(no games yet)"]
        lines.append(f"{cat.upper():15} " + " | ".join(entries[:5]))
        if len(entries) > 5:
            lines.append(" " * 16 + " | ".join(entries[5:10]))
    return "\n".join(lines)


async def run_demo(args) -> int:
    from worker import dev
    from worker.commands.run import run_service
    from worker.observability import Metrics
    from worker.store.migrate import migrate

    setup_logging("WARNING", json=False)
    tty = sys.stdout.isatty()
    say = print
    say("starting PostgreSQL and the broker ...", flush=True)
    postgres = dev.postgres_from_env_or_start()
    broker = dev.broker_from_env_or_start()
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    worker_task = None
    worker_stop = None
    try:
        await migrate(postgres.url)
        cfg = config_mod.load(env={}, database_url=postgres.url, kafka_bootstrap_servers=broker.bootstrap_servers,
                              metrics_host="127.0.0.1", metrics_port=args.metrics_port or dev.free_port(),
                              log_level="WARNING",
                              # Tansu holds a group join for half the session timeout: keep start-up quick.
                              kafka_session_timeout_ms=2000, kafka_heartbeat_interval_ms=300)
        await dev.create_topics(broker.bootstrap_servers, {cfg.kafka_input_topics[0]: 3, **{
            t: 1 for t in cfg.kafka_input_topics[1:]}, cfg.kafka_output_topic: 3, cfg.kafka_dlq_topic: 1})
        metrics_url = f"http://127.0.0.1:{cfg.metrics_port}/metrics"
        say(f"PostgreSQL: {postgres.url}\nbroker: {broker.bootstrap_servers}\nmetrics: {metrics_url}", flush=True)
        worker_started, worker_stop, metrics = asyncio.Event(), asyncio.Event(), Metrics()
        worker_task = asyncio.create_task(run_service(
            cfg, started=worker_started, stop_event=worker_stop, metrics=metrics, install_signals=False))
        await asyncio.wait_for(worker_started.wait(), 120)
        producer = kafka_clients.producer(cfg, linger_ms=5)  # the demo's game server
        await producer.start()
        pool = await asyncpg.create_pool(postgres.url, min_size=1, max_size=2)
        counts = {"games": 0, "duplicates": 0, "bad": 0, "dead_letters": 0}
        stream = GameStream(args.players, args.seed)
        started = time.monotonic()
        sender = asyncio.create_task(_stream(producer, cfg.kafka_input_topics[0], stream, args.rate, args.games,
                                             counts, stop))
        try:
            while True:
                done = sender.done()
                if done and args.games:
                    # wait for the worker to catch up with what was sent
                    await asyncio.sleep(args.refresh)
                counts["dead_letters"] = int(sum(
                    s.value for m in metrics.dead_letters.collect() for s in m.samples if s.name.endswith("_total")))
                screen = await _screen(pool, counts, metrics_url, started)
                if tty:
                    sys.stdout.write("\x1b[2J\x1b[H" + screen + "\n")
                else:
                    sys.stdout.write(screen.splitlines()[0] + "\n")
                sys.stdout.flush()
                if stop.is_set() or (done and args.games and await _caught_up(pool, counts)):
                    break
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(stop.wait(), args.refresh)
        finally:
            stop.set()
            sender.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await sender
            await producer.stop()
            await pool.close()
        if not tty:
            sys.stdout.write(screen + "\n")
        return 0
    finally:
        say("stopping ...", flush=True)
        if worker_task is not None:
            worker_stop.set()
            with contextlib.suppress(Exception):
                await asyncio.wait_for(worker_task, 60)
        broker.stop()
        postgres.stop()
        say("stopped: nothing left running", flush=True)


async def _caught_up(pool, counts: dict) -> bool:
    processed = await pool.fetchval("SELECT count(*) FROM processed_messages WHERE source = '/demo/game-server'")
    return processed >= counts["games"]


def main(args: argparse.Namespace) -> int:
    return asyncio.run(run_demo(args))


def add_parser(sub) -> None:
    p = sub.add_parser("demo", help="everything local: PostgreSQL, broker, worker, a stream of games", description=(
        "Start an embedded PostgreSQL and Kafka-protocol broker on free loopback ports, migrate, run the worker "
        "and stream demo games (hundreds of players, all speeds, a few duplicates and bad messages), showing "
        "the top 10 per category as ratings change. Ctrl-C stops everything."))
    p.add_argument("--players", type=int, default=300, help="players in the demo population (default 300)")
    p.add_argument("--rate", type=float, default=200.0, help="games per second (default 200)")
    p.add_argument("--games", type=int, default=0, help="stop after this many games (default: until Ctrl-C)")
    p.add_argument("--metrics-port", type=int, default=0, help="metrics port (default: a free one)")
    p.add_argument("--refresh", type=float, default=2.0, help="seconds between screen refreshes (default 2)")
    p.add_argument("--seed", type=int, default=7, help="random seed of the demo stream")
    p.set_defaults(func=main)
