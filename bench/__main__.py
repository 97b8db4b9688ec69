"""`./dev bench NAME`: the benchmarks behind the README's Performance section.

Each starts its own PostgreSQL (durable commits, production-sized: bench/pipeline.py PG_SETTINGS) and
broker unless DATABASE_URL / KAFKA_BOOTSTRAP_SERVERS are set, prints a progress line while it runs and
its figures at the end. Run them on a quiet machine: the figures move with whatever else uses the CPUs.
"""

import asyncio
import sys

from bench import engine, imports, leaderboard, pipeline, suite

BENCHMARKS = {
    "suite": "the README's table in one run (~10 min): throughput vs naive, latency at 2,000/s, scale, "
             "each message type, 1/2/4 workers",
    "throughput": "CSR games/s end to end, one worker (BENCH_GAMES 50,000, BENCH_PLAYERS 2,000, BENCH_BATCH 5,000)",
    "latency": "produce -> rating.changed p50/p99 at BENCH_RATE games/s (1,000) for BENCH_SECONDS (20)",
    "naive": "the batch design against one transaction per message, same games, same run",
    "scale": "1,000 vs 1,000,000 players in the database (BENCH_SCALE_PLAYERS)",
    "mixed": "each message type alone, then all five in one stream",
    "horizontal": "1, 2 and 4 worker processes in one group, 6 partitions",
    "soak": "10 minutes at 500 games/s with database cuts and worker kills: latency, RSS, consistency",
    "stages": "a batch's time by store call and SQL statement (no Kafka), 1,000 vs 1,000,000 players",
    "broker": "what the embedded broker costs: held fetches, fetch cost against the log's length",
    "engine": "Glicko-2 updates/s against the glicko2 package; whole CSR games in the engine",
    "puzzles": "ChessKite attempts/s end to end",
    "chesstempo": "Chess Tempo attempts/s on 10 hot problems and on 10,000",
    "marathon": "a 500-player Turbo Live event in one transaction with games right behind it",
    "leaderboard": "leaderboard and history queries on 1,000,000 players (EXPLAIN ANALYZE)",
    "imports": "rating-worker import of 1,000,000 players",
    "pipeline": "throughput and latency",
    "all": "engine, throughput, puzzles, chesstempo, latency, marathon",
}


def usage() -> str:
    width = max(len(name) for name in BENCHMARKS)
    lines = [f"  {name:<{width}}  {what}" for name, what in BENCHMARKS.items()]
    return __doc__.strip() + "\n\n" + "\n".join(lines) + "\n\nbench/*.py document their settings (BENCH_*)."


def main(argv: list[str]) -> int:
    what = argv[0] if argv else ""
    if what in ("-h", "--help", "help"):
        print(usage())
        return 0
    if what not in BENCHMARKS:
        print(usage(), file=sys.stderr)
        return 2
    if what in ("engine", "all"):
        engine.main()
    if what == "leaderboard":
        leaderboard.main()
    if what == "imports":
        asyncio.run(imports.main())
    if what == "broker":
        from bench import broker

        asyncio.run(broker.main())
    if what == "stages":
        from bench import stages

        asyncio.run(stages.main())
    if what == "soak":
        from bench import soak

        return soak.main()
    if what in ("naive", "scale", "mixed", "horizontal", "suite"):
        asyncio.run(suite.main(what))
    if what in ("throughput", "latency", "pipeline", "marathon", "puzzles", "chesstempo", "all"):
        asyncio.run(pipeline.main(what))
    return 0


sys.exit(main(sys.argv[1:]))
