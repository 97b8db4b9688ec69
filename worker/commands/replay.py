"""Offline replay (CONTRACT.md "Offline replay"): CloudEvents JSON lines in, rating.changed lines out."""

from __future__ import annotations

import argparse
import asyncio
import sys
from collections.abc import Iterable, Iterator
from typing import BinaryIO

from worker.contract.decode import decode_rateable
from worker.contract.reasons import BadMessage
from worker.engine import apply_messages
from worker.ratings.inputs import Message
from worker.store.base import StateStore
from worker.store.memory import MemoryStore


def decoded_lines(lines: Iterable[bytes], errors) -> Iterator[tuple[int, Message]]:
    """Valid messages in order; a bad line is reported with its number and reason, and skipped."""
    for number, line in enumerate(lines, start=1):
        line = line.strip()
        if not line:
            continue
        try:
            message, _ = decode_rateable(line)
        except BadMessage as exc:
            errors.write(f"line {number}: {exc.error_class}: {exc.reason}\n")
            continue
        yield number, message


async def replay(
    lines: Iterable[bytes], out: BinaryIO, store: StateStore | None = None, chunk: int = 1000, errors=sys.stderr
) -> StateStore:
    """Apply in order, `chunk` messages per transaction (the same engine as the worker), write changes."""
    store = store if store is not None else MemoryStore()
    pending: list[Message] = []
    numbers: list[int] = []

    async def flush() -> None:
        if pending:
            result = await apply_messages(store, pending)  # a sweep (a FIDE list) in chunks of its own
            for record in result.records:
                out.write(record.payload + b"\n")
            for index, error in result.failed:
                errors.write(f"line {numbers[index]}: rating_error: {error}\n")
            pending.clear()
            numbers.clear()

    for number, message in decoded_lines(lines, errors):
        pending.append(message)
        numbers.append(number)
        if len(pending) >= chunk:
            await flush()
    await flush()
    return store


def main(args: argparse.Namespace) -> int:
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


def add_parser(sub) -> None:
    p = sub.add_parser("replay", help="rate CloudEvents JSON lines offline", description=(
        "Read CloudEvents JSON lines from FILE (or stdin), apply them in order with the worker's engine "
        "against in-memory state (or PostgreSQL with --database-url) and write rating.changed JSON lines. "
        "Bad lines are reported on stderr with their line number and skipped."))
    p.add_argument("file", nargs="?", help="input file, '-' or absent for stdin")
    p.add_argument("--output", "-o", help="output file (default stdout)")
    p.add_argument("--database-url", help="apply against this PostgreSQL instead of memory")
    p.set_defaults(func=main)
