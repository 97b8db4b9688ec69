"""`rating-worker leaderboard SYSTEM CATEGORY`: the best established ratings of one system and category."""

from __future__ import annotations

import argparse

from worker.commands.operator import UsageError, add_common, command, connect, emit, table
from worker.store.queries import QUERIES


def leaderboard_systems() -> list[str]:
    """The systems that have ratings of their own (the leaderboard view has a rule for each)."""
    from worker.ratings.registry import SYSTEMS

    return [s.name for s in SYSTEMS if s.categories]


async def leaderboard(args: argparse.Namespace) -> int:
    if args.top < 1:
        raise UsageError("--top must be at least 1")
    conn = await connect(args)
    try:
        rows = await conn.fetch(QUERIES["leaderboard"], args.system, args.category, args.top)
    finally:
        await conn.close()
    entries = [{"rank": i, **dict(r)} for i, r in enumerate(rows, start=1)]
    text = f"{args.system} {args.category}: top {args.top} established ratings\n" + table(
        ["#", "player", "rating", "rd", "games"],
        [[e["rank"], e["player_id"], e["rating"], e["rd"], e["games"]] for e in entries])
    emit(args.json, {"system": args.system, "category": args.category, "entries": entries}, text)
    return 0


def add_parser(sub) -> None:
    p = sub.add_parser("leaderboard", help="the best established ratings of one system and category",
                       description=(
        "The top established ratings (CSR and TSR: RD <= 110; US Chess: more than 25 games; FIDE: listed), "
        "accounts closed for fair play left out. Example: rating-worker leaderboard csr blitz --top 20"))
    p.add_argument("system", help=f"one of {', '.join(leaderboard_systems())}")
    p.add_argument("category")
    p.add_argument("--top", type=int, default=10, help="how many (default 10)")
    add_common(p)
    p.set_defaults(func=command(leaderboard))
