"""`./dev bench [throughput|latency|engine|marathon|puzzles|chesstempo|leaderboard|all]`: the numbers in the README."""

import asyncio
import sys

from bench import engine, leaderboard, pipeline


def main(argv: list[str]) -> int:
    what = argv[0] if argv else "all"
    if what in ("engine", "all"):
        engine.main()
    if what == "leaderboard":
        leaderboard.main()
    if what in ("throughput", "latency", "pipeline", "marathon", "puzzles", "chesstempo", "all"):
        asyncio.run(pipeline.main(what))
    return 0


sys.exit(main(sys.argv[1:]))
