"""`./dev bench lifecycle`: the realistic case on a database grown as a platform's after N days, against
an empty one (issue 42, point 3), at PostgreSQL's default memory and at production settings.

The grown database (bench/grown.py, loaded by bench/grown_load.py): the migrations, then
BENCH_LIFECYCLE_GAMES_PER_DAY (2,500,000) games a day for BENCH_LIFECYCLE_DAYS (8) days among
BENCH_LIFECYCLE_PLAYERS (2,000,000) players: 20,000,000 processed ids (random UUIDs from 8 game servers)
and 40,000,000 history rows, with the ratings and players they made, COPYed in, then indexed as the
migrations define, VACUUM ANALYZE, CHECKPOINT. About 20-25 GB and half an hour, so the cluster is built
once and kept: BENCH_LIFECYCLE_CACHE (/var/tmp/rating-worker-bench/lifecycle)/<key>/, the key naming the
migrations' checksums and the build's settings (a new migration builds anew, and removes the entry of the
same settings on the older migrations; other settings, e.g. the quick mode's, have entries of their own).
To clear it: rm -rf that directory. BENCH_LIFECYCLE_BUILD_ONLY=1
builds (or finds) it and stops.

The runs: BENCH_LIFECYCLE_GAMES (100,000) CSR games among the first BENCH_LIFECYCLE_ACTIVE (20,000) of
those players (the realistic case's model, with a platform's keys: random UUID ids over 8 sources and
random UUID game ids, fresh in every round), one worker, batch 5,000, against the grown database and a
copy of an empty migrated one, interleaved (empty, grown; grown, empty; ...), BENCH_LIFECYCLE_ROUNDS (3)
rounds, on the same server, first at PostgreSQL's default memory (bench/common.py REALISTIC_PG_SETTINGS),
then at production settings (PG_SETTINGS, shared_buffers BENCH_LIFECYCLE_SHARED_BUFFERS, 4GB). The
grown rounds all run on the one grown database (copying 20 GB a round would take longer than the runs):
each adds its games to it, 0.5% of its 20,000,000 a round; the runs' additions are counted in the
cache's meta.json and printed, and past BENCH_LIFECYCLE_MAX_ADDED (10%) of the build the cache is built
anew. Every round starts right after a CHECKPOINT. The worker's DEDUPE_WINDOW_DAYS covers the grown
database's ids: its retention removes none of them during the runs (see `rounds`). Reported per round and as medians: games/s and the
ratio grown/empty, WAL bytes and full-page images per game, the growth of the history and of the
processed ids (tables, TOAST and indexes) per game; once, the grown database's tables and indexes.

BENCH_LIFECYCLE_QUICK=1: 200,000 ids, 400,000 history rows among 40,000 players, 20,000 games a run,
one round: a few minutes, for development. The server is always its own (DATABASE_URL is not used).
"""

from __future__ import annotations

import asyncio
import fcntl
import hashlib
import json
import math
import os
import shutil
import signal
import statistics
import time
import uuid
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import asyncpg

from bench import grown_load
from bench.common import (
    PG_SETTINGS,
    REALISTIC_PG_SETTINGS,
    copy_db,
    cpu_model,
    drop_db,
    io_counters,
    produce_any,
    start_worker,
    worker_env,
)
from bench.grown import DAY, Plan, platform_games
from worker import dev
from worker.config import Config
from worker.dev.databases import new_database
from worker.store.migrate import available_migrations

QUICK = os.environ.get("BENCH_LIFECYCLE_QUICK", "") not in ("", "0")


def _setting(name: str, default: int, quick: int) -> int:
    return int(os.environ.get(f"BENCH_LIFECYCLE_{name}", str(quick if QUICK else default)))


GAMES_PER_DAY = _setting("GAMES_PER_DAY", 2_500_000, 100_000)
DAYS = _setting("DAYS", 8, 2)
PLAYERS = _setting("PLAYERS", 2_000_000, 40_000)
GAMES = _setting("GAMES", 100_000, 20_000)
ACTIVE = _setting("ACTIVE", 20_000, 20_000)
ROUNDS = _setting("ROUNDS", 3, 1)
BATCH = 5000
MAX_ADDED = float(os.environ.get("BENCH_LIFECYCLE_MAX_ADDED", "0.10"))
CACHE = Path(os.environ.get("BENCH_LIFECYCLE_CACHE", "/var/tmp/rating-worker-bench/lifecycle"))
BUILD_ONLY = os.environ.get("BENCH_LIFECYCLE_BUILD_ONLY", "") not in ("", "0")
SHARED_BUFFERS = os.environ.get("BENCH_LIFECYCLE_SHARED_BUFFERS", "4GB")
GROWN = "grown"
EMPTY = "lifecycle_empty"
# The build's server: nothing of it is measured. No fsync, no full pages (a crash loses the build, which is
# then made again: meta.json is written once it is complete), WAL kept small, no autovacuum racing the load,
# one core for index builds (a neighbour's tests may be running on the other).
BUILD_SETTINGS = {"max_wal_size": "4GB", "checkpoint_timeout": "1h", "autovacuum": "off",
                  "max_parallel_maintenance_workers": "0"}
#: name -> the server's settings for the runs
RUN_SETTINGS = {
    "default memory": REALISTIC_PG_SETTINGS,
    f"production ({SHARED_BUFFERS})": {**PG_SETTINGS, "shared_buffers": SHARED_BUFFERS},
}
BUILD_FORMAT = 1  # bench/grown.py's rows: raise when they change, so that a cache of the old ones is not used


def say(line: str) -> None:
    print(f"{datetime.now(UTC):%H:%M:%S} lifecycle: {line}", flush=True)


def cache_dir(plan: Plan) -> Path:
    """The cache entry of this plan and these migrations."""
    digest = hashlib.sha256(json.dumps([BUILD_FORMAT, plan.key(), [m.checksum for m in available_migrations()]])
                            .encode()).hexdigest()[:12]
    return CACHE / f"{plan.key()}-{digest}"


def _read_meta(entry: Path) -> dict | None:
    try:
        return json.loads((entry / "meta.json").read_text())
    except (OSError, ValueError):
        return None


def _write_meta(entry: Path, meta: dict) -> None:
    (entry / "meta.json.tmp").write_text(json.dumps(meta, indent=1))
    (entry / "meta.json.tmp").replace(entry / "meta.json")


async def build(plan: Plan, entry: Path) -> dict:
    """The grown cluster in entry/data; its meta (plan, build time, sizes) once complete."""
    for other in CACHE.glob(f"{plan.key()}-*"):  # the same plan on other migrations: outdated
        if other != entry and other.is_dir():
            say(f"removing the cache entry of the same settings on other migrations: {other}")
            shutil.rmtree(other)
    shutil.rmtree(entry, ignore_errors=True)
    entry.mkdir(parents=True)
    for d in (entry, *entry.parents):
        if d == Path("/") or d.stat().st_mode & 0o005 == 0o005:
            break
        d.chmod(d.stat().st_mode | 0o755)  # PostgreSQL runs as its own user (worker.dev.postgres)
    say(f"building {plan.games:,} games ({plan.games_per_day:,} a day for {plan.days} days) among "
        f"{plan.players:,} players into {entry}")
    started = time.perf_counter()
    pg = dev.start_postgres(data_dir=str(entry / "data"), settings=BUILD_SETTINGS)
    try:
        url = await new_database(pg.url, GROWN, migrated=True)
        await grown_load.load(url, plan, say)
    finally:
        pg.stop()
    meta = {"plan": plan.__dict__, "build_seconds": round(time.perf_counter() - started), "games_added": 0,
            "built_at": f"{datetime.now(UTC):%Y-%m-%d %H:%M} UTC"}
    _write_meta(entry, meta)
    say(f"built in {meta['build_seconds'] / 60:.0f} min")
    return meta


async def grown_cluster(plan: Plan) -> tuple[Path, dict]:
    """The cache entry and its meta, built first unless complete and not grown past MAX_ADDED."""
    entry = cache_dir(plan)
    meta = _read_meta(entry)
    if meta and meta["games_added"] > MAX_ADDED * plan.games:
        say(f"the runs have added {meta['games_added']:,} games to the cached database, more than "
            f"{MAX_ADDED:.0%} of its {plan.games:,}: building it anew")
        meta = None
    if meta is None:
        meta = await build(plan, entry)
    else:
        say(f"cached grown database {entry} (built {meta['built_at']} in {meta['build_seconds'] / 60:.0f} min; "
            f"{meta['games_added']:,} games added by runs since, {meta['games_added'] / plan.games:.1%})")
    return entry, meta


@dataclass
class Run:
    rate: float  # games/s
    wal_bytes: float  # a game
    full_pages: float  # a game
    history_bytes: float  # a game: rating_changes' growth (heap, TOAST, indexes)
    processed_bytes: float  # a game: processed_messages' growth


async def _table_sizes(conn) -> tuple[int, int]:
    return tuple([await conn.fetchval(grown_load.TOTAL_SIZE, t) or 0 for t in ("rating_changes", "processed_messages")])


async def _until_rated(conn, total: int, base: int, proc, label: str) -> float:
    """Games/s from the first committed history row to the last (2 a game): `max(id)` of the history, one
    index probe, where bench/common.py until_processed's count(*) of processed ids would read 20,000,000
    index entries every 50 ms beside the run it measures."""
    first = n_first = None
    last_print = progress_at = time.perf_counter()
    done_before = -1
    while True:
        done = (await conn.fetchval("SELECT coalesce(max(id), 0) FROM rating_changes") - base) // 2
        now = time.perf_counter()
        if done and first is None:
            first, n_first = now, done
        if done != done_before:
            done_before, progress_at = done, now
        if now - last_print > 2:
            print(f"  {label}: {done:,}/{total:,} games", flush=True)
            last_print = now
        if done >= total:
            return (total - n_first) / (now - first)
        if proc.poll() is not None:
            raise RuntimeError(f"the worker exited ({proc.returncode}); see its log")
        if now - progress_at > 300:
            raise RuntimeError(f"no game rated for 5 minutes ({done:,}/{total:,}); see the worker's log")
        await asyncio.sleep(0.05)


async def measure(pg, broker, log: Path, url: str, values: list[bytes], label: str, **settings) -> Run:
    """One worker over `values` on the database at `url`, right after a CHECKPOINT; `settings`: the
    worker's."""
    tag = f"lc-{uuid.uuid4().hex[:8]}"
    await dev.create_topics(broker.bootstrap_servers, {f"in-{tag}": 3, f"out-{tag}": 3, f"dlq-{tag}": 1})
    await produce_any(broker.bootstrap_servers, f"in-{tag}", values)
    conn = await asyncpg.connect(url)
    try:
        base = await conn.fetchval("SELECT coalesce(max(id), 0) FROM rating_changes")
        await conn.execute("CHECKPOINT")
        sizes = await _table_sizes(conn)
        before = await io_counters(pg)
        proc = start_worker(worker_env(url, broker.bootstrap_servers, tag, batch_size=BATCH, **settings), log)
        try:
            rate = await _until_rated(conn, len(values), base, proc, label)
        finally:
            proc.send_signal(signal.SIGTERM)
            proc.wait(60)
        after = await io_counters(pg)
        grown_by = [b - a for a, b in zip(sizes, await _table_sizes(conn), strict=True)]
        written = await conn.fetchval("SELECT count(*) FROM rating_changes WHERE id > $1", base)
    finally:
        await conn.close()
    n = len(values)
    if written != 2 * n:
        raise RuntimeError(f"{label}: {written:,} history rows for {n:,} games")
    wal = (after["wal_mib"] - before["wal_mib"]) * 1048576 / n if before and after else float("nan")
    fpi = (after["full_pages_logged"] - before["full_pages_logged"]) / n if before and after else float("nan")
    return Run(rate, wal, fpi, grown_by[0] / n, grown_by[1] / n)


def describe(run: Run) -> str:
    return (f"{run.rate:,.0f} games/s; WAL {run.wal_bytes / 1000:,.1f} kB and {run.full_pages:.2f} full pages a game; "
            f"disk a game: history {run.history_bytes:,.0f} B, processed ids {run.processed_bytes:,.0f} B")


async def rounds(pg, broker, log: Path, entry: Path, meta: dict, setting: str) -> dict[str, list[Run]]:
    """ROUNDS interleaved pairs of runs, empty and grown, at one setting of the server."""
    plan = Plan(**meta["plan"])
    # Retention (DEDUPE_WINDOW_DAYS) would remove the grown database's oldest ids during the runs: all of
    # them that aged past the window since the build, in chunks back to back, and from the cache for good.
    # A platform's retention removes as many ids as it stores, at its own pace (2,500,000 a day: 29 a second,
    # against the runs' thousands): no part of the figures. So the window covers the grown database's ids.
    # (Never shorter than its default, which the worker checks against the topics' retention.)
    window = {"dedupe_window_days": max(Config.dedupe_window_days, math.ceil((time.time() - plan.start) / DAY) + 1)}
    await new_database(pg.url, EMPTY, migrated=True)
    runs: dict[str, list[Run]] = {"empty": [], "grown": []}
    try:
        for n in range(ROUNDS):
            start = plan.end + meta["games_added"] * plan.spacing  # after the grown database's last game
            values = platform_games(GAMES, ACTIVE, start, plan.spacing)
            for kind in (("empty", "grown") if n % 2 == 0 else ("grown", "empty")):
                label = f"{setting}, round {n + 1}, {kind}"
                if kind == "grown":
                    runs[kind].append(await measure(pg, broker, log, pg.url_for(GROWN), values, label, **window))
                    meta["games_added"] += len(values)
                    _write_meta(entry, meta)
                else:
                    url = await copy_db(pg, EMPTY, "lifecycle_empty_run")
                    runs[kind].append(await measure(pg, broker, log, url, values, label, **window))
                    await drop_db(pg, "lifecycle_empty_run")
                say(f"{label}: {describe(runs[kind][-1])}")
            say(f"{setting}, round {n + 1}: grown/empty {runs['grown'][-1].rate / runs['empty'][-1].rate:.2f}")
    finally:
        await drop_db(pg, EMPTY)
    return runs


async def print_sizes(pg, meta: dict) -> None:
    conn = await asyncpg.connect(pg.url_for(GROWN))
    try:
        found = await grown_load.sizes(conn)
    finally:
        await conn.close()
    plan = Plan(**meta["plan"])
    total = sum(b for relations in found.values() for _, b in relations)
    print(f"\nThe grown database ({plan.games:,} games, {2 * plan.games:,} history rows, {plan.players:,} players; "
          f"built in {meta['build_seconds'] / 60:.0f} min; {meta['games_added']:,} games added by runs since): "
          f"{total / 2**30:,.1f} GiB")
    for table, relations in found.items():
        if (size := sum(b for _, b in relations)) >= 1 << 20:
            print(f"  {table}: {size / 2**30:,.2f} GiB: " + ", ".join(
                f"{'heap and TOAST' if name == table else name} {b / 2**30:,.2f}" for name, b in relations))
    print(flush=True)


def _median(runs: list[Run], field: str) -> float:
    return statistics.median(getattr(r, field) for r in runs)


def report(results: dict[str, dict[str, list[Run]]], plan: Plan, seconds: float) -> None:
    command = "./dev bench lifecycle" + (" (BENCH_LIFECYCLE_QUICK=1)" if QUICK else "")
    print(f"\n{cpu_model()}, {os.cpu_count()} CPUs, {datetime.now(UTC):%Y-%m-%d}; embedded broker and PostgreSQL "
          f"(durable commits) on the same machine; `{command}`, {seconds / 60:.0f} min")
    print(f"{GAMES:,} CSR games among {ACTIVE:,} players, batch {BATCH:,}, against an empty database and one grown by "
          f"{plan.games:,} games ({2 * plan.games:,} history rows, {plan.players:,} players); medians of {ROUNDS} "
          f"interleaved round(s)\n")
    print("| PostgreSQL | database | games/s | grown/empty (rounds) | WAL a game | full pages a game "
          "| history a game | processed ids a game |\n|---|---|---|---|---|---|---|---|")
    for setting, runs in results.items():
        ratios = [g.rate / e.rate for e, g in zip(runs["empty"], runs["grown"], strict=True)]
        for kind in ("empty", "grown"):
            ratio = (f"**{statistics.median(ratios) - 1:+.0%}** ({', '.join(f'{r - 1:+.0%}' for r in ratios)})"
                     if kind == "grown" else "")
            print(f"| {setting} | {kind} | {_median(runs[kind], 'rate'):,.0f} | {ratio} "
                  f"| {_median(runs[kind], 'wal_bytes') / 1000:,.1f} kB | {_median(runs[kind], 'full_pages'):.2f} "
                  f"| {_median(runs[kind], 'history_bytes'):,.0f} B | {_median(runs[kind], 'processed_bytes'):,.0f} B |")
    print("\nFor docs/performance.md's table (| figure | against its baseline, same run | absolute | command |):")
    for setting, runs in results.items():
        ratios = [g.rate / e.rate for e, g in zip(runs["empty"], runs["grown"], strict=True)]
        e, g = runs["empty"], runs["grown"]
        print(f"| lifecycle: {GAMES:,} CSR games among {ACTIVE:,} players on a database grown by {plan.games:,} games "
              f"({2 * plan.games:,} history rows, random UUID keys) against an empty one, PostgreSQL {setting} "
              f"| **{statistics.median(ratios) - 1:+.0%}** (rounds {', '.join(f'{r - 1:+.0%}' for r in ratios)}) "
              f"| {_median(g, 'rate'):,.0f} vs {_median(e, 'rate'):,.0f} games/s; WAL {_median(g, 'wal_bytes') / 1000:,.1f}"
              f" vs {_median(e, 'wal_bytes') / 1000:,.1f} kB and {_median(g, 'full_pages'):.2f} vs "
              f"{_median(e, 'full_pages'):.2f} full pages a game; disk {_median(g, 'history_bytes'):,.0f} B history + "
              f"{_median(g, 'processed_bytes'):,.0f} B processed ids a game (medians) | `{command}` |")


async def main() -> None:
    if ACTIVE > PLAYERS:
        raise SystemExit(f"BENCH_LIFECYCLE_ACTIVE={ACTIVE:,} is more than BENCH_LIFECYCLE_PLAYERS={PLAYERS:,}")
    started = time.perf_counter()
    CACHE.mkdir(parents=True, exist_ok=True)
    with open(CACHE / ".lock", "w") as lock:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise SystemExit(f"another ./dev bench lifecycle is using {CACHE}") from None
        entry, meta = await grown_cluster(Plan(GAMES_PER_DAY, DAYS, PLAYERS, end=time.time()))
        if BUILD_ONLY:
            pg = dev.start_postgres(data_dir=str(entry / "data"), settings=REALISTIC_PG_SETTINGS)
            try:
                await print_sizes(pg, meta)
            finally:
                pg.stop()
            return
        log = Path(os.environ.get("BENCH_LOG", "/tmp/rw-bench-worker.log"))
        say(f"worker logs: {log}")
        results = {}
        broker = dev.broker_from_env_or_start()
        try:
            for n, (setting, settings) in enumerate(RUN_SETTINGS.items()):
                pg = dev.start_postgres(data_dir=str(entry / "data"), settings=settings)
                try:
                    if n == 0:
                        await print_sizes(pg, meta)
                    results[setting] = await rounds(pg, broker, log, entry, meta, setting)
                finally:
                    pg.stop()
        finally:
            broker.stop()
    report(results, Plan(**meta["plan"]), time.perf_counter() - started)
