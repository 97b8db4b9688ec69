"""Offline replay (docs/contract.md#offline-replay): CloudEvents JSON lines in, rating.changed lines out
(the history read and rated by worker.offline.history).

Against memory it keeps what the rules read and no more (worker.store.stream): its memory stays flat in
the stream's length, so a platform's whole history can be replayed.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import BinaryIO

from worker.commands.operator import UsageError, command, database_url
from worker.offline.history import (
    counted,
    decoded_lines,
    dedupe_window,
    fair_play_closures,
    rated_chunks,
    report_chunk,
)
from worker.store.base import StateStore
from worker.store.stream import DEFAULT_DEDUPE_WINDOW_S, StreamStore
from worker.terminal.progress import Progress


async def replay(
    lines: Iterable[bytes], out: BinaryIO, store: StateStore | None = None, chunk: int = 1000, errors=sys.stderr,
    dedupe_window_s: float | None = DEFAULT_DEDUPE_WINDOW_S, watched: Mapping[str, tuple[float, float]] | None = None,
    after_chunk: Callable[[int, int], None] | None = None, tally: Counter | None = None,
) -> StateStore:
    """Apply in order, `chunk` messages per transaction (the same engine as the worker), write changes.

    Without a store, a StreamStore with this dedupe window (None: every id kept) keeping the games of
    the `watched` players: by default, of a sequence, its accounts closed for fair play (it is read twice);
    of a one-pass iterable (stdin), None: the fair-play window's games of everyone. `after_chunk(line number,
    changes written)` is called after each chunk (the command's progress). `tally` counts the lines read,
    the bad ones, and the messages by outcome (applied, unrated, duplicate, failed)."""
    if store is None:
        if watched is None and isinstance(lines, Sequence):
            watched = fair_play_closures(lines)
        store = StreamStore(dedupe_window_s, watched=watched)
    written = 0
    async for rated in rated_chunks(decoded_lines(lines, errors, tally), store, chunk):
        result = rated.result
        if result.records:  # one write a chunk: a write and a copy per change were 3% of a replay
            out.write(b"\n".join([record.payload for record in result.records]))
            out.write(b"\n")
        written += len(result.records)
        if tally is not None:
            tally.update(m.status for m in result.messages)
        report_chunk(store, rated.messages, rated.numbers, result, errors)
        if after_chunk is not None:
            after_chunk(rated.numbers[-1], written)
    return store


def _open(path: str, mode: str, what: str) -> BinaryIO:
    try:
        return open(path, mode)  # noqa: SIM115 - closed with the process
    except OSError as exc:
        raise UsageError(f"cannot {what} {path}: {exc.strerror}") from None


def summary(name: str, tally: Counter) -> str:
    return (f"replay {name}: {tally['read']:,} lines read: {tally['applied']:,} rated, {tally['unrated']:,} unrated, "
            f"{tally['duplicate']:,} duplicates, {tally['bad']:,} bad, {tally['failed']:,} failed (each reported above)")


@command
async def main(args: argparse.Namespace) -> int:
    """0 when every line was rated (or left unrated by the rules), 1 when some were bad or failed (with the
    summary on stderr), 2 for a file that cannot be opened, 3 for a database that cannot be used."""
    source = sys.stdin.buffer if args.file in (None, "-") else _open(args.file, "rb", "read")
    out = sys.stdout.buffer if args.output in (None, "-") else _open(args.output, "wb", "write")
    name = "stdin" if args.file in (None, "-") else os.path.basename(args.file)
    counts = {"lines": 0, "changes": 0}
    tally: Counter = Counter()

    def progress(label: str, describe) -> Progress:
        # Output on the terminal is its own progress: a bar or lines beside it would only garble it.
        quiet = args.quiet or bool(getattr(out, "isatty", lambda: False)())
        shown = Progress(label, describe=describe, count=lambda: counts["lines"], stream=sys.stderr, quiet=quiet)
        shown.track(source)
        return shown

    async def go() -> None:
        store = None
        if args.database_url:
            from worker.store.migrate import check_schema
            from worker.store.postgres import PostgresStore

            if args.dedupe_window != DEFAULT_DEDUPE_WINDOW_S:
                sys.stderr.write("replay: --dedupe-window is for replays in memory; PostgreSQL keeps ids for the "
                                 "workers' DEDUPE_WINDOW_DAYS\n")

            store = await PostgresStore.connect(database_url(args))
            try:
                await check_schema(store.pool)
            except BaseException:
                await store.close()
                raise
        watched = None
        if store is None and source.seekable():
            # A file is read twice: its fair-play closures first, so that only their players' games are kept.
            start = source.tell()
            first = progress(f"replay {name}, closures", lambda: f"{counts['lines']:,} lines")
            try:
                watched = fair_play_closures(counted(source, counts, first))
            finally:
                first.end()
            source.seek(start)
        shown = progress(f"replay {name}", lambda: f"{counts['lines']:,} lines, {counts['changes']:,} changes")

        def after_chunk(line: int, written: int) -> None:
            counts["lines"], counts["changes"] = line, written
            shown.tick()

        try:
            await replay(source, out, store=store, errors=shown, dedupe_window_s=args.dedupe_window,
                         watched=watched, after_chunk=after_chunk, tally=tally)
        finally:
            shown.end()
            if store is not None:
                await store.close()

    try:
        await go()
    finally:
        out.flush()
    if tally["bad"] or tally["failed"]:
        sys.stderr.write(summary(name, tally) + "\n")
        return 1
    return 0


def add_parser(sub) -> None:
    p = sub.add_parser("replay", help="rate CloudEvents JSON lines offline", description=(
        "Read CloudEvents JSON lines from FILE (or stdin), apply them in order with the worker's engine "
        "against in-memory state (or PostgreSQL with --database-url) and write rating.changed JSON lines. "
        "Bad lines are reported on stderr with their line number and skipped; then a summary, and exit 1. "
        "Example: rating-worker replay history.jsonl -o changes.jsonl"))
    p.add_argument("file", nargs="?", help="input file, '-' or absent for stdin")
    p.add_argument("--output", "-o", help="output file (default stdout)")
    p.add_argument("--database-url", help="apply against this PostgreSQL instead of memory")
    p.add_argument("--dedupe-window", type=dedupe_window, default=DEFAULT_DEDUPE_WINDOW_S, metavar="DURATION",
                   help="in memory, how long (of message time) a message's id is kept to skip its duplicates: "
                        "7d (the default), 12h, 3600, or 'all' to keep every id (exact whatever the order, "
                        "at about 100 bytes an id); a duplicate delivered later than this (and up to a day, past 8d "
                        "an eighth, more) after the first is applied again. A regular FILE (or stdin redirected "
                        "from one) is read twice, its fair-play closures first, and their players' games kept whole; from a pipe, the 30 days of the "
                        "fair-play window are kept this much longer")
    p.add_argument("--quiet", "-q", action="store_true",
                   help="no progress (shown on stderr, a bar on a terminal and a line every 10 s otherwise, "
                        "unless the output itself goes to the terminal)")
    p.set_defaults(func=main)
