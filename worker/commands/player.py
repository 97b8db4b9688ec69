"""`rating-worker player ID`: every rating of a player, and with --history the latest changes and their causes."""

from __future__ import annotations

import argparse
import sys
from typing import Any

import orjson

from worker.commands.operator import UsageError, add_common, command, connect, emit
from worker.ratings.reasons import explain
from worker.ratings.registry import RATINGS
from worker.store.reads import OperatorReads
from worker.terminal.chart import Series, render, series_from_rows
from worker.terminal.plot import unknown_format
from worker.terminal.table import cell, table, terminal_width

CHART_WIDTH = 80  # the charts' width when the output is not a terminal
CHARTED = 1_000  # changes read per rating for the terminal's chart (a line of a few hundred columns at most)
PLOTTED = 2**31 - 1  # and for the picture: all of them


def _json_value(v: Any) -> Any:
    # jsonb fields come back decoded by the connection's codec; text from a jsonb -> is a str.
    return orjson.loads(v) if isinstance(v, str | bytes) else v


async def player(args: argparse.Namespace) -> int:
    if args.plot and (why := unknown_format(args.plot)):
        raise UsageError(f"--plot {why}")
    conn = await connect(args)
    try:
        reads = OperatorReads(conn)
        account = await reads.player_account(args.player_id)
        ratings = await reads.player_ratings(args.player_id, list(RATINGS))
        series = [] if args.json and not args.plot else series_from_rows(await reads.player_series(
            args.player_id, args.system, args.category, PLOTTED if args.plot else CHARTED))
        history, unrated = [], []
        if args.history:
            history = await reads.player_history(args.player_id, args.history, args.system, args.category)
            if args.category is None:  # an unrated message changed no category
                unrated = await reads.player_unrated(args.player_id, args.history, args.system)
    finally:
        await conn.close()
    if account is None and not ratings:
        print(f"rating-worker player: no player {args.player_id!r}", file=sys.stderr)
        return 1
    rows = [{
        "system": r["system"], "category": r["category"], "rating": r["rating"],
        "shown": _json_value(r["shown"]), "rd": r["rd"], "volatility": r["volatility"], "games": r["games"],
        "provisional": _json_value(r["provisional"]), "floor": _json_value(r["floor"]), "peak": r["peak"],
        "version": r["version"], "last_played_at": r["last_at"],
    } for r in ratings if args.system in (None, r["system"]) and args.category in (None, r["category"])]
    changes = _newest(history, unrated, args.history)
    closed = None if account is None or account["closed_reason"] is None else {
        "reason": account["closed_reason"], "at": account["closed_at"]}
    obj = {"player_id": args.player_id, "closed": closed, "ratings": rows}
    if args.history:
        obj["history"] = changes
    lines = [f"player {args.player_id}" + (f"  (closed: {closed['reason']} at {cell(closed['at'])})" if closed else "")]
    width = terminal_width()
    lines.append(table(
        ["system", "category", "rating", "rd", "games", "floor", "peak", "version", "last played"],
        [[r["system"], r["category"], _shown(r), r["rd"], r["games"], r["floor"], r["peak"], r["version"],
          r["last_played_at"]] for r in rows], width))
    for s in series:
        lines += [""] + render(s, width or CHART_WIDTH)
    if args.plot:
        _plot(args.player_id, series, args.plot)  # after the checks above: a missing player is exit 1
        print(f"rating-worker player: wrote {args.plot} ({len(series)} rating(s))", file=sys.stderr)
    if args.history:
        lines += ["", f"latest {len(changes)} messages, newest first", "(unchanged: a message that changed none of his "
                  "ratings, and why)"]
        lines.append(table(
            ["at", "rating", "before", "after", "change", "cause", "ref"],
            [[c["changed_at"], f"{c['system']} {c['category']} #{c['version']}", c["before"], c["rating"],
              _signed(c["delta"]), c["cause_type"], c["cause_ref"] or c["cause_id"]] if "unchanged" not in c else
             [c["changed_at"], c["system"], "", "unchanged", c["unchanged"], c["cause_type"],
              c["cause_ref"] or c["cause_id"]] for c in changes], width))
    emit(args.json, obj, "\n".join(lines))
    return 0


def _plot(player_id: str, series: list[Series], path: str) -> None:
    from worker.terminal.plot import PlotUnavailable, figure, write  # matplotlib only when asked for

    if not series:
        raise UsageError(f"--plot: {player_id!r} has no rating changes to draw")
    try:
        write(figure(player_id, series), path)
    except PlotUnavailable as exc:
        raise UsageError(str(exc)) from None
    except OSError as exc:
        raise UsageError(f"--plot: cannot write {path!r}: {exc.strerror or exc}") from None


def _newest(history: list, unrated: list, n: int) -> list[dict]:
    """The changes and the messages that left him unchanged (with why), newest first by the message's
    own time, the n latest of both."""
    rows = [dict(h) for h in history] + [{
        "changed_at": u["message_at"], "system": u["system"], "cause_type": u["type"], "cause_source": u["source"],
        "cause_id": u["id"], "cause_ref": u["ref"], "unchanged": u["reason"], "explained": explain(u["reason"]),
    } for u in unrated]
    # Python's sort is stable: a change keeps its place among changes of the same time.
    rows.sort(key=lambda r: r["changed_at"].timestamp() if r["changed_at"] is not None else float("-inf"),
              reverse=True)
    return rows[:n]


def _shown(r: dict) -> str:
    """The rating as published, with the provisional mark ("?") of its system."""
    shown = r["shown"] if r["version"] else r["rating"]
    return ("unlisted" if shown is None else f"{shown:.1f}") + ("?" if r["provisional"] else "")


def _signed(x: float | None) -> str:
    return "-" if x is None else f"{x:+.1f}"


def add_parser(sub) -> None:
    p = sub.add_parser("player", help="a player's ratings (and recent changes)", description=(
        "Every rating of a player: the rating as published (with '?' while provisional, 'unlisted' for a FIDE "
        "rating below the list), RD, games, floor, peak and version; --history N adds the N latest messages "
        "that concerned him: each change with its cause, and each valid message that changed none of his "
        "ratings with why (a casual game, fewer than 10 votes, ...; `rating-worker message SOURCE ID` tells "
        "more). Below the table, each rating's history (its last 1,000 changes) as a line of the terminal's "
        "width, from the lowest rating to the peak, the peak and the floor marked; --plot FILE.png draws the "
        "whole history as a picture, with the RD band. "
        "Example: rating-worker player anna --history 10 --plot anna.png"))
    p.add_argument("player_id")
    p.add_argument("--history", type=int, default=0, metavar="N", help="also show the N latest changes and unchanged messages")
    p.add_argument("--system", help="only this system (csr, tsr, fide, uscf, chesskite)")
    p.add_argument("--category", help="only this category (blitz, standard, ...)")
    p.add_argument("--plot", metavar="FILE",
                   help="also draw the ratings over time, with their RD band, to FILE (.png, .svg or .pdf; needs "
                        "the [plot] extra: pip install 'rating-worker[plot]')")
    add_common(p)
    p.set_defaults(func=command(player))
