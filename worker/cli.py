"""`rating-worker COMMAND`: run, migrate, replay, docs, demo, import, and the operator's commands. `rating-worker COMMAND --help` explains each."""

from __future__ import annotations

import argparse
import asyncio
import logging
import sys

from worker import config as config_mod
from worker.observability import setup_logging

logger = logging.getLogger("rating_worker")


def _run(args: argparse.Namespace) -> int:
    try:
        cfg = config_mod.load(args)
    except config_mod.ConfigError as exc:
        print(f"rating-worker: configuration error: {exc}", file=sys.stderr)
        return 2
    setup_logging(cfg.log_level)
    from worker.service import run_service
    from worker.store.migrate import MigrationError


    try:
        return asyncio.run(run_service(cfg))
    except MigrationError as exc:
        print(f"rating-worker: {exc}", file=sys.stderr)
        return 3


def _migrate(args: argparse.Namespace) -> int:
    import os

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


def _replay(args: argparse.Namespace) -> int:
    from worker.replay import replay

    source = sys.stdin.buffer if args.file in (None, "-") else open(args.file, "rb")  # noqa: SIM115
    out = sys.stdout.buffer if args.output in (None, "-") else open(args.output, "wb")  # noqa: SIM115

    async def go() -> None:
        store = None
        if args.database_url:
            from worker.store.postgres import PostgresStore

            store = await PostgresStore.connect(args.database_url)
        try:
            await replay(source, out, store=store)
        finally:
            if store is not None:
                await store.close()

    try:
        asyncio.run(go())
    finally:
        out.flush()
    return 0


def _docs(args: argparse.Namespace) -> int:
    from worker.docs import render

    text = render()
    if args.output == "-":
        sys.stdout.write(text)
    else:
        with open(args.output, "w", encoding="utf-8") as fh:
            fh.write(text)
        print(f"wrote {args.output}")
    return 0


def _demo(args: argparse.Namespace) -> int:
    from worker.demo import run_demo

    return asyncio.run(run_demo(args))


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="rating-worker",
        description="Streaming chess rating service: consumes game/event/puzzle messages from Kafka, "
        "rates them in one PostgreSQL transaction per batch and publishes rating.changed.",
    )
    sub = parser.add_subparsers(dest="command", required=True)

    p = sub.add_parser("run", help="run the worker (production)", description=(
        "Consume the input topics, rate, publish rating.changed. Every setting is an environment variable "
        "or the matching flag; flags win. SIGTERM drains the batch in hand and exits 0."))
    config_mod.add_arguments(p)
    p.set_defaults(func=_run)

    p = sub.add_parser("migrate", help="apply pending database migrations", description=(
        "Apply the versioned SQL migrations that are not yet recorded (idempotent, safe to run from several "
        "processes at once). Refuses a database whose schema is newer than this code."))
    p.add_argument("--database-url", help="PostgreSQL URL [env DATABASE_URL]")
    p.set_defaults(func=_migrate)

    p = sub.add_parser("replay", help="rate CloudEvents JSON lines offline", description=(
        "Read CloudEvents JSON lines from FILE (or stdin), apply them in order with the worker's engine "
        "against in-memory state (or PostgreSQL with --database-url) and write rating.changed JSON lines. "
        "Bad lines are reported on stderr with their line number and skipped."))
    p.add_argument("file", nargs="?", help="input file, '-' or absent for stdin")
    p.add_argument("--output", "-o", help="output file (default stdout)")
    p.add_argument("--database-url", help="apply against this PostgreSQL instead of memory")
    p.set_defaults(func=_replay)

    p = sub.add_parser("docs", help="regenerate docs/ratings.md from the engine", description=(
        "Compute every table of the rating documentation with the engine and write it, so the page and the "
        "worker cannot disagree."))
    p.add_argument("--output", "-o", default="docs/ratings.md", help="where to write ('-' for stdout)")
    p.set_defaults(func=_docs)

    p = sub.add_parser("demo", help="everything local: PostgreSQL, broker, worker, a stream of games", description=(
        "Start an embedded PostgreSQL and Kafka-protocol broker on free loopback ports, migrate, run the worker "
        "and stream demo games (hundreds of players, all speeds, a few duplicates and bad messages), showing "
        "the top 10 per category as ratings change. Ctrl-C stops everything."))
    p.add_argument("--players", type=int, default=300, help="players in the demo population (default 300)")
    p.add_argument("--rate", type=float, default=200.0, help="games per second (default 200)")
    p.add_argument("--games", type=int, default=0, help="stop after this many games (default: until Ctrl-C)")
    p.add_argument("--metrics-port", type=int, default=0, help="metrics port (default: a free one)")
    p.add_argument("--refresh", type=float, default=2.0, help="seconds between screen refreshes (default 2)")
    p.add_argument("--seed", type=int, default=7, help="random seed of the demo stream")
    p.set_defaults(func=_demo)

    from worker import admin, importer

    importer.add_parser(sub)
    admin.add_parsers(sub)
    return parser


#: the commands that rate messages for a long time, and get worker.runtime's process settings
LONG_RUNNING = frozenset({"run", "replay", "import", "demo"})


def main(argv: list[str] | None = None) -> int:
    """The process's entry point (`rating-worker`, `python -m worker`); tests call a command's function."""
    args = build_parser().parse_args(argv)
    if args.command in LONG_RUNNING:
        from worker.runtime import tune_for_throughput

        tune_for_throughput()
    return args.func(args)


if __name__ == "__main__":
    sys.exit(main())
