"""`rating-worker COMMAND`: run, serve, migrate, replay, backfill, docs, demo, import, and the operator's commands (player,
leaderboard, outbox, dlq). `rating-worker COMMAND --help` explains each; each lives in worker/commands/."""

from __future__ import annotations

import argparse
import importlib
import sys

from worker.commands import COMMANDS

#: the commands that rate messages for a long time, and get worker.runtime's process settings
LONG_RUNNING = frozenset({"run", "replay", "backfill", "import", "demo"})


def build_parser(only: str | None = None) -> argparse.ArgumentParser:
    """Every command's parser, or only that command's (its module alone is imported: worker.commands)."""
    parser = argparse.ArgumentParser(
        prog="rating-worker",
        description="Streaming chess rating service: consumes game/event/puzzle messages from Kafka, "
        "rates them in one PostgreSQL transaction per batch and publishes rating.changed.",
    )
    sub = parser.add_subparsers(dest="command", required=True)
    for name, module in COMMANDS.items():
        if only is None or name == only:
            importlib.import_module(f"worker.commands.{module}").add_parser(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    """The process's entry point (`rating-worker`, `python -m worker`); tests call a command's function."""
    argv = sys.argv[1:] if argv is None else argv
    # The first argument names a command: build its parser alone (anything else, `--help` or a typo, gets
    # the whole list).
    args = build_parser(argv[0] if argv and argv[0] in COMMANDS else None).parse_args(argv)
    if args.command in LONG_RUNNING:
        from worker.runtime import tune_for_throughput

        tune_for_throughput()
    return args.func(args)


if __name__ == "__main__":
    sys.exit(main())
