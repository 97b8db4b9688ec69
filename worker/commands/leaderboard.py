"""`rating-worker leaderboard SYSTEM CATEGORY`: the best established ratings of one system and category."""

from __future__ import annotations

import argparse
import textwrap
import time

from worker.commands.operator import UsageError, add_common, command, connect, emit
from worker.store.reads import OperatorReads, ranks
from worker.terminal.table import table, terminal_width

DAY_S = 86400.0


def leaderboard_systems() -> list[str]:
    """The systems that have ratings of their own (the leaderboard view has a rule for each)."""
    from worker.ratings.registry import RATINGS

    return list(RATINGS)


def check_board(system: str, category: str) -> None:
    """A system and category that have a leaderboard, else a UsageError naming the valid ones (an unknown
    one used to print an empty table, as if nobody were established)."""
    from worker.ratings.registry import RATINGS

    if system not in RATINGS:
        raise UsageError(f"no system {system!r}: one of {', '.join(RATINGS)}")
    if category not in RATINGS[system]:
        raise UsageError(f"{system} has no category {category!r}: one of {', '.join(RATINGS[system])}")


async def leaderboard(args: argparse.Namespace) -> int:
    if args.top < 1:
        raise UsageError("--top must be at least 1")
    if args.active_days is not None and not args.active_days > 0:
        raise UsageError("--active-days must be more than 0")
    check_board(args.system, args.category)
    conn = await connect(args)
    try:
        since = None if args.active_days is None else time.time() - args.active_days * DAY_S
        rows = await OperatorReads(conn).leaderboard(args.system, args.category, args.top, active_since=since)
    finally:
        await conn.close()
    entries = [{"rank": rank, **dict(r)} for rank, r in zip(ranks([r["rating"] for r in rows]), rows, strict=True)]
    active = "" if args.active_days is None else f" of players active in the last {args.active_days:g} days"
    width = terminal_width()
    title = f"{args.system} {args.category}: top {args.top} established ratings{active}"
    text = (textwrap.fill(title, width) if width else title) + "\n" + table(
        ["#", "player", "rating", "rd", "games", "last played"],
        [[e["rank"], e["player_id"], e["rating"], e["rd"], e["games"], e["last_played_at"]] for e in entries], width)
    emit(args.json, {"system": args.system, "category": args.category, "active_days": args.active_days,
                     "entries": entries}, text)
    return 0


def add_parser(sub) -> None:
    p = sub.add_parser("leaderboard", help="the best established ratings of one system and category",
                       description=(
        "The top established ratings (CSR and TSR: RD <= 110; US Chess: more than 25 games; FIDE: listed), "
        "accounts closed for fair play left out, with their rank (equal ratings share one). --active-days N "
        "leaves out players whose last rated game (or attempt) is more than N days before now. "
        "Example: rating-worker leaderboard csr blitz --top 20 --active-days 30"))
    p.add_argument("system", help=f"one of {', '.join(leaderboard_systems())}")
    p.add_argument("category")
    p.add_argument("--top", type=int, default=10, help="how many (default 10)")
    p.add_argument("--active-days", type=float, metavar="N",
                   help="only players whose last rated game is at most N days before now (by the games' own "
                        "times; a rating imported without last_played_at counts as inactive; default: everyone)")
    add_common(p)
    p.set_defaults(func=command(leaderboard))
