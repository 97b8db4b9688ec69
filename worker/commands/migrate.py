"""`rating-worker migrate`: apply the database migrations that are not recorded yet (worker.store.migrate)."""

from __future__ import annotations

import argparse

from worker.commands.operator import command, database_url


@command
async def main(args: argparse.Namespace) -> int:
    from worker.store.migrate import migrate

    applied = await migrate(database_url(args))
    print("applied: " + ", ".join(applied) if applied else "schema is up to date")
    return 0


def add_parser(sub) -> None:
    p = sub.add_parser("migrate", help="apply pending database migrations", description=(
        "Apply the versioned SQL migrations that are not yet recorded (idempotent, safe to run from several "
        "processes at once). Refuses a database whose schema is newer than this code. A setting that is wrong "
        "(a file DATABASE_URL names is missing) ends with exit 2, a database that refuses or cannot be reached "
        "with exit 3, each with one line saying why."))
    p.add_argument("--database-url", help="PostgreSQL URL [env DATABASE_URL]")
    p.set_defaults(func=main)
