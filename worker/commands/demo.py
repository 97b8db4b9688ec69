"""`rating-worker demo`: the whole thing on one machine, with ratings changing on screen.

Starts an embedded PostgreSQL and broker (or uses DATABASE_URL / KAFKA_BOOTSTRAP_SERVERS), migrates,
runs the worker in this process and streams games between players of hidden strengths: all speeds,
a few duplicates (the same message sent twice) and a few bad messages (they land in the DLQ).
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import contextlib
import logging
import math
import os
import random
import signal
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import asyncpg
import orjson
from rich.console import Console
from rich.live import Live

from worker import config as config_mod
from worker import kafka_clients
from worker.observability import setup_logging
from worker.ratings.csr import CATEGORIES
from worker.store.reads import OperatorReads
from worker.terminal.demo_screen import MOVERS_SHOWN, Entry, Mover, Snapshot, screen

DEMO_SOURCE = "/demo/game-server"
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
        event = {"specversion": "1.0", "id": f"demo-{self.count}", "source": DEMO_SOURCE, "time": at,
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


MOVERS_WINDOW_S = 30.0  # the provisional movers are those of the last half minute


class DeadLetterWatch(logging.Handler):
    """The last dead letter's class and reason, read off the worker's own log line for it."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.last: str | None = None

    def emit(self, record: logging.LogRecord) -> None:
        fields = getattr(record, "fields", None) or {}
        if "dead-lettered" in record.getMessage() and "error_class" in fields:
            self.last = f"{fields['error_class']}: {fields.get('reason') or fields.get('error', '')}"


def _total(metric) -> float:
    return sum(s.value for m in metric.collect() for s in m.samples if not s.name.endswith("_created"))


class Watch:
    """Gathers what the screen shows: the demo's counts, the worker's metrics, and PostgreSQL."""

    def __init__(self, pool, metrics, counts: dict, dead_letters: DeadLetterWatch, metrics_url: str,
                 log_path: str) -> None:
        self.reads, self.metrics, self.counts, self.dead_letters = OperatorReads(pool), metrics, counts, dead_letters
        self.metrics_url, self.log_path = metrics_url, log_path
        self.api_url = ""
        self.started = time.monotonic()
        self.last: tuple[float, int, float] | None = None  # (when, sent, handled) at the previous snapshot
        self.watermarks: collections.deque[tuple[float, int]] = collections.deque()

    async def snapshot(self) -> Snapshot:
        now = time.monotonic()
        handled = int(_total(self.metrics.messages))
        sent = self.counts["games"] + self.counts["duplicates"] + self.counts["bad"]
        when, sent_before, handled_before = self.last or (self.started, 0, 0)
        span = max(now - when, 1e-9)
        self.last = (now, sent, handled)
        lag_samples = [s.value for m in self.metrics.consumer_lag.collect() for s in m.samples]
        status = await self.reads.demo_status()
        self.watermarks.append((now, status["newest_change"]))
        while len(self.watermarks) > 1 and self.watermarks[1][0] <= now - MOVERS_WINDOW_S:
            self.watermarks.popleft()
        movers = await self.reads.provisional_movers(self.watermarks[0][1], MOVERS_SHOWN)
        boards = {}
        for category in CATEGORIES:
            rows = await self.reads.leaderboard("csr", category, 10)
            boards[category] = [Entry(r["player_id"], r["rating"], r["rd"]) for r in rows]
        return Snapshot(
            games_sent=self.counts["games"], sent_per_s=(sent - sent_before) / span,
            duplicates=self.counts["duplicates"], bad=self.counts["bad"], handled=handled,
            handled_per_s=(handled - handled_before) / span,
            lag=int(sum(lag_samples)) if lag_samples else None, unpublished=status["unpublished"],
            dead_letters=int(_total(self.metrics.dead_letters)), last_dead_letter=self.dead_letters.last,
            metrics_url=self.metrics_url, api_url=self.api_url, log_path=self.log_path, boards=boards,
            movers=[Mover(r["player_id"], r["category"], r["moved"], r["rating"], r["rd"]) for r in movers],
            movers_window_s=max(1.0, min(MOVERS_WINDOW_S, now - self.watermarks[0][0])))


def plain_line(s: Snapshot) -> str:
    """One line a refresh when the output is not a terminal (a log, a test)."""
    lag = "-" if s.lag is None else s.lag
    return (f"rating-worker demo: {s.games_sent} games sent, {s.duplicates} duplicates, {s.bad} bad; "
            f"{s.handled} messages processed; consumer lag {lag}; {s.unpublished} awaiting publication; "
            f"dead letters: {s.dead_letters}")


async def run_demo(args) -> int:
    console = Console()
    # The live screen on a terminal that can redraw in place; plain lines into a pipe or a file (rich's own
    # test, is_terminal, follows FORCE_COLOR, which CI jobs set for their logs).
    tty = sys.stdout.isatty() and console.is_interactive
    log_path = args.log_file or os.path.join(tempfile.gettempdir(), f"rating-worker-demo-{os.getpid()}.log")
    try:
        log_file = open(log_path, "a", buffering=1)  # noqa: SIM115 - closed below
    except OSError as exc:
        print(f"rating-worker demo: cannot write the log to {log_path}: {exc.strerror or exc}", file=sys.stderr)
        return 2
    setup_logging("WARNING", json=False, stream=log_file)  # never over the screen
    dead_letters = DeadLetterWatch()
    logging.getLogger().addHandler(dead_letters)
    try:
        return await _demo(args, console, tty, log_path, dead_letters)
    finally:
        logging.getLogger().removeHandler(dead_letters)
        setup_logging("WARNING", json=False)  # back to stderr before the file closes: nothing is lost
        log_file.close()


async def _demo(args, console: Console, tty: bool, log_path: str, dead_letters: DeadLetterWatch) -> int:
    from worker import dev
    from worker.commands.run import run_service
    from worker.dev.api import ApiServer
    from worker.observability import Metrics
    from worker.store.migrate import migrate

    say = print
    say(f"starting PostgreSQL and the broker ... (the log: {log_path})", flush=True)
    postgres = dev.postgres_from_env_or_start()
    broker = dev.broker_from_env_or_start()
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    worker_task = None
    worker_stop = None
    api = None
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
        api = await asyncio.to_thread(ApiServer(postgres.url, Path(log_path), {"LOG_LEVEL": "WARNING"}).start)
        # the leaderboard's page: it follows the ratings as the demo's games are rated (worker.api.pages)
        api_url = f"{api.url}/leaderboards/csr/{CATEGORIES[1]}"
        say(f"read API: {api_url} (its JSON: {api.url}/v1/leaderboards/csr/{CATEGORIES[1]}, all routes: "
            f"{api.url}/openapi.json)", flush=True)
        producer = kafka_clients.producer(cfg, linger_ms=5)  # the demo's game server
        await producer.start()
        pool = await asyncpg.create_pool(postgres.url, min_size=1, max_size=2)
        counts = {"games": 0, "duplicates": 0, "bad": 0}
        watch = Watch(pool, metrics, counts, dead_letters, metrics_url, log_path)
        watch.api_url = api_url
        sender = asyncio.create_task(_stream(producer, cfg.kafka_input_topics[0], GameStream(args.players, args.seed),
                                             args.rate, args.games, counts, stop))
        live = Live(console=console, auto_refresh=False, transient=False) if tty else None
        try:
            if live is not None:
                console.clear()  # the screen from the top: what start-up printed would push it off
                live.start()
            while True:
                # Caught up is checked before the snapshot, so that the last one shown is after it.
                finished = sender.done() and args.games and await _caught_up(pool, metrics, counts)
                snap = await watch.snapshot()
                if live is not None:
                    width, height = console.size
                    live.update(screen(snap, list(CATEGORIES), width, height - 1), refresh=True)
                else:
                    print(plain_line(snap), flush=True)
                if stop.is_set() or finished:
                    break
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(stop.wait(), args.refresh)
        finally:
            if live is not None:
                live.stop()
            stop.set()
            sender.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await sender
            await producer.stop()
            await pool.close()
        if not tty:  # the last screen, whole, for the log
            Console(width=120, force_terminal=False).print(screen(snap, list(CATEGORIES), 120, 60))
        return 0
    finally:
        say("stopping ...", flush=True)
        if api is not None:
            await asyncio.to_thread(api.stop)
        if worker_task is not None:
            worker_stop.set()
            with contextlib.suppress(Exception):
                await asyncio.wait_for(worker_task, 60)
        broker.stop()
        postgres.stop()
        say(f"stopped: nothing left running (the log: {log_path})", flush=True)


async def _caught_up(pool, metrics, counts: dict) -> bool:
    """Every message sent was handled (its outcome counted: applied, duplicate, unrated or dead-lettered)
    and every game's offset committed with it (processed ids are written in the batch's transaction)."""
    sent = counts["games"] + counts["duplicates"] + counts["bad"]
    return (_total(metrics.messages) >= sent
            and await OperatorReads(pool).processed_from(DEMO_SOURCE) >= counts["games"])


def main(args: argparse.Namespace) -> int:
    return asyncio.run(run_demo(args))


def add_parser(sub) -> None:
    p = sub.add_parser("demo", help="everything local: PostgreSQL, broker, worker, a stream of games", description=(
        "Start an embedded PostgreSQL and Kafka-protocol broker on free loopback ports, migrate, run the worker "
        "and the read API (rating-worker serve: the URL of its leaderboard page is printed and shown) and stream demo games (hundreds of players, all speeds, a few duplicates and bad messages). On a "
        "terminal, one screen fitting it, refreshed in place: the stream's and the worker's rates, the consumer "
        "lag, the changes awaiting publication, the dead letters (the last one's reason), each CSR category's "
        "leaderboard (established ratings only) and the biggest provisional movers; the log goes to a file "
        "named on it. Otherwise a line per refresh. Ctrl-C stops everything."))
    p.add_argument("--players", type=int, default=300, help="players in the demo population (default 300)")
    p.add_argument("--rate", type=float, default=200.0, help="games per second (default 200)")
    p.add_argument("--games", type=int, default=0, help="stop after this many games (default: until Ctrl-C)")
    p.add_argument("--metrics-port", type=int, default=0, help="metrics port (default: a free one)")
    p.add_argument("--refresh", type=float, default=2.0, help="seconds between screen refreshes (default 2)")
    p.add_argument("--seed", type=int, default=7, help="random seed of the demo stream")
    p.add_argument("--log-file", metavar="FILE",
                   help="where the worker's log lines go (default: rating-worker-demo-PID.log in the temp directory)")
    p.set_defaults(func=main)
