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
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import asyncpg

from bench import clients, cpu
from bench.common import PG_SETTINGS, WINDOW_CPU, cpu_model, drop_db, fresh_db
from bench.pipeline import throughput
from worker import dev
from worker.contract.decode import decode
from worker.dev.streams import games
from worker.engine import apply_batch
from worker.runtime import tune_for_throughput
from worker.store.memory import MemoryStore

GAMES = int(os.environ.get("BENCH_LIMIT_GAMES", "100000"))
PLAYERS = int(os.environ.get("BENCH_LIMIT_PLAYERS", "20000"))
NAIVE = int(os.environ.get("BENCH_LIMIT_NAIVE", "3000"))
ROUNDS = int(os.environ.get("BENCH_LIMIT_ROUNDS", "3"))
BATCH = 5000
# Durable commits, and nothing else changed: PostgreSQL's own memory defaults (shared_buffers 128 MB), the
# realistic case. BENCH_LIMIT_PG=tuned takes the other benchmarks' production sizing (PG_SETTINGS) instead.
SETTINGS = {"fsync": "on", "full_page_writes": "on", "synchronous_commit": "on"}
TUNED = os.environ.get("BENCH_LIMIT_PG", "default") == "tuned"


async def python_cost(values: list[bytes], batch: int = BATCH, rows: bool = False) -> tuple[float, list]:
    """Seconds of the worker's pure Python work over the messages (decode, rate, encode), in batches of
    `batch`; with `rows`, also each batch's durable rows (messages, records, the states its records left)
    for the database figure.

    Time it without `rows`: the store lets each batch's history go, as the worker (whose history is in
    PostgreSQL) does. Keeping 200,000 records grows the heap, and on this machine a growing heap pays for
    each new page: the same pure Python measured 69-101 us a game while the heap grew against 37-44 once it
    did not, which had put "the worker" at 0.84-1.09 "of the limit" in some rounds. (A fair-play closure's
    refund reads the history: no stream timed here has one.)"""
    tune_for_throughput()  # the collector as the worker runs it (worker/runtime.py)
    store = MemoryStore()
    out = []
    started = time.perf_counter()
    for i in range(0, len(values), batch):
        messages = [decode(v) for v in values[i:i + batch]]
        await apply_batch(store, messages)
        if rows:
            out.append((messages, list(store.history), {r.key: store.states[r.key] for r in store.history}))
        store.history.clear()
    return time.perf_counter() - started, out


def _copy_rows(records, states, messages):
    ratings = [(k[0], k[1], k[2], st.rating, st.rd, st.volatility, st.games, st.peak, st.last_at, st.version)
               for k, st in states.items()]
    history = [(r.event_id, r.key[0], r.key[1], r.key[2], r.version, r.rating, r.delta, r.cause_type, r.cause_source,
                r.cause_id, r.cause_ref, datetime.fromtimestamp(r.changed_at, UTC), r.before[0], r.before[1],
                r.before[2], r.after[0], r.after[1], r.after[2], r.provisional, r.floor, r.games, r.time, r.parameters)
               for r in records]
    processed = [(m.source, m.id, m.type, "applied") for m in messages]
    return ratings, history, processed


async def database_cost(url: str, batches) -> tuple[float, cpu.Usage | None]:
    """Seconds to write the same rows by COPY, one durable transaction per batch (the rows built first), and
    the CPU it took (PostgreSQL's is the one that counts: this process only sends the rows)."""
    rows = [_copy_rows(records, states, messages) for messages, records, states in batches]
    conn = await asyncpg.connect(url)
    try:
        await conn.execute("CREATE TEMP TABLE staged (LIKE ratings INCLUDING DEFAULTS) ON COMMIT DELETE ROWS")
        rating_columns = ["player_id", "system", "category", "rating", "rd", "volatility", "games", "peak", "last_at",
                          "version"]
        history_columns = ["event_id", "player_id", "system", "category", "version", "rating", "delta", "cause_type",
                           "cause_source", "cause_id", "cause_ref", "changed_at", "before_rating", "before_rd", "before_volatility",
                           "after_rating", "after_rd", "after_volatility", "provisional", "floor", "games",
                           "cause_time", "parameters"]
        started, before = time.perf_counter(), cpu.read()
        for ratings, history, processed in rows:
            async with conn.transaction():
                await conn.copy_records_to_table("staged", records=ratings, columns=rating_columns)
                await conn.execute(
                    "INSERT INTO ratings (player_id, system, category, rating, rd, volatility, games, peak, last_at, "
                    "version) SELECT player_id, system, category, rating, rd, volatility, games, peak, last_at, "
                    "version FROM staged ON CONFLICT (player_id, system, category) DO UPDATE SET "
                    "rating = excluded.rating, rd = excluded.rd, volatility = excluded.volatility, "
                    "games = excluded.games, peak = excluded.peak, last_at = excluded.last_at, "
                    "version = excluded.version")
                await conn.copy_records_to_table("rating_changes", records=history, columns=history_columns)
                await conn.execute("INSERT INTO outbox (change_id) SELECT id FROM rating_changes "
                                   "WHERE id > coalesce((SELECT max(change_id) FROM outbox), 0)")
                await conn.copy_records_to_table("processed_messages", records=processed,
                                                 columns=["source", "id", "type", "outcome"])
        return time.perf_counter() - started, cpu.between(before, cpu.read())
    finally:
        await conn.close()


@dataclass(frozen=True)
class Round:
    """One round's three figures, taken one right after the other."""

    worker: float  # games/s
    python_s: float  # seconds of pure Python for all the games
    database_s: float  # seconds of the COPY path for all the games
    games: int
    clients_s: float = 0.0  # seconds of the client libraries' own work for all the games (bench/clients.py)
    # CPU from the worker's first commit to its last (bench/cpu.py) and the games in that window; the CPU of
    # the database figure's COPY path
    worker_cpu: tuple[cpu.Usage | None, int] = (None, 0)
    copy_cpu: cpu.Usage | None = None

    def _cpu(self) -> tuple[cpu.Usage, int, float] | None:
        """(the worker run's CPU, its games, PostgreSQL's us a game for the COPY path), None if not measured."""
        usage, n = self.worker_cpu
        if usage is None or not n or self.copy_cpu is None:
            return None
        return usage, n, self.copy_cpu.postgresql / self.games * 1e6

    def cpu_brief(self) -> str:
        """The same as cpu_line, short, for the suite's table ("" when not measured)."""
        if (measured := self._cpu()) is None:
            return ""
        usage, n, copy_us = measured
        return (f"; CPU a game in the worker's run: worker {usage.processes / n * 1e6:.0f} us, PostgreSQL "
                f"{usage.postgresql / n * 1e6:.0f} ({copy_us:.0f} for the same rows by COPY)")

    def cpu_line(self) -> str:
        """Where a game's CPU goes in the worker's run, against PostgreSQL's for the same rows by COPY."""
        if (measured := self._cpu()) is None:
            return "CPU: not measured (no /proc)"
        usage, n, copy_us = measured
        return f"CPU in the worker's run: {usage.per_game(n)}; PostgreSQL for the same rows by COPY {copy_us:.0f} us a game"

    @property
    def limit(self) -> float:
        return self.games / max(self.python_s, self.database_s)

    @property
    def ratio(self) -> float:
        return self.worker / self.limit

    @property
    def ceiling(self) -> float:
        """The most `ratio` can be for a worker whose thread also does the client libraries' work."""
        return max(self.python_s, self.database_s) / max(self.python_s + self.clients_s, self.database_s)


@dataclass(frozen=True)
class Limit:
    naive: float  # games/s, one transaction per message
    rounds: list[Round]

    @property
    def median(self) -> Round:
        return sorted(self.rounds, key=lambda r: r.ratio)[len(self.rounds) // 2]


async def measure(pg, broker, log: Path, values: list[bytes], rounds: int = ROUNDS, naive_games: int = NAIVE,
                  tag: str = "limit") -> Limit:
    """The naive worker once, then `rounds` rounds of worker, python and database on `values`."""
    n_games = len(values)
    naive = await throughput(pg, broker, log, batch_size=1, values=values[:naive_games], tag=f"{tag}-naive",
                             max_inflight_batches=1)
    print(f"  naive: {naive:,.0f} games/s", flush=True)
    _, batches = await python_cost(values, rows=True)  # the rows of the database figure, the same every round
    taken = []
    for n in range(1, rounds + 1):
        # The figures of a round are taken one right after the other, the pure Python once before the
        # worker and once after it (their mean is the round's): a shared machine's speed drifts by tens of
        # percent within minutes, so a ratio is only worth
        # its round's, and a drift during the round falls on both sides of the worker alike.
        py_before, _ = await python_cost(values)
        worker = await throughput(pg, broker, log, batch_size=BATCH, values=values, tag=f"{tag}-worker-{n}")
        py_after, _ = await python_cost(values)
        py_s = (py_before + py_after) / 2
        copy_url = await fresh_db(pg, f"bench_{tag}_copy_{n}")
        window = WINDOW_CPU[0]
        db_s, copy_cpu = await database_cost(copy_url, batches)
        # The worker's own input topic (throughput's), read again by a group of its own.
        used = await clients.measure(copy_url, broker.bootstrap_servers, f"in-{tag}-worker-{n}", f"{tag}-clients-{n}",
                                     batches, BATCH)
        await drop_db(pg, f"bench_{tag}_copy_{n}")
        r = Round(worker, py_s, db_s, n_games, used.total_s, window, copy_cpu)
        taken.append(r)
        print(f"  round {n}: worker {worker:,.0f} games/s; python {py_before / n_games * 1e6:.1f} us/game before "
              f"it, {py_after / n_games * 1e6:.1f} after; database (COPY) {db_s / n_games * 1e6:.1f} us/game; limit "
              f"{r.limit:,.0f} games/s; worker = {r.ratio:.2f} of the limit; client libraries "
              f"{used.total_s / n_games * 1e6:.1f} us/game (consume {used.consume_s / n_games * 1e6:.1f}, produce "
              f"{used.produce_s / n_games * 1e6:.1f}, copy {used.copy_s / n_games * 1e6:.1f}): ceiling "
              f"{r.ceiling:.2f}; the worker's rows for the copy {used.rows_s / n_games * 1e6:.1f} us/game; "
              f"{r.cpu_line()}", flush=True)
    return Limit(naive, taken)


def describe(result: Limit) -> str:
    m = result.median
    return (f"worker: {m.worker:,.0f} games/s = {m.ratio:.2f} of the limit (rounds: "
            f"{', '.join(f'{r.ratio:.2f}' for r in result.rounds)}), {m.worker / result.naive:.0f}x naive "
            f"({result.naive:,.0f} games/s); the client libraries' own work alone caps it at {m.ceiling:.2f} "
            f"(rounds: {', '.join(f'{r.ceiling:.2f}' for r in result.rounds)})")


async def main() -> None:
    values = games(GAMES, PLAYERS, seed=3)
    pg = dev.start_postgres(settings=PG_SETTINGS if TUNED else SETTINGS)
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
