"""`./dev bench [throughput|latency|engine|marathon|puzzles|chesstempo|leaderboard|imports|soak|naive|scale|mixed|horizontal|suite|broker|stages|all]`: the numbers in the README."""

import asyncio
import sys

from bench import engine, imports, leaderboard, pipeline, suite

NAMES = ("engine", "throughput", "latency", "pipeline", "marathon", "puzzles", "chesstempo", "leaderboard", "imports", "soak",
         "naive", "scale", "mixed", "horizontal", "suite", "broker", "stages", "all")


def main(argv: list[str]) -> int:
    what = argv[0] if argv else "all"
    if what not in NAMES:
        print(__doc__.split(":")[0].strip("`") + "\n\nSizes: BENCH_GAMES, BENCH_PLAYERS, BENCH_BATCH, "
              "BENCH_ATTEMPTS, BENCH_SCALE_PLAYERS, BENCH_LEADERBOARD_PLAYERS; see bench/*.py.", file=sys.stderr)
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
