"""What the operator's commands share: their output (a table for people, JSON with --json), their
settings (config.load_for_tool: only what a command needs, checked as `run` checks it) and how a
configuration or connection problem ends (one line, exit 2 or 3).

Each command reads PostgreSQL (or the dead-letter topic) and changes nothing, except `dlq replay`. The
SQL is in store/sql/queries.sql.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from datetime import datetime
from typing import Any

import orjson

from worker import config as config_mod

__all__ = ["UsageError", "add_common", "cell", "command", "connect", "emit", "kafka_settings", "table"]


def cell(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:.1f}"
    if isinstance(value, datetime):
        return value.strftime("%Y-%m-%d %H:%M:%S")
    return str(value)


def table(headers: list[str], rows: list[list[Any]]) -> str:
    """A plain text table: numbers to one decimal (rounding is for display; JSON keeps them whole)."""
    cells = [[cell(v) for v in row] for row in rows]
    widths = [max([len(h)] + [len(r[i]) for r in cells]) for i, h in enumerate(headers)]
    line = "  ".join(h.ljust(w) for h, w in zip(headers, widths, strict=True))
    out = [line.rstrip(), "  ".join("-" * w for w in widths)]
    out += ["  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in cells]
    return "\n".join(out)


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


def _database_url(args: argparse.Namespace) -> str:
    try:
        return config_mod.load_for_tool(args, database=True).database_url
    except config_mod.ConfigError as exc:
        raise UsageError(str(exc)) from None


async def connect(args: argparse.Namespace):
    import asyncpg

    from worker.store.postgres import init_connection

    conn = await asyncpg.connect(_database_url(args))
    await init_connection(conn)
    return conn


def command(coro_fn):
    """Run one command; configuration and connection problems end as one clear line."""

    def command(args: argparse.Namespace) -> int:
        try:
            return asyncio.run(coro_fn(args))
        except UsageError as exc:
            print(f"rating-worker {args.command}: {exc}", file=sys.stderr)
            return 2
        except OSError as exc:
            print(f"rating-worker {args.command}: cannot connect: {exc}", file=sys.stderr)
            return 3

    return command


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
