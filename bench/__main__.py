"""`./dev bench NAME`: the benchmarks behind docs/performance.md (and the README's table).

Each starts its own PostgreSQL (durable commits, production-sized: bench/common.py PG_SETTINGS) and
broker unless DATABASE_URL / KAFKA_BOOTSTRAP_SERVERS are set, prints a progress line while it runs and
its figures at the end. Run them on a quiet machine: the figures move with whatever else uses the CPUs.
"""

import asyncio
import importlib
import sys


def _run(module: str, call):
    """A benchmark: `call(module)` once its module is imported (the heavy ones only when chosen)."""
    return lambda: call(importlib.import_module(f"bench.{module}"))


def _pipeline(what: str):
    return _run("pipeline", lambda m: asyncio.run(m.main(what)))


def _suite(what: str):
    return _run("suite", lambda m: asyncio.run(m.main(what)))


def _all() -> int:
    importlib.import_module("bench.engine").main()
    asyncio.run(importlib.import_module("bench.pipeline").main("all"))
    return 0


#: name -> (what it measures, how to run it): the one table of the benchmarks
BENCHMARKS = {
    "suite": ("docs/performance.md's table in one run (~15 min), every figure against a baseline of the same run: "
              "best and realistic case against the limit and the naive worker, latency against an echo, "
              "scale, each message type, 1/2/4 workers, the engine", _suite("suite")),
    "best": ("2,000 players, production-sized PostgreSQL: worker vs limit vs naive, latency vs echo", _suite("best")),
    "realistic": ("20,000 players, PostgreSQL at default memory: worker vs limit vs naive, latency vs echo",
                  _suite("realistic")),
    "throughput": ("CSR games/s end to end, one worker (BENCH_GAMES 100,000, BENCH_PLAYERS 2,000, BENCH_BATCH 5,000)",
                   _pipeline("throughput")),
    "latency": ("produce -> rating.changed p50/p99 at BENCH_RATE games/s (1,000) for BENCH_SECONDS (20)",
                _pipeline("latency")),
    "naive": ("another name for best", _suite("naive")),
    "scale": ("1,000,000 vs 20,000 players stored, the same 20,000 playing, interleaved rounds", _suite("scale")),
    "mixed": ("each message type alone, then all five in one stream, against their pure Python", _suite("mixed")),
    "horizontal": ("1, 2 and 4 worker processes in one group, 6 partitions", _suite("horizontal")),
    "soak": ("10 minutes at 500 games/s with database cuts and worker kills: latency, RSS, consistency",
             _run("soak", lambda m: m.main())),
    "stages": ("a batch's time by store call and SQL statement (no Kafka), 1,000 vs 1,000,000 players",
               _run("stages", lambda m: asyncio.run(m.main()))),
    "broker": ("what the embedded broker costs: held fetches, fetch cost against the log's length",
               _run("broker", lambda m: asyncio.run(m.main()))),
    "engine": ("Glicko-2 updates/s against the glicko2 package; whole CSR games in the engine",
               _run("engine", lambda m: m.main())),
    "puzzles": ("ChessKite attempts/s end to end", _pipeline("puzzles")),
    "chesstempo": ("Chess Tempo attempts/s on 10 hot problems and on 10,000", _pipeline("chesstempo")),
    "marathon": ("a 500-player Turbo Live event in one transaction with games right behind it", _pipeline("marathon")),
    "leaderboard": ("leaderboard and history queries on 1,000,000 players (EXPLAIN ANALYZE)",
                    _run("leaderboard", lambda m: m.main())),
    "imports": ("rating-worker import of 1,000,000 players", _run("imports", lambda m: asyncio.run(m.main()))),
    "limit": ("the worker against the machine's limit for the same work (issue 21): 100,000 games among 20,000 "
              "players, PostgreSQL at default memory; worker, naive, pure Python, the same rows by COPY, and the "
              "ceiling the client libraries' own cost puts on the ratio; where a game's CPU goes in the worker's run (the "
              "worker, PostgreSQL, the broker) against PostgreSQL's for the COPY",
              _run("limit", lambda m: asyncio.run(m.main()))),
    "replay": ("rating-worker replay of 1, 5 and 10 million messages (BENCH_REPLAY_SIZES): largest RSS, "
               "messages/s and games/s, memory against the stream's length", _run("replay", lambda m: m.main())),
    "replay-speed": ("offline CSR replay of 100,000 games among 20,000 players: games/s against the replay of "
                     "BENCH_REPLAY_BASELINE (before issue 22) in the same run, and against the pure engine",
                     _run("replay_speed", lambda m: m.main())),
    "backfill": ("rating-worker backfill of 100,000 CSR games among 20,000 players against the worker streaming "
                 "them, in the same run (issue 22: at least 5x)", _run("backfill", lambda m: asyncio.run(m.main()))),
    "lists": ("a FIDE list (rating.period_closed) on BENCH_LIST_PLAYERS (100,000) players: the sweep's time, its "
              "longest chunk and other transactions' lock waits", _run("lists", lambda m: asyncio.run(m.main()))),
    "api": ("the read API (rating-worker serve) under wrk on 20,000 players rated and 1,000,000 stored, per route "
            "against the same reads by a bare asyncpg loop; p99 at 500 requests/s with a worker rating 1,000 "
            "games/s beside it (BENCH_API_QUICK=1: a few minutes)", _run("api", lambda m: asyncio.run(m.main()))),
    "lifecycle": ("the realistic case on a database grown as a platform's after 8 days (20,000,000 processed ids, "
                  "40,000,000 history rows, built once and cached) against an empty one, interleaved, at default and "
                  "production memory: games/s, WAL and full pages a game, disk a game (BENCH_LIFECYCLE_QUICK=1: a few "
                  "minutes)", _run("lifecycle", lambda m: asyncio.run(m.main()))),
    "wal-compression": ("what each wal_compression method costs a full-page image (Debian's PostgreSQL: the "
                        "embedded one has only pglz): random-key inserts right after a CHECKPOINT",
                        _run("wal_compression", lambda m: m.main())),
    "pipeline": ("throughput and latency", _pipeline("pipeline")),
    "all": ("engine, throughput, puzzles, chesstempo, latency, marathon", _all),
}


def usage() -> str:
    width = max(len(name) for name in BENCHMARKS)
    lines = [f"  {name:<{width}}  {what}" for name, (what, _) in BENCHMARKS.items()]
    return __doc__.strip() + "\n\n" + "\n".join(lines) + "\n\nbench/*.py document their settings (BENCH_*)."


def main(argv: list[str]) -> int:
    what = argv[0] if argv else ""
    if what in ("-h", "--help", "help"):
        print(usage())
        return 0
    if what not in BENCHMARKS:
        print(usage(), file=sys.stderr)
        return 2
    return BENCHMARKS[what][1]() or 0


sys.exit(main(sys.argv[1:]))
