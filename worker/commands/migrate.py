"""`rating-worker migrate`: apply the database migrations that are not recorded yet (worker.store.migrate)."""

from __future__ import annotations

import argparse
import asyncio
import os
import sys


def main(args: argparse.Namespace) -> int:
    url = args.database_url or os.environ.get("DATABASE_URL")
    if not url:
        print("rating-worker: configuration error: DATABASE_URL is not set", file=sys.stderr)
        return 2
    from worker.store.migrate import SchemaTooNew, migrate

    try:
        applied = asyncio.run(migrate(url))
    except SchemaTooNew as exc:
        print(f"rating-worker: {exc}", file=sys.stderr)
        return 3
    print("applied: " + ", ".join(applied) if applied else "schema is up to date")
    return 0


def add_parser(sub) -> None:
    p = sub.add_parser("migrate", help="apply pending database migrations", description=(
        "Apply the versioned SQL migrations that are not yet recorded (idempotent, safe to run from several "
        "processes at once). Refuses a database whose schema is newer than this code."))
    p.add_argument("--database-url", help="PostgreSQL URL [env DATABASE_URL]")
    p.set_defaults(func=main)
