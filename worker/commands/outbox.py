"""`rating-worker outbox`: the changes committed and not yet published, and the oldest of them."""

from __future__ import annotations

import argparse

from worker.commands.operator import add_common, command, connect, emit
from worker.store.reads import OperatorReads
from worker.terminal.table import cell


async def outbox(args: argparse.Namespace) -> int:
    conn = await connect(args)
    try:
        row = await OperatorReads(conn).outbox_oldest()
    finally:
        await conn.close()
    oldest = None
    if row["event_id"] is not None:
        oldest = {k: row[k] for k in ("event_id", "player_id", "system", "category", "version", "changed_at")}
        oldest["queued_at"] = row["created_at"]
    text = f"outbox backlog: {row['backlog']} unpublished change(s)"
    if oldest:
        text += (f"\noldest: {oldest['player_id']} {oldest['system']}/{oldest['category']} v{oldest['version']}"
                 f" queued {cell(oldest['queued_at'])} (event {oldest['event_id']})")
    emit(args.json, {"backlog": row["backlog"], "oldest": oldest}, text)
    return 0


def add_parser(sub) -> None:
    p = sub.add_parser("outbox", help="rating changes not yet published", description=(
        "The outbox backlog (history rows whose rating.changed the broker has not acknowledged) and its oldest "
        "row. A backlog that stays, or an old oldest row, means publishing is stuck: see the worker's logs."))
    add_common(p)
    p.set_defaults(func=command(outbox))
