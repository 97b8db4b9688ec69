"""`./dev bench lifecycle`: the realistic case on a database grown as a platform's after N days, against
an empty one (issue 42, point 3), at PostgreSQL's default memory and at production settings.

The grown database (bench/grown.py, loaded by bench/grown_load.py): the migrations, then
BENCH_LIFECYCLE_GAMES_PER_DAY (2,500,000) games a day for BENCH_LIFECYCLE_DAYS (8) days among
BENCH_LIFECYCLE_PLAYERS (2,000,000) players: 20,000,000 processed ids (random UUIDs from 8 game servers)
and 40,000,000 history rows, with the ratings and players they made, COPYed in, then indexed as the
migrations define, VACUUM (FREEZE, ANALYZE), CHECKPOINT. About 20-25 GB and half an hour, so the cluster is built
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
then at production settings (PG_SETTINGS, shared_buffers BENCH_LIFECYCLE_SHARED_BUFFERS, 4GB; max_wal_size
BENCH_LIFECYCLE_MAX_WAL_SIZE, PG_SETTINGS' 4GB; wal_compression BENCH_LIFECYCLE_WAL_COMPRESSION, PG_SETTINGS'
on, i.e. pglz, the only method the embedded server has: off stands for lz4's cost where a server has it;
huge_pages BENCH_LIFECYCLE_HUGE_PAGES, unset: PostgreSQL's own try, none where the machine reserves none). The
grown rounds all run on the one grown database (copying 20 GB a round would take longer than the runs):
each adds its games to it, 0.5% of its 20,000,000 a round; the runs' additions are counted in the
cache's meta.json and printed, and past BENCH_LIFECYCLE_MAX_ADDED (10%) of the build the cache is built
anew. The worker's DEDUPE_WINDOW_DAYS covers the grown database's ids: its retention removes none of them
during the runs (see `rounds`).

Two measures, each its own rows. "Right after a checkpoint, cold buffers": every run starts right after a
CHECKPOINT, so the first change of every page after it is logged whole: the worst case, a checkpoint's
first seconds. "Steady": after the CHECKPOINT a worker first rates BENCH_LIFECYCLE_WARMUP (200,000) other
games, unmeasured, then a second one the measured games, with no CHECKPOINT of ours between (whether
PostgreSQL began one of its own, in the warm-up or in the measured part, is counted and printed): a
platform's state through most of a checkpoint cycle, its working set in the buffers and its pages already
logged whole once. BENCH_LIFECYCLE_STEADY: production (the default: at production settings only), all,
off, or only (the steady measure at production settings alone: no cold runs, no default memory; for settling
the steady figure with more rounds in the same time). Reported per round and as medians: games/s and the
ratio grown/empty, WAL bytes and full-page images per game, the growth of the history and of the processed
ids (tables, TOAST and indexes) per game, the CPU a game of the worker, of PostgreSQL (and of its client
backends: the statements, without autovacuum and the writers) and of the broker, and how busy the cores
were (bench/cpu.py: where they are nearly all busy, the grown database's loss is the CPU it costs more, not
waiting), all over the measured games only; once, the grown database's tables and indexes.

BENCH_LIFECYCLE_QUICK=1: 200,000 ids, 400,000 history rows among 40,000 players, 20,000 games a run
(and 20,000 of warm-up), one round: a few minutes, for development. The server is always its own (DATABASE_URL is not used).
"""

from __future__ import annotations

import asyncio
import fcntl
import hashlib
import json
import math
import os
import re
import shutil
import signal
import statistics
import time
import uuid
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import asyncpg

from bench import cpu, grown_load
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
WARMUP = _setting("WARMUP", 200_000, 20_000)
STEADY = os.environ.get("BENCH_LIFECYCLE_STEADY", "production")
BATCH = 5000
MAX_ADDED = float(os.environ.get("BENCH_LIFECYCLE_MAX_ADDED", "0.10"))
CACHE = Path(os.environ.get("BENCH_LIFECYCLE_CACHE", "/var/tmp/rating-worker-bench/lifecycle"))
BUILD_ONLY = os.environ.get("BENCH_LIFECYCLE_BUILD_ONLY", "") not in ("", "0")
SHARED_BUFFERS = os.environ.get("BENCH_LIFECYCLE_SHARED_BUFFERS", "4GB")
# PG_SETTINGS' 4GB by default: at a grown database's ~10 kB of WAL a game that is a checkpoint every ~200,000
# games (max_wal_size / (1 + checkpoint_completion_target)); 16GB spaces them by time instead (docs/performance.md).
MAX_WAL_SIZE = os.environ.get("BENCH_LIFECYCLE_MAX_WAL_SIZE", PG_SETTINGS["max_wal_size"])
# pglz costs the backend that logs a full page 90-110 us, lz4 8-9 (`./dev bench wal-compression`); at a grown
# database's ~1.5 full pages a game right after a checkpoint, pglz is half of the loss there (docs/performance.md).
WAL_COMPRESSION = os.environ.get("BENCH_LIFECYCLE_WAL_COMPRESSION", PG_SETTINGS["wal_compression"])
# Unset: PostgreSQL's own `try`, i.e. whatever huge pages the machine has reserved (none where vm.nr_hugepages is
# 0). `on`: the 4 GB of buffers in 2 MB pages, fewer TLB misses on random pages (docs/deploy.md); checked first.
HUGE_PAGES = os.environ.get("BENCH_LIFECYCLE_HUGE_PAGES", "")
GROWN = "grown"
EMPTY = "lifecycle_empty"
# The build's server: nothing of it is measured. No fsync, no full pages (a crash loses the build, which is
# then made again: meta.json is written once it is complete), WAL kept small, no autovacuum racing the load,
# one core for index builds (a neighbour's tests may be running on the other).
BUILD_SETTINGS = {"max_wal_size": "4GB", "checkpoint_timeout": "1h", "autovacuum": "off",
                  "max_parallel_maintenance_workers": "0"}
PRODUCTION = (f"production ({SHARED_BUFFERS}"
              + ("" if MAX_WAL_SIZE == PG_SETTINGS["max_wal_size"] else f", max_wal_size {MAX_WAL_SIZE}")
              + ("" if WAL_COMPRESSION == PG_SETTINGS["wal_compression"] else f", wal_compression {WAL_COMPRESSION}")
              + (f", huge_pages {HUGE_PAGES}" if HUGE_PAGES else "") + ")")
#: name -> the server's settings for the runs
RUN_SETTINGS = {
    **({} if STEADY == "only" else {"default memory": REALISTIC_PG_SETTINGS}),
    PRODUCTION: {**PG_SETTINGS, "shared_buffers": SHARED_BUFFERS, "max_wal_size": MAX_WAL_SIZE,
                 "wal_compression": WAL_COMPRESSION, **({"huge_pages": HUGE_PAGES} if HUGE_PAGES else {})},
}
COLD = "right after a checkpoint, cold buffers"
WARM = f"steady: after {WARMUP:,} games since the checkpoint"
# bench/grown.py's rows and bench/grown_load.py's build: raise when they change, so that a cache of the old ones
# is not used (2: frozen)
BUILD_FORMAT = 2


def check_huge_pages() -> None:
    """With BENCH_LIFECYCLE_HUGE_PAGES=on, enough huge pages reserved for the buffers, or one line saying how
    many (PostgreSQL would refuse to start with a message about shared memory)."""
    if HUGE_PAGES != "on":
        return
    meminfo = dict(line.split(":", 1) for line in Path("/proc/meminfo").read_text().splitlines() if ":" in line)
    free, page_kb = int(meminfo.get("HugePages_Free", "0")), int(meminfo.get("Hugepagesize", "2048 kB").split()[0])
    size = re.fullmatch(r"(\d+)\s*(kB|MB|GB|TB)?", SHARED_BUFFERS.strip())
    if size is None:
        return  # a size PostgreSQL may still read (or refuse, in its own words): not checked here
    buffers_kb = int(size[1]) * {"kB": 1, "MB": 1024, "GB": 1024**2, "TB": 1024**3, None: 8}[size[2]]
    needed = math.ceil(buffers_kb * 1.03 / page_kb) + 16  # the buffers, and PostgreSQL's other shared memory
    if free < needed:
        raise SystemExit(f"BENCH_LIFECYCLE_HUGE_PAGES=on needs about {needed:,} huge pages of {page_kb // 1024} MB free "
                         f"for shared_buffers {SHARED_BUFFERS} ({free:,} are): as root, sysctl vm.nr_hugepages={needed}")


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
    checkpoints: int  # checkpoints PostgreSQL began during the measured games (none is ours)
    warmup_checkpoints: int  # ... and during the unmeasured warm-up before them (0 without one)
    # CPU a game (us) from the first committed game to the last (bench/cpu.py): the worker process, every
    # PostgreSQL process and the part in its client backends (the statements; the rest is autovacuum, the
    # checkpointer, the writers), the broker; and how busy the machine's cores were meanwhile (0-1). NaN off
    # Linux.
    worker_cpu: float = math.nan
    postgresql_cpu: float = math.nan
    statements_cpu: float = math.nan
    broker_cpu: float = math.nan
    busy: float = math.nan


LAST_ID = "SELECT coalesce(max(id), 0) FROM rating_changes"


async def _table_sizes(conn) -> tuple[int, int]:
    return tuple([await conn.fetchval(grown_load.TOTAL_SIZE, t) or 0 for t in ("rating_changes", "processed_messages")])


async def _checkpoints(conn) -> int:
    """The checkpoints the server has begun (timed or requested) since its statistics were reset."""
    if conn.get_server_version().major >= 17:
        return await conn.fetchval("SELECT num_timed + num_requested FROM pg_stat_checkpointer")
    return await conn.fetchval("SELECT checkpoints_timed + checkpoints_req FROM pg_stat_bgwriter")


async def _until_rated(conn, total: int, base: int, proc, label: str) -> tuple[float, dict[str, float]]:
    """Games/s from the first committed history row to the last (2 a game): `max(id)` of the history, one
    index probe, where bench/common.py until_processed's count(*) of processed ids would read 20,000,000
    index entries every 50 ms beside the run it measures; and Run's CPU fields over the same games."""
    first = n_first = cpu_at_first = None
    last_print = progress_at = time.perf_counter()
    done_before = -1
    while True:
        done = (await conn.fetchval(LAST_ID) - base) // 2
        now = time.perf_counter()
        if done and first is None:
            first, n_first, cpu_at_first = now, done, cpu.read([proc.pid])
        if done != done_before:
            done_before, progress_at = done, now
        if now - last_print > 2:
            print(f"  {label}: {done:,}/{total:,} games", flush=True)
            last_print = now
        if done >= total:
            return (total - n_first) / (now - first), _cpu_a_game(cpu.between(cpu_at_first, cpu.read([proc.pid])),
                                                                  total - n_first)
        if proc.poll() is not None:
            raise RuntimeError(f"the worker exited ({proc.returncode}); see its log")
        if now - progress_at > 300:
            raise RuntimeError(f"no game rated for 5 minutes ({done:,}/{total:,}); see the worker's log")
        await asyncio.sleep(0.05)


def _cpu_a_game(used: cpu.Usage | None, games: int) -> dict[str, float]:
    """Run's CPU fields from the CPU used over `games` games (none: nothing measured)."""
    if used is None or games <= 0 or used.wall <= 0:
        return {}
    us = 1e6 / games
    return {"worker_cpu": used.processes * us, "postgresql_cpu": used.postgresql * us,
            "statements_cpu": used.backends * us, "broker_cpu": used.broker * us,
            "busy": used.machine / used.wall / (os.cpu_count() or 1)}


async def _new_topic(broker, values: list[bytes]) -> str:
    """A new input topic holding `values` (with the worker's output and DLQ topics); its tag."""
    tag = f"lc-{uuid.uuid4().hex[:8]}"
    await dev.create_topics(broker.bootstrap_servers, {f"in-{tag}": 3, f"out-{tag}": 3, f"dlq-{tag}": 1})
    await produce_any(broker.bootstrap_servers, f"in-{tag}", values)
    return tag


async def _rate(conn, url: str, broker, tag: str, n: int, log: Path, label: str,
                settings: dict) -> tuple[float, dict[str, float]]:
    """Games/s of one worker rating the n games of topic `tag` into the database at `url`, and the CPU
    they took (`_until_rated`); the worker is stopped once they are rated."""
    base = await conn.fetchval(LAST_ID)
    proc = start_worker(worker_env(url, broker.bootstrap_servers, tag, batch_size=BATCH, **settings), log)
    try:
        return await _until_rated(conn, n, base, proc, label)
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(60)


async def measure(pg, broker, log: Path, url: str, values: list[bytes], label: str, warmup: list[bytes] = (),
                  **settings) -> Run:
    """One worker over `values` on the database at `url` after a CHECKPOINT: right after it, or, given a
    `warmup`, once a worker of its own has rated those first, unmeasured, with no CHECKPOINT of ours between
    (two runs rather than one, so that the counters at the boundary are exact: a running worker's backends
    report their WAL statistics up to a second late). `settings`: the worker's."""
    tags = [await _new_topic(broker, v) for v in (warmup, values) if v]  # both before the first run starts
    conn = await asyncpg.connect(url)
    try:
        await conn.execute("CHECKPOINT")
        await asyncio.sleep(1)  # the checkpointer reports its counters just after the CHECKPOINT returns
        at_checkpoint = await _checkpoints(conn)
        if warmup:
            await _rate(conn, url, broker, tags[0], len(warmup), log, f"{label}, warm-up", settings)
        base = await conn.fetchval(LAST_ID)
        sizes = await _table_sizes(conn)
        before, at_start = await io_counters(pg), await _checkpoints(conn)
        rate, used = await _rate(conn, url, broker, tags[-1], len(values), log, label, settings)
        after, at_end = await io_counters(pg), await _checkpoints(conn)
        grown_by = [b - a for a, b in zip(sizes, await _table_sizes(conn), strict=True)]
        written = await conn.fetchval("SELECT count(*) FROM rating_changes WHERE id > $1", base)
    finally:
        await conn.close()
    n = len(values)
    if written != 2 * n:
        raise RuntimeError(f"{label}: {written:,} history rows for {n:,} games")
    wal = (after["wal_mib"] - before["wal_mib"]) * 1048576 / n if before and after else float("nan")
    fpi = (after["full_pages_logged"] - before["full_pages_logged"]) / n if before and after else float("nan")
    return Run(rate, wal, fpi, grown_by[0] / n, grown_by[1] / n, at_end - at_start, at_start - at_checkpoint, **used)


def describe(run: Run) -> str:
    return (f"{run.rate:,.0f} games/s; WAL {run.wal_bytes / 1000:,.1f} kB and {run.full_pages:.2f} full pages a game; "
            f"disk a game: history {run.history_bytes:,.0f} B, processed ids {run.processed_bytes:,.0f} B; "
            f"checkpoints begun by PostgreSQL: {run.warmup_checkpoints} in the warm-up, {run.checkpoints} measured; "
            f"CPU a game: worker {run.worker_cpu:,.0f}, PostgreSQL {run.postgresql_cpu:,.0f} (its backends "
            f"{run.statements_cpu:,.0f}), broker {run.broker_cpu:,.0f} us, cores {run.busy:.0%} busy")


def _steady_at(setting: str) -> bool:
    return STEADY == "all" or (STEADY in ("production", "only") and setting == PRODUCTION)


def _measures_at(setting: str) -> tuple[str, ...]:
    """The measures taken at one setting of the server (BENCH_LIFECYCLE_STEADY)."""
    return tuple(m for m in (COLD, WARM) if (m == COLD and STEADY != "only") or (m == WARM and _steady_at(setting)))


async def _run_on(pg, broker, log: Path, kind: str, games: tuple[list, list], label: str, window: dict) -> Run:
    """measure() on the grown database, or on a fresh copy of the empty one."""
    warmup, values = games
    if kind == "grown":
        return await measure(pg, broker, log, pg.url_for(GROWN), values, label, warmup, **window)
    url = await copy_db(pg, EMPTY, "lifecycle_empty_run")
    try:
        return await measure(pg, broker, log, url, values, label, warmup, **window)
    finally:
        await drop_db(pg, "lifecycle_empty_run")


async def _round(pg, broker, log: Path, entry: Path, meta: dict, setting: str, n: int, runs: dict, window: dict):
    """Round n: each measure in `runs`, on both databases, interleaved (empty, grown; grown, empty; ...),
    on the same games: the cold measure's, then the steady measure's warm-up and games, later in message
    time."""
    plan = Plan(**meta["plan"])
    start = plan.end + meta["games_added"] * plan.spacing  # after the grown database's last game
    games = {COLD: ([], platform_games(GAMES, ACTIVE, start, plan.spacing))}
    if WARM in runs:
        both = platform_games(WARMUP + GAMES, ACTIVE, start + GAMES * plan.spacing, plan.spacing)
        games[WARM] = (both[:WARMUP], both[WARMUP:])
    for measured, by_kind in runs.items():
        for kind in (("empty", "grown") if n % 2 == 0 else ("grown", "empty")):
            label = f"{setting}, {measured}, round {n + 1}, {kind}"
            by_kind[kind].append(await _run_on(pg, broker, log, kind, games[measured], label, window))
            if kind == "grown":
                meta["games_added"] += sum(map(len, games[measured]))
                _write_meta(entry, meta)
            say(f"{label}: {describe(by_kind[kind][-1])}")
        say(f"{setting}, {measured}, round {n + 1}: grown/empty "
            f"{by_kind['grown'][-1].rate / by_kind['empty'][-1].rate:.2f}")


async def rounds(pg, broker, log: Path, entry: Path, meta: dict, setting: str) -> dict[str, dict[str, list[Run]]]:
    """ROUNDS rounds at one setting of the server: measure (COLD, and WARM where STEADY asks) -> database
    (empty, grown) -> its runs."""
    plan = Plan(**meta["plan"])
    # Retention (DEDUPE_WINDOW_DAYS) would remove the grown database's oldest ids during the runs: all of
    # them that aged past the window since the build, in chunks back to back, and from the cache for good.
    # A platform's retention removes as many ids as it stores, at its own pace (2,500,000 a day: 29 a second,
    # against the runs' thousands): no part of the figures. So the window covers the grown database's ids.
    # (Never shorter than its default, which the worker checks against the topics' retention.)
    window = {"dedupe_window_days": max(Config.dedupe_window_days, math.ceil((time.time() - plan.start) / DAY) + 1)}
    runs = {measured: {"empty": [], "grown": []} for measured in _measures_at(setting)}
    await new_database(pg.url, EMPTY, migrated=True)
    try:
        for n in range(ROUNDS):
            await _round(pg, broker, log, entry, meta, setting, n, runs, window)
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


def _ratios(runs: dict[str, list[Run]]) -> str:
    """The median grown/empty and each round's, e.g. "**-5%** (-4%, -5%, -7%)"."""
    ratios = [g.rate / e.rate for e, g in zip(runs["empty"], runs["grown"], strict=True)]
    return f"**{statistics.median(ratios) - 1:+.0%}** ({', '.join(f'{r - 1:+.0%}' for r in ratios)})"


def _checkpoints_inside(runs: list[Run], measured: str) -> str:
    """The checkpoints PostgreSQL began inside the runs (all rounds): during the warm-ups, and measured."""
    warm = f"{sum(r.warmup_checkpoints for r in runs)} in warm-ups, " if measured == WARM else ""
    return f"{warm}{sum(r.checkpoints for r in runs)} measured"


def _cpu_cell(runs: list[Run]) -> str:
    """Medians of the CPU a game, e.g. "62, 101 (80), 9 us (99%)"."""
    return (f"{_median(runs, 'worker_cpu'):,.0f}, {_median(runs, 'postgresql_cpu'):,.0f} "
            f"({_median(runs, 'statements_cpu'):,.0f}), {_median(runs, 'broker_cpu'):,.0f} us ({_median(runs, 'busy'):.0%})")


def _print_table(results: dict[str, dict[str, dict[str, list[Run]]]]) -> None:
    print("| PostgreSQL | measure | database | games/s | grown/empty (rounds) | WAL a game | full pages a game "
          "| history a game | processed ids a game | CPU a game: worker, PostgreSQL (its backends), broker (cores busy) "
          "| checkpoints begun inside |\n|---|---|---|---|---|---|---|---|---|---|---|")
    for setting, measures in results.items():
        for measured, runs in measures.items():
            for kind in ("empty", "grown"):
                r = runs[kind]
                print(f"| {setting} | {measured} | {kind} | {_median(r, 'rate'):,.0f} "
                      f"| {_ratios(runs) if kind == 'grown' else ''} | {_median(r, 'wal_bytes') / 1000:,.1f} kB "
                      f"| {_median(r, 'full_pages'):.2f} | {_median(r, 'history_bytes'):,.0f} B "
                      f"| {_median(r, 'processed_bytes'):,.0f} B | {_cpu_cell(r)} | {_checkpoints_inside(r, measured)} |")


def _print_docs_rows(results: dict[str, dict[str, dict[str, list[Run]]]], plan: Plan, command: str) -> None:
    print("\nFor docs/performance.md's table (| figure | against its baseline, same run | absolute | command |):")
    for setting, measures in results.items():
        for measured, runs in measures.items():
            e, g = runs["empty"], runs["grown"]
            print(f"| lifecycle: {GAMES:,} CSR games among {ACTIVE:,} players on a database grown by {plan.games:,} "
                  f"games ({2 * plan.games:,} history rows, random UUID keys) against an empty one, PostgreSQL "
                  f"{setting}, {measured} | {_ratios(runs).replace('(', '(rounds ')} "
                  f"| {_median(g, 'rate'):,.0f} vs {_median(e, 'rate'):,.0f} games/s; WAL "
                  f"{_median(g, 'wal_bytes') / 1000:,.1f} vs {_median(e, 'wal_bytes') / 1000:,.1f} kB and "
                  f"{_median(g, 'full_pages'):.2f} vs {_median(e, 'full_pages'):.2f} full pages a game; disk "
                  f"{_median(g, 'history_bytes'):,.0f} B history + {_median(g, 'processed_bytes'):,.0f} B processed "
                  f"ids a game; CPU a game (worker, PostgreSQL (its backends), broker; cores busy) {_cpu_cell(g)} vs {_cpu_cell(e)} "
                  f"(medians) | `{command}` |")


def report(results: dict[str, dict[str, dict[str, list[Run]]]], plan: Plan, seconds: float) -> None:
    command = "./dev bench lifecycle" + (" (BENCH_LIFECYCLE_QUICK=1)" if QUICK else "")
    print(f"\n{cpu_model()}, {os.cpu_count()} CPUs, {datetime.now(UTC):%Y-%m-%d}; embedded broker and PostgreSQL "
          f"(durable commits) on the same machine; `{command}`, {seconds / 60:.0f} min")
    print(f"{GAMES:,} CSR games among {ACTIVE:,} players, batch {BATCH:,}, against an empty database and one grown by "
          f"{plan.games:,} games ({2 * plan.games:,} history rows, {plan.players:,} players); medians of {ROUNDS} "
          f"interleaved round(s). Measures: " + "; ".join(
              ([] if STEADY == "only" else [COLD]) + ([] if STEADY == "off" else [
                  f"{WARM} (the worker rated {WARMUP:,} other games first, unmeasured, in a worker of its own, on "
                  f"each database, the empty one included)"]))
          + "\n")
    _print_table(results)
    _print_docs_rows(results, plan, command)


async def main() -> None:
    if ACTIVE > PLAYERS:
        raise SystemExit(f"BENCH_LIFECYCLE_ACTIVE={ACTIVE:,} is more than BENCH_LIFECYCLE_PLAYERS={PLAYERS:,}")
    if STEADY not in ("all", "production", "off", "only"):
        raise SystemExit(f"BENCH_LIFECYCLE_STEADY={STEADY!r}: expected all, production, off or only")
    if HUGE_PAGES not in ("", "on", "off", "try"):
        raise SystemExit(f"BENCH_LIFECYCLE_HUGE_PAGES={HUGE_PAGES!r}: expected on, off or try")
    check_huge_pages()
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
