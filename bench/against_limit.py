"""The worker against the machine's limit for the same work, measured (issue 21): the rounds of
`./dev bench limit` (bench/limit.py, which says what each figure is) and of the suite's best and realistic
cases (bench/suite.py).
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import asyncpg

from bench import clients, cpu
from bench.common import WINDOW_CPU, drop_db, fresh_db
from bench.runs import throughput
from worker.contract.decode import decode
from worker.engine import apply_batch
from worker.runtime import tune_for_throughput
from worker.store.memory import MemoryStore

GAMES = int(os.environ.get("BENCH_LIMIT_GAMES", "100000"))
PLAYERS = int(os.environ.get("BENCH_LIMIT_PLAYERS", "20000"))
NAIVE = int(os.environ.get("BENCH_LIMIT_NAIVE", "3000"))
ROUNDS = int(os.environ.get("BENCH_LIMIT_ROUNDS", "3"))
BATCH = 5000


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
        # The history is partitioned by month (migration 0012): the store creates the months a batch needs
        # before it writes (worker.store.months); this COPY stands for that write, so its months are made
        # first, outside the timing.
        times = [h[11] for _, history, _ in rows for h in history]
        if times:
            await conn.execute("SELECT rating_changes_ensure_months($1, $2)", min(times), max(times))
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
