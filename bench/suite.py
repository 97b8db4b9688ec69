"""`./dev bench suite|best|realistic|scale|mixed|horizontal`: docs/performance.md's table, every figure
a ratio to a baseline measured in the same run, with the absolute figure, the CPU and the command beside it.

suite       all of the below, ending with docs/performance.md's table (markdown): about 15 minutes on 2 cores
best        the best case: BENCH_GAMES (100,000) CSR games among BENCH_PLAYERS (2,000) players, PostgreSQL
            production-sized (PG_SETTINGS): the worker against the machine's limit and against the naive
            worker (bench/limit.py), and the latency at BENCH_RATE (2,000) games/s against bench/echo.py
realistic   the same with BENCH_LIMIT_PLAYERS (20,000) players and PostgreSQL at its default memory settings
scale       BENCH_SCALE_PLAYERS (1,000,000) players stored against BENCH_SCALE_ACTIVE (20,000), the same
            20,000 playing, PostgreSQL at its default memory (BENCH_SCALE_PG=tuned: production-sized);
            BENCH_SCALE_ROUNDS (5) interleaved rounds
mixed       each message type alone, then all five mixed, against the same stream's pure Python work
horizontal  2 and 4 worker processes in one consumer group against 1, 6 partitions
engine      Glicko-2 updates against the glicko2 package (no services)
naive       another name for `best`

Why ratios: a shared machine's speed drifts by tens of percent within minutes and the next machine may be
twice as fast; a ratio to a baseline taken in the same run (one right after the other) holds where an
absolute figure does not. Every throughput figure is end to end (consume, validate, dedupe, lock, rate,
write, commit, publish, commit offsets) with durable commits. A progress line is printed while each runs.
"""

from __future__ import annotations

import os
import random
import signal
import statistics
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from bench import against_limit, engine_speed
from bench.common import (
    PG_SETTINGS,
    REALISTIC_PG_SETTINGS,
    copy_db,
    cpu_model,
    drop_db,
    fresh_db,
    io_between,
    io_counters,
    prefill,
    produce_any,
    start_worker,
    until_processed,
    worker_env,
)
from bench.runs import GAMES, LATENCY_FETCH_WAIT_MS, PLAYERS, latency, throughput
from worker import dev
from worker.dev.streams import chesstempo_attempts, games, puzzle_attempts, turbo_events, uscf_events

RATE = int(os.environ.get("BENCH_RATE", "2000"))
SCALE_STORED = int(os.environ.get("BENCH_SCALE_PLAYERS", "1000000"))
SCALE_ACTIVE = int(os.environ.get("BENCH_SCALE_ACTIVE", "20000"))
SCALE_ROUNDS = int(os.environ.get("BENCH_SCALE_ROUNDS", "5"))
# "tuned": the scale case on the production-sized PostgreSQL (PG_SETTINGS) instead of its default memory
SCALE_PG = os.environ.get("BENCH_SCALE_PG", "default")
if SCALE_PG not in ("default", "tuned"):
    raise SystemExit(f"BENCH_SCALE_PG={SCALE_PG!r}: 'default' or 'tuned'")


@dataclass(frozen=True)
class Row:
    figure: str
    ratio: str  # to the baseline measured in the same run
    absolute: str
    command: str


ROWS: list[Row] = []


async def _throughput_case(pg, broker, log: Path, case: str, players: int, command: str) -> None:
    print(f"{case}: {GAMES:,} CSR games among {players:,} players against the limit and the naive worker", flush=True)
    result = await against_limit.measure(pg, broker, log, games(GAMES, players, seed=3), tag=case)
    m = result.median
    print(f"{case}: {against_limit.describe(result)}; median round's {m.cpu_line()}", flush=True)
    pg_kind = "production-sized" if case == "best" else "default memory"
    ROWS.append(Row(
        f"{case} case: CSR games end to end, one worker, {players:,} players, batch 5,000, PostgreSQL {pg_kind}",
        f"**{m.ratio:.2f} of the limit** (rounds {', '.join(f'{r.ratio:.2f}' for r in result.rounds)}); "
        f"**{m.worker / result.naive:.0f}x the naive worker**",
        f"{m.worker:,.0f} games/s; limit {m.limit:,.0f} (pure Python {m.python_s / m.games * 1e6:.0f} us, COPY "
        f"{m.database_s / m.games * 1e6:.0f} us a game); naive {result.naive:,.0f}; the client libraries' own "
        f"work ({m.clients_s / m.games * 1e6:.0f} us a game) caps the ratio at {m.ceiling:.2f}{m.cpu_brief()}",
        command))
    await _latency_case(pg, broker, log, case, players)


async def _latency_case(pg, broker, log: Path, case: str, players: int) -> None:
    p50, p99, n = await latency(pg, broker, log, rate=RATE, players=players)
    e50, e99, _ = await latency(pg, broker, log, rate=RATE, players=players, echo=True)
    print(f"{case}: latency at {RATE:,} games/s, {players:,} players: worker p50 {p50:.0f} ms, p99 {p99:.0f} ms; "
          f"echo p50 {e50:.0f} ms, p99 {e99:.0f} ms", flush=True)
    ROWS.append(Row(
        f"{case} case: latency produce -> rating.changed at {RATE:,} games/s, {players:,} players "
        f"(KAFKA_FETCH_MAX_WAIT_MS={LATENCY_FETCH_WAIT_MS})",
        f"p99 **{p99 / e99:.1f}x** the echo's (p50 {p50 / e50:.1f}x)",
        f"worker p50 {p50:.0f} ms, p99 {p99:.0f} ms; echo (consume and produce only) p50 {e50:.0f}, p99 {e99:.0f}",
        f"./dev bench {case}"))


async def best(pg, broker, log: Path) -> None:
    await _throughput_case(pg, broker, log, "best", PLAYERS, "./dev bench best")


async def realistic(pg, broker, log: Path) -> None:
    await _throughput_case(pg, broker, log, "realistic", against_limit.PLAYERS, "./dev bench realistic")


async def scale(pg, broker, log: Path) -> None:
    """SCALE_STORED players stored against SCALE_ACTIVE, the same SCALE_ACTIVE playing (blitz games: every
    game reads stored ratings). Each database is written once and copied for every run; the runs alternate
    (small, large; large, small; ...) so that the machine's drift falls on both alike, and each round's
    ratio is its own pair's."""
    values = games(GAMES, SCALE_ACTIVE, seed=22, speeds=False)
    templates = {}
    for stored in (SCALE_ACTIVE, SCALE_STORED):
        templates[stored] = name = f"bench_scale_template_{stored}"
        started = time.perf_counter()
        await prefill(await fresh_db(pg, name), stored)
        print(f"  scale: {stored:,} players written in {time.perf_counter() - started:.0f} s", flush=True)
    ratios, rates = [], {SCALE_ACTIVE: [], SCALE_STORED: []}
    for n in range(SCALE_ROUNDS):
        order = (SCALE_ACTIVE, SCALE_STORED) if n % 2 == 0 else (SCALE_STORED, SCALE_ACTIVE)
        pair = {}
        for stored in order:
            name = f"bench_scale_{stored}_{n}"
            url = await copy_db(pg, templates[stored], name)
            before = await io_counters(pg)
            pair[stored] = await throughput(pg, broker, log, batch_size=5000, values=values, url=url,
                                            tag=f"scale{stored}-{n}")
            io = io_between(before, await io_counters(pg))
            print(f"  scale: {stored:,} stored: {pair[stored]:,.0f} games/s" + (f"; PostgreSQL: {io}" if io else ""),
                  flush=True)
            await drop_db(pg, name)
        rates[SCALE_ACTIVE].append(pair[SCALE_ACTIVE])
        rates[SCALE_STORED].append(pair[SCALE_STORED])
        ratios.append(pair[SCALE_STORED] / pair[SCALE_ACTIVE])
        print(f"scale: round {n + 1}: {SCALE_ACTIVE:,} stored {pair[SCALE_ACTIVE]:,.0f} games/s, {SCALE_STORED:,} "
              f"stored {pair[SCALE_STORED]:,.0f} games/s ({ratios[-1] - 1:+.0%})", flush=True)
    for name in templates.values():
        await drop_db(pg, name)
    ratio = statistics.median(ratios)
    ROWS.append(Row(
        f"scale: {SCALE_STORED:,} players stored against {SCALE_ACTIVE:,}, the same {SCALE_ACTIVE:,} playing "
        f"({GAMES:,} blitz games), PostgreSQL {'production-sized' if SCALE_PG == 'tuned' else 'default memory'}",
        f"**{ratio - 1:+.0%}** (rounds {', '.join(f'{r - 1:+.0%}' for r in ratios)})",
        f"{statistics.median(rates[SCALE_STORED]):,.0f} vs {statistics.median(rates[SCALE_ACTIVE]):,.0f} games/s "
        f"(medians)",
        "./dev bench scale"))


def _mixed_streams() -> dict[str, list[bytes]]:
    n = GAMES // 2
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


async def _alone(pg, broker, log: Path, what: str, values: list[bytes], tag: str) -> None:
    batch = _batch_for(values)
    rate = await throughput(pg, broker, log, batch_size=batch, values=values, tag=tag)
    python_s, _ = await against_limit.python_cost(values, batch)
    pure = len(values) / python_s
    print(f"mixed: {what}: {rate:,.0f} messages/s end to end, {pure:,.0f}/s of pure Python ({len(values):,})",
          flush=True)
    ROWS.append(Row(f"{what}, messages/s end to end ({len(values):,}, batch {batch:,})",
                    f"**{rate / pure:.2f} of its pure Python**", f"{rate:,.0f} (pure Python {pure:,.0f})",
                    "./dev bench mixed"))


async def mixed(pg, broker, log: Path) -> None:
    streams = _mixed_streams()
    for i, (what, values) in enumerate(streams.items()):
        await _alone(pg, broker, log, f"alone: {what}", values, f"mixed{i}")
    everything = [v for values in streams.values() for v in values]
    random.Random(28).shuffle(everything)
    await _alone(pg, broker, log, "all five types in one stream", everything, "mixed-all")


async def horizontal(pg, broker, log: Path) -> None:
    values = games(GAMES, PLAYERS, seed=29)
    rates = {}
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
            rates[workers] = await until_processed(url, len(values), procs, f"horizontal {workers}", spawned, log)
        finally:
            for p in procs:
                p.send_signal(signal.SIGTERM)
            for p in procs:
                p.wait(60)
        print(f"horizontal: {workers} worker process(es), 6 partitions: {rates[workers]:,.0f} games/s", flush=True)
    ROWS.append(Row(
        f"2 and 4 worker processes in one group, 6 partitions, one PostgreSQL ({GAMES:,} games)",
        f"**{rates[2] / rates[1]:.2f}x / {rates[4] / rates[1]:.2f}x** one process",
        f"{rates[1]:,.0f} / {rates[2]:,.0f} / {rates[4]:,.0f} games/s (1 / 2 / 4)", "./dev bench horizontal"))


def engine_row() -> None:
    inputs = engine_speed.glicko_inputs(50_000)
    ours, theirs = engine_speed.ours(inputs), engine_speed.reference(inputs)
    if theirs:
        ROWS.append(Row("Glicko-2 player updates, ours against the glicko2 package (same inputs, same numbers)",
                        f"**{ours / theirs:.1f}x**", f"{ours:,.0f} vs {theirs:,.0f} updates/s", "./dev bench engine"))


#: part -> (PostgreSQL it runs on, how to run it); `suite` runs them all, grouped by PostgreSQL
PARTS = {
    "best": ("tuned", best),
    "mixed": ("tuned", mixed),
    "horizontal": ("tuned", horizontal),
    "realistic": ("default", realistic),
    "scale": (SCALE_PG, scale),
}


def _start_postgres(kind: str):
    if os.environ.get("DATABASE_URL"):  # a server of one's own: its settings are its owner's
        return dev.ExternalPostgres(os.environ["DATABASE_URL"])
    return dev.start_postgres(settings=PG_SETTINGS if kind == "tuned" else REALISTIC_PG_SETTINGS)


async def main(what: str) -> None:
    what = "best" if what == "naive" else what
    chosen = [name for name in PARTS if what in (name, "suite")]
    log = Path(os.environ.get("BENCH_LOG", "/tmp/rw-bench-worker.log"))
    print(f"worker logs: {log}", flush=True)
    started = time.perf_counter()
    if what in ("engine", "suite"):
        engine_row()
    if chosen:
        broker = dev.broker_from_env_or_start()
        try:
            for kind in ("tuned", "default"):
                names = [name for name in chosen if PARTS[name][0] == kind]
                if not names:
                    continue
                pg = _start_postgres(kind)
                try:
                    for name in names:
                        await PARTS[name][1](pg, broker, log)
                finally:
                    pg.stop()
        finally:
            broker.stop()
    print_table(time.perf_counter() - started)


def print_table(seconds: float) -> None:
    print(f"\n{cpu_model()}, {os.cpu_count()} CPUs, {datetime.now(UTC):%Y-%m-%d}; embedded broker and PostgreSQL "
          f"(durable commits) on the same machine; {seconds / 60:.0f} min\n")
    print("| figure | against its baseline, same run | absolute | command |\n|---|---|---|---|")
    for row in ROWS:
        print(f"| {row.figure} | {row.ratio} | {row.absolute} | `{row.command}` |")
