"""`./dev bench api`: the read API (`rating-worker serve`, one process, its default pool of 10 connections)
under load from wrk, against the same reads issued by a bare asyncpg loop in the same run (issue 40, item 6).

Two databases (bench/api_data.py): BENCH_API_RATED (20,000) players rated by real games through the engine,
and BENCH_API_STORED (1,000,000) stored, the rest bulk-loaded. Five routes, each request drawn at random
from thousands (BENCH_API_SAMPLE, 5,000: player ids, leaderboard pages, histories, pairs) by
bench/wrk_paths.lua, so that no cache answers the same question twice in a row:

  player      GET /v1/players/{id}
  board       GET /v1/leaderboards/csr/{blitz,rapid}?limit=100             (the first page)
  board_page  GET /v1/leaderboards/csr/blitz?limit=100&cursor=...          (the page after a random entry)
  history     GET /v1/players/{id}/history/csr/{category}                 (the first page, up to 100)
  preview     GET /v1/preview/csr/blitz?white=&black=

1. Throughput, each database: wrk with BENCH_API_CONNECTIONS (16) connections for BENCH_API_SECONDS (10)
   per route, requests/s and p50/p99; then the bare loop: as many asyncio tasks, a pool of as many
   connections as the API's, the same statements (worker.store.reads, worker.store.postgres) with the same
   arguments, no HTTP and nothing computed on the rows. The ratio API / bare is the figure.
2. At a fixed rate (BENCH_API_RATE, 500 requests/s; wrk has none, the script spaces its sends), on the stored
   database: p50/p99 with nothing else running, then with a real worker rating BENCH_API_GAMES_RATE (1,000)
   games/s beside it (the embedded broker, games produced at that rate, as bench/runs.py's latency run).

wrk (Debian's `apt-get install wrk`) is the load generator: one this project did not write, in its own
process. Everything shares the machine's cores: wrk, the API, PostgreSQL, the bench (the bare loop, the
producer), the worker and the broker; the CPU line says who used them.

BENCH_API_QUICK=1: a development run of a few minutes (2,000 players rated, 50,000 stored, 2 s a route).
"""

from __future__ import annotations

import asyncio
import os
import random
import shutil
import signal
import statistics
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path

import asyncpg
import orjson
from aiokafka import AIOKafkaProducer

from bench import api_data, cpu
from bench.common import PG_SETTINGS, cpu_model, drop_db, start_worker, worker_env
from worker import dev
from worker.api.app import unchanged_session
from worker.config import ServeConfig
from worker.dev.api import ApiServer
from worker.dev.streams import player_of
from worker.ratings.registry import RATINGS
from worker.ratings.state import StateKey
from worker.store.postgres import PostgresTx, init_connection
from worker.store.reads import OperatorReads

QUICK = os.environ.get("BENCH_API_QUICK", "") not in ("", "0")
RATED = int(os.environ.get("BENCH_API_RATED", "2000" if QUICK else "20000"))
GAMES = int(os.environ.get("BENCH_API_GAMES", str(RATED * 10)))
STORED = int(os.environ.get("BENCH_API_STORED", "50000" if QUICK else "1000000"))
SECONDS = float(os.environ.get("BENCH_API_SECONDS", "2" if QUICK else "10"))
WARM_S = 1.0 if QUICK else 2.0
SAMPLE = int(os.environ.get("BENCH_API_SAMPLE", "500" if QUICK else "5000"))
CONNECTIONS = int(os.environ.get("BENCH_API_CONNECTIONS", "16"))
RATE = int(os.environ.get("BENCH_API_RATE", "500"))
RATE_CONNECTIONS = int(os.environ.get("BENCH_API_RATE_CONNECTIONS", "64"))  # to spare: a slot waits for none
GAMES_RATE = int(os.environ.get("BENCH_API_GAMES_RATE", "1000"))
POOL = ServeConfig.api_db_pool_size  # the API's default, the bare loop's too
LUA = Path(__file__).with_name("wrk_paths.lua")
ROUTES = ("player", "board", "board_page", "history", "preview")


def wrk_missing() -> str | None:
    if shutil.which("wrk"):
        return None
    return ("bench api: wrk, the load generator, is not installed: `apt-get install wrk` (Debian, Ubuntu; "
            "as root), `brew install wrk` (macOS), then run it again")


@dataclass(frozen=True)
class Load:
    """One route's run: requests answered, in how long, the latency percentiles, the CPU it took."""

    requests: int
    seconds: float
    p50_ms: float
    p99_ms: float
    usage: cpu.Usage | None = None

    @property
    def rate(self) -> float:
        return self.requests / self.seconds

    def brief(self) -> str:
        return f"{self.rate:,.0f}/s, p50 {self.p50_ms:.1f} ms, p99 {self.p99_ms:.1f} ms"

    def cpu_line(self, who: str) -> str:
        u = self.usage
        if u is None:
            return ""
        us = 1e6 / self.requests
        return (f"{who} {u.processes * us:.0f} us, PostgreSQL {u.postgresql * us:.0f} us of CPU a request, "
                f"{u.machine / u.wall / (os.cpu_count() or 1):.0%} of the cores busy")


async def wrk(base_url: str, paths: list[str], seconds: float, connections: int, rate: int | None = None,
              pids: tuple[int, ...] = ()) -> Load:
    """wrk against `base_url` for `seconds`, each request a random one of `paths` (bench/wrk_paths.lua);
    `rate`: requests/s at most, spaced. Raises when any request failed (an error is not a figure)."""
    with tempfile.NamedTemporaryFile("w", suffix=".paths", delete=False) as f:
        f.write("\n".join(paths) + "\n")
    try:
        before = cpu.read(pids)
        proc = await asyncio.create_subprocess_exec(
            "wrk", "-t1", f"-c{connections}", f"-d{max(1, round(seconds))}s", "--timeout", "10s", "-s", str(LUA),
            base_url, "--", f.name, *([str(rate)] if rate else []),
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE, env={**os.environ, "WRK_THREADS": "1"})
        out, err = await proc.communicate()
        usage = cpu.between(before, cpu.read(pids))
    finally:
        os.unlink(f.name)
    lines = [line for line in out.decode().splitlines() if line.startswith("{")]
    if proc.returncode or not lines:
        raise RuntimeError(f"wrk failed ({proc.returncode}): {err.decode()[-1000:]} {out.decode()[-1000:]}")
    r = orjson.loads(lines[-1])
    failed = {k: r[k] for k in ("non2xx", "connect", "read", "write", "timeout") if r[k]}
    if failed:
        raise RuntimeError(f"wrk: requests failed against {base_url}{paths[0]} ...: {failed}")
    return Load(r["requests"], r["duration_us"] / 1e6, r["p50_us"] / 1000, r["p99_us"] / 1000, usage)


# The bare loop's request per route: what the API's handler reads, statement for statement, on one
# connection of the pool, with nothing done to the rows.

async def _player(conn, args) -> None:
    reads = OperatorReads(conn)
    await reads.player_account(args[0])
    if await reads.player_ratings(args[0], SYSTEMS):
        await reads.player_boards(args[0], SYSTEMS)  # the ranks come from boards held in memory (standings)


async def _board(conn, args) -> None:
    await OperatorReads(conn).leaderboard_page(*args, 101, (float("inf"), ""), None)


async def _board_page(conn, args) -> None:
    system, category, rating, player_id = args
    await OperatorReads(conn).leaderboard_page(system, category, 101, (rating, player_id), None)


async def _history(conn, args) -> None:
    await OperatorReads(conn).rating_history(*args, 0, None, None, 101, False)


async def _preview(conn, args) -> None:
    tx = PostgresTx(conn)  # the preview's reader, as the API's (worker.engine.preview.points_at_stake)
    await tx.closed_accounts(list(args))
    await tx.load_states([StateKey(p, "csr", "blitz") for p in args])


SYSTEMS = list(RATINGS)  # the systems the player route asks for (worker.api.players: every rating system)
BARE: dict[str, Callable[[asyncpg.Connection, tuple], Awaitable[None]]] = {
    "player": _player, "board": _board, "board_page": _board_page, "history": _history, "preview": _preview}


async def open_pool(url: str) -> asyncpg.Pool:
    """A pool as the API's (worker.api.app.create_app): its size, its reset, its sessions' settings, its codecs."""
    return await asyncpg.create_pool(
        url, min_size=0, max_size=POOL, init=init_connection, reset=unchanged_session,
        server_settings={"application_name": "bench-api-bare", "jit": "off", "default_transaction_read_only": "on",
                         "statement_timeout": "5000"})


async def bare(pool: asyncpg.Pool, route: str, arguments: list[tuple], seconds: float, concurrency: int) -> Load:
    """`concurrency` tasks, each issuing the route's reads for a random one of `arguments`, for `seconds`."""
    read = BARE[route]
    latencies: list[float] = []
    rng = random.Random(7)
    deadline = time.perf_counter() + seconds

    async def one_client() -> None:
        while time.perf_counter() < deadline:
            args = rng.choice(arguments)
            start = time.perf_counter()
            async with pool.acquire() as conn:
                await read(conn, args)
            latencies.append(time.perf_counter() - start)

    before = cpu.read([os.getpid()])
    started = time.perf_counter()
    await asyncio.gather(*(one_client() for _ in range(concurrency)))
    wall = time.perf_counter() - started
    usage = cpu.between(before, cpu.read([os.getpid()]))
    latencies.sort()
    return Load(len(latencies), wall, statistics.median(latencies) * 1000,
                latencies[max(0, int(len(latencies) * 0.99) - 1)] * 1000, usage)


@dataclass(frozen=True)
class Compared:
    database: str
    route: str
    api: Load
    bare: Load

    @property
    def ratio(self) -> float:
        return self.api.rate / self.bare.rate


async def throughput(server: ApiServer, url: str, database: str, requests: api_data.Requests) -> list[Compared]:
    """Each route through the API, then by the bare loop, one right after the other."""
    out = []
    pool = await open_pool(url)
    try:
        for route in ROUTES:
            paths = [p for p, _ in requests[route]]
            arguments = [a for _, a in requests[route]]
            await wrk(server.url, paths, WARM_S, CONNECTIONS)
            api = await wrk(server.url, paths, SECONDS, CONNECTIONS, pids=(server.proc.pid,))
            await bare(pool, route, arguments, WARM_S, CONNECTIONS)
            loop = await bare(pool, route, arguments, SECONDS, CONNECTIONS)
            out.append(Compared(database, route, api, loop))
            print(f"  {database} {route}: API {api.brief()} ({api.cpu_line('API')}); bare {loop.brief()} "
                  f"({loop.cpu_line('bare loop')}): {api.rate / loop.rate:.2f}", flush=True)
    finally:
        await pool.close()
    return out


@dataclass(frozen=True)
class Paced:
    route: str
    idle: Load
    busy: Load
    games_per_s: float  # what the worker rated while the busy run lasted


async def _processed(url: str) -> int:
    conn = await asyncpg.connect(url)
    try:
        return await conn.fetchval("SELECT count(*) FROM processed_messages WHERE source = $1", api_data.SOURCE)
    finally:
        await conn.close()


async def _at_rate(server: ApiServer, paths: list[str], measured: bool = True) -> Load:
    """One route at RATE requests/s for SECONDS (`measured`), or for WARM_S before it: a route the API can
    not answer at that rate leaves up to RATE_CONNECTIONS requests in it when wrk stops, which the next run's
    first second would wait for."""
    return await wrk(server.url, paths, SECONDS if measured else WARM_S, RATE_CONNECTIONS, RATE,
                     pids=(server.proc.pid,))


async def paced(server: ApiServer, url: str, requests: api_data.Requests, log: Path) -> list[Paced]:
    """Each route at RATE requests/s with nothing else running, then again with a worker rating GAMES_RATE
    games/s into the same database (its own broker; the games produced at that rate from this process)."""
    idle = {}
    for route in ROUTES:
        await _at_rate(server, [p for p, _ in requests[route]], measured=False)
        idle[route] = await _at_rate(server, [p for p, _ in requests[route]])
        print(f"  at {RATE}/s, idle: {route}: {idle[route].brief()}", flush=True)
    broker = dev.broker_from_env_or_start()
    tag = "api-busy"
    await dev.create_topics(broker.bootstrap_servers, {f"in-{tag}": 3, f"out-{tag}": 3, f"dlq-{tag}": 1})
    worker = start_worker(worker_env(url, broker.bootstrap_servers, tag, kafka_fetch_max_wait_ms=100), log)
    producer = AIOKafkaProducer(bootstrap_servers=broker.bootstrap_servers, enable_idempotence=False, linger_ms=5)
    await producer.start()
    needed = int(GAMES_RATE * (len(ROUTES) * (SECONDS + WARM_S + 32) + 120))
    values = api_data.busy_games(needed, RATED, GAMES)
    out = []
    produced = [0]

    async def produce() -> None:
        start = time.perf_counter()
        for i, v in enumerate(values):
            delay = start + i / GAMES_RATE - time.perf_counter()
            if delay > 0:
                await asyncio.sleep(delay)
            await producer.send(f"in-{tag}", v, key=player_of(v))
            produced[0] = i + 1
        raise RuntimeError(f"the {len(values):,} games for the busy runs ran out")

    async def caught_up(seconds: float) -> None:
        """Until the worker is less than a second behind the games produced (at most `seconds`): else it rates
        a backlog at its full speed in the next run (the one left by its start, or by a route that starved it)."""
        deadline = time.monotonic() + seconds
        while produced[0] < GAMES_RATE * 5 or produced[0] - (await _processed(url) - base) > GAMES_RATE:
            if worker.poll() is not None or producing.done():
                raise RuntimeError(f"the worker or its producer stopped, see {log}")
            if time.monotonic() > deadline:
                return
            await asyncio.sleep(0.5)

    producing = asyncio.create_task(produce())
    try:
        base = await _processed(url)
        await caught_up(120)
        for route in ROUTES:
            await caught_up(30)
            await _at_rate(server, [p for p, _ in requests[route]], measured=False)
            before, t = await _processed(url), time.perf_counter()
            busy = await _at_rate(server, [p for p, _ in requests[route]])
            games = (await _processed(url) - before) / (time.perf_counter() - t)
            out.append(Paced(route, idle[route], busy, games))
            print(f"  at {RATE}/s, worker rating {games:,.0f} games/s: {route}: {busy.brief()}", flush=True)
    finally:
        producing.cancel()
        await asyncio.gather(producing, return_exceptions=True)
        await producer.stop()
        worker.send_signal(signal.SIGTERM)
        worker.wait(60)
        broker.stop()
    return out


def report(compared: list[Compared], rates: list[Paced], shapes: dict[str, str]) -> str:
    lines = [f"API: `rating-worker serve`, one process, a pool of {POOL}; wrk -t1 -c{CONNECTIONS}, {SECONDS:g} s a "
             f"route; bare loop: {CONNECTIONS} asyncio tasks on a pool of {POOL}, the same statements; "
             f"{cpu_model()}, {os.cpu_count()} cores, PostgreSQL production-sized, durable commits",
             *(f"- {name}: {what}" for name, what in shapes.items()), "",
             "| database | route | API / bare | API requests/s (p50 / p99 ms) | bare loop requests/s (p50 / p99 ms) |",
             "|---|---|---|---|---|"]
    for c in compared:
        lines.append(f"| {c.database} | {c.route} | **{c.ratio:.2f}** | {c.api.rate:,.0f} ({c.api.p50_ms:.1f} / "
                     f"{c.api.p99_ms:.1f}) | {c.bare.rate:,.0f} ({c.bare.p50_ms:.1f} / {c.bare.p99_ms:.1f}) |")
    if rates:
        lines += ["", f"At {RATE} requests/s (wrk -c{RATE_CONNECTIONS}, sends spaced), {STORED:,} players stored, "
                  f"alone and with a worker rating {GAMES_RATE:,} games/s:", "",
                  "| route | p99 alone (p50), achieved rate | p99 worker busy (p50), achieved rate | worker games/s |",
                  "|---|---|---|---|"]
        for p in rates:
            lines.append(f"| {p.route} | {p.idle.p99_ms:.1f} ms ({p.idle.p50_ms:.1f}), {p.idle.rate:,.0f}/s | "
                         f"**{p.busy.p99_ms:.1f} ms** ({p.busy.p50_ms:.1f}), {p.busy.rate:,.0f}/s | "
                         f"{p.games_per_s:,.0f} |")
    return "\n".join(lines)


async def main() -> int:
    if (missing := wrk_missing()) is not None:
        print(missing, file=sys.stderr)
        return 1
    pg = (dev.ExternalPostgres(os.environ["DATABASE_URL"]) if os.environ.get("DATABASE_URL")
          else dev.start_postgres(settings=PG_SETTINGS))
    work = Path(tempfile.mkdtemp(prefix="rw-bench-api-"))
    rated_db, stored_db = "bench_api_rated", "bench_api_stored"
    compared: list[Compared] = []
    rates: list[Paced] = []
    shapes = {}
    try:
        started = time.perf_counter()
        print(f"api: rating {GAMES:,} games among {RATED:,} players (rating-worker backfill) ...", flush=True)
        rated = await api_data.build_rated(pg, rated_db, GAMES, RATED)
        print(f"api: {STORED:,} players stored: a copy of those, the rest bulk-loaded ...", flush=True)
        stored = await api_data.build_stored(pg, rated_db, stored_db, STORED, RATED)
        for name, url in ((f"{RATED:,} rated", rated), (f"{STORED:,} stored", stored)):
            shapes[name] = (await api_data.shape(url)).describe()
            print(f"api: {name}: {shapes[name]}", flush=True)
        print(f"api: databases ready in {api_data.elapsed(started)}", flush=True)
        for name, url in ((f"{RATED:,} rated", rated), (f"{STORED:,} stored", stored)):
            requests = await api_data.requests(url, SAMPLE)
            with ApiServer(url, work / f"serve-{len(compared)}.log", {"LOG_LEVEL": "WARNING"}) as server:
                compared += await throughput(server, url, name, requests)
                if url == stored:
                    rates = await paced(server, url, requests, work / "worker.log")
        print("\n" + report(compared, rates, shapes))
    finally:
        for name in (rated_db, stored_db):
            await drop_db(pg, name)
        pg.stop()
    return 0
