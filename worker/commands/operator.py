"""What the operator's commands share: their output (a table for people, worker.terminal.table; JSON with
--json), their settings (config.load_for_tool: only what a command needs, checked as `run` checks it) and how a
configuration or connection problem ends (one line, exit 2 or 3): `command`, which `migrate` and `backfill`
use too.

Each command reads PostgreSQL (worker.store.reads: OperatorReads, every statement in
store/sql/queries.sql) or the dead-letter topic, and changes nothing, except `dlq replay`.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from datetime import datetime
from typing import Any

import orjson

from worker import config as config_mod

__all__ = ["UsageError", "add_common", "command", "connect", "database_url", "emit", "kafka_settings"]


def _json_default(value: Any) -> Any:
    if isinstance(value, datetime):
        return value.isoformat().replace("+00:00", "Z")
    raise TypeError(type(value).__name__)


def emit(as_json: bool, obj: Any, text: str) -> None:
    if as_json:
        sys.stdout.buffer.write(orjson.dumps(obj, default=_json_default, option=orjson.OPT_INDENT_2) + b"\n")
    else:
        print(text)


class UsageError(Exception):
    """A setting or argument the command can not work with: one line, exit 2."""


def database_url(args: argparse.Namespace) -> str:
    try:
        return config_mod.load_for_tool(args, database=True).database_url
    except config_mod.ConfigError as exc:
        raise UsageError(str(exc)) from None


async def connect(args: argparse.Namespace):
    from worker.store.connection import connect as connect_to
    from worker.store.postgres import init_connection

    conn = await connect_to(database_url(args))
    await init_connection(conn)
    return conn


def command(coro_fn):
    """Run one command; a setting, an argument, the schema or PostgreSQL that fails ends as one clear line
    (docs/operations.md, "Exit codes"): 2 for what the user must change, 3 for what the database refused
    (worker.store.connection says why)."""

    def command(args: argparse.Namespace) -> int:
        try:
            return asyncio.run(coro_fn(args))
        except Exception as exc:
            if (ending := _ending(exc)) is None:
                raise  # a bug: its traceback
            print(f"rating-worker {args.command}: {ending[0]}", file=sys.stderr)
            return ending[1]

    return command


def _ending(exc: Exception) -> tuple[str, int] | None:
    """The line and the exit code a command ends with after `exc`; None for a bug. (The database's
    exceptions are imported here, once something failed: `replay` in memory does not load asyncpg.)"""
    if isinstance(exc, UsageError):
        return str(exc), 2
    from asyncpg import InterfaceError, PostgresError
    from asyncpg.exceptions import UndefinedColumnError, UndefinedFunctionError, UndefinedTableError

    from worker.store.connection import EXIT_DATABASE, EXIT_SETTING, CannotConnect, describe
    from worker.store.migrate import MigrationError

    if isinstance(exc, UndefinedColumnError | UndefinedTableError | UndefinedFunctionError):
        # the message's first line: a missing function's comes with a HINT line about argument types
        return (f"the database's schema is older than this rating-worker ({str(exc).splitlines()[0]}): run "
                "`rating-worker migrate`",
                EXIT_DATABASE)
    if isinstance(exc, MigrationError):
        return str(exc), EXIT_DATABASE
    if isinstance(exc, CannotConnect | PostgresError | InterfaceError):
        failure = describe(exc)
        return f"PostgreSQL: {failure}", failure.exit_code
    if isinstance(exc, OSError):  # a file of the command's own (--plot)
        return str(exc), EXIT_SETTING
    return None


def kafka_settings(args: argparse.Namespace) -> config_mod.Config:
    try:
        return config_mod.load_for_tool(args, kafka=True)
    except config_mod.ConfigError as exc:
        raise UsageError(str(exc)) from None


def add_common(p: argparse.ArgumentParser, kafka: bool = False) -> None:
    if kafka:
        p.add_argument("--bootstrap-servers", dest="kafka_bootstrap_servers",
                       help="Kafka bootstrap servers [env KAFKA_BOOTSTRAP_SERVERS]")
        p.add_argument("--topic", dest="kafka_dlq_topic",
                       help="dead-letter topic [env KAFKA_DLQ_TOPIC, default ratings.dlq]")
    else:
        p.add_argument("--database-url", help="PostgreSQL URL [env DATABASE_URL]")
    p.add_argument("--json", action="store_true", help="print JSON instead of a table")
