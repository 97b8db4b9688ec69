"""`rating-worker backfill FILE`: a platform's history into PostgreSQL in bulk, then the worker goes live
(issue 22, item 3; docs/operations.md, "Going live from a history").

The history is rated by the worker's engine against memory (worker.store.bulk) and written a large chunk
at a time, each chunk in one transaction with where the file stands (`backfill_progress`): a crash or
Ctrl-C loses the work since the last chunk committed (at most two chunks: the one being written and the
one being rated), and the next run goes on after the last one committed, so nothing is applied twice and
nothing skipped. The rows are the worker's own (the same `save` statement), so the
worker continues from them as if it had consumed the history itself.

Into a database nothing else wrote to: empty, or holding earlier backfills only (several files of one
history, in order). A worker must not run on it until the backfill is done.
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import os
import sys
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field

from worker.commands.operator import UsageError, command, database_url
from worker.offline.history import decode_line, rated_chunks, report_chunk
from worker.ratings.inputs import Message
from worker.store.bulk import BulkStore, Position, backfill_runs, backfill_written, lock_backfill
from worker.terminal.progress import Progress

HEAD_BYTES = 1 << 20  # a file is known by the digest of its first MiB
# Messages per transaction (docs/performance.md, backfill): 10,000 was the fastest on 100,000 CSR games
# (50,000: 15% slower, the engine waiting longer for the last chunk's commit; 2,000: 20% slower, paying
# for more commits) and the same within the noise on a 1M-message mix, where it takes half the memory
# (two chunks of rows are held at a time: 50,000 took 321-343 MiB against 187).
CHUNK = 10_000
BATCH = 1_000  # messages per engine batch, as replay's


class BackfillError(UsageError):
    """Why this database or file can not be backfilled (one line, exit 2)."""


class Interrupted(Exception):
    """The run ended before the file's end, as Ctrl-C ends it (`stop_after`: the tests' crash)."""


@dataclass
class Tally:
    """What the run did, for its progress and its summary."""

    lines: int = 0  # of the file, those done before this run included
    read: int = 0  # lines read by this run
    bad: int = 0
    outcomes: Counter = field(default_factory=Counter)  # applied, unrated, duplicate, failed
    changes: int = 0


class HistoryReader:
    """The file's lines from an offset on, as (line number, message or None for a bad line, reported). Its
    attributes say where it stands (an offset after a whole line, the line number and the digest of every
    byte before), up to date whenever it yields."""

    def __init__(self, fileobj, errors, start: Position | None = None) -> None:
        self.file, self.errors = fileobj, errors
        self.digest = hashlib.sha256()
        self.offset = self.line = 0
        if start is not None:
            self._check_prefix(start)

    def _check_prefix(self, start: Position) -> None:
        """Read the bytes done before, as the digest covers them: the file must be the one it was."""
        if not hash_prefix(self.file, start.bytes_done, self.digest) or self.digest.hexdigest() != start.digest:
            raise BackfillError(f"{start.name}: its first {start.bytes_done:,} bytes are not those backfilled "
                                f"before (the file was changed): restore it, or backfill into a new database")
        self.offset, self.line = start.bytes_done, start.lines_done

    def __iter__(self) -> Iterator[tuple[int, Message | None]]:
        """(line number, its message, or None for a bad line, reported); blank lines are skipped."""
        for raw in self.file:
            self.digest.update(raw)
            self.offset += len(raw)
            self.line += 1
            text = raw.strip()
            if text:
                yield self.line, decode_line(self.line, text, self.errors)

    def position(self, head: str, name: str, finished: bool = False) -> Position:
        return Position(head, name, self.digest.hexdigest(), self.offset, self.line, finished)


def head_digest(path: str) -> str:
    with open(path, "rb") as f:
        return hashlib.sha256(f.read(HEAD_BYTES)).hexdigest()


def hash_prefix(f, size: int, digest) -> bool:
    """Feed the next `size` bytes of `f` to `digest`, a MiB at a time; False when the file ends first."""
    while size:
        block = f.read(min(size, 1 << 20))
        if not block:
            return False
        digest.update(block)
        size -= len(block)
    return True


def prefix_digest(path: str, size: int) -> str | None:
    """The digest of the file's first `size` bytes (None when it is shorter)."""
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        return digest.hexdigest() if hash_prefix(f, size, digest) else None


async def where_to_start(conn, path: str, head: str, name: str, publish: bool) -> Position | None:
    """Where this file's backfill starts: None from its first line, a Position to resume from (finished:
    nothing is left to do); a BackfillError when the database, or the file, is not one to backfill."""
    runs = await backfill_runs(conn)
    mine = next((r for r in runs if r["head_digest"] == head), None)
    others = [r for r in runs if r["head_digest"] != head and r["finished_at"] is None]
    if others and others[0]["name"] == name:
        raise BackfillError(f"{name}: not the file whose backfill began under this name (its first MiB differs: "
                            f"was it changed?): restore it, or backfill into a new database")
    if others:
        raise BackfillError(f"{others[0]['name']} is backfilled only part way ({others[0]['lines_done']:,} lines): "
                            f"finish it first (rating-worker backfill {others[0]['name']})")
    processed, anything = await backfill_written(conn)
    if processed != sum(r["processed"] for r in runs) or (anything and not runs):
        raise BackfillError("this database holds ratings that no backfill wrote (a worker ran on it?): a history "
                            "is backfilled into an empty database, before the worker goes live")
    if mine is None:
        for run in runs:  # all finished: a file done that grew or changed would be applied a second time
            if run["name"] == name or (run["bytes_done"] and prefix_digest(path, run["bytes_done"]) == run["digest"]):
                raise BackfillError(f"{name}: has the name of {run['name']}, backfilled before ({run['lines_done']:,} "
                                    f"lines), or begins as it: a history file is backfilled once; what follows it goes "
                                    f"in a file of its own, under a name of its own")
        return None
    if mine["finished_at"] is None and mine["published"] != publish:
        raise BackfillError(f"{name}: its backfill began {'with' if mine['published'] else 'without'} --publish: "
                            f"go on the same way")
    return Position(head, mine["name"], mine["digest"], mine["bytes_done"], mine["lines_done"],
                    mine["finished_at"] is not None, mine["processed"], mine["changes"])


async def backfill(path: str, url: str, chunk: int = CHUNK, publish: bool = False, quiet: bool = False,
                   errors=None, stop_after: int | None = None) -> Tally:
    """Backfill the file at `path` into the database at `url` (see the module's docstring). `stop_after`:
    end (as Ctrl-C would) once that many chunks are committed (the tests' crash)."""
    from worker.store.connection import connect

    errors = errors if errors is not None else sys.stderr
    name = os.path.basename(path)
    head = head_digest(path)
    tally = Tally()
    guard = await connect(url)
    try:
        if not await lock_backfill(guard):
            raise BackfillError("another backfill is running on this database")
        start = await where_to_start(guard, path, head, name, publish)
        if start is not None and start.finished:
            if os.path.getsize(path) != start.bytes_done or prefix_digest(path, start.bytes_done) != start.digest:
                raise BackfillError(f"{name}: backfilled to its end ({start.lines_done:,} lines) and changed since: "
                                    f"what follows goes in a file of its own")
            errors.write(f"backfill {name}: already done ({start.lines_done:,} lines): nothing to do\n")
            tally.lines = start.lines_done
            return tally
        store = await BulkStore.open(url, publish)
        if start is not None:
            store.written.update(processed=start.processed, changes=start.changes)
        shown = Progress(f"backfill {name}", describe=lambda: _counts(tally), count=lambda: tally.read,
                         stream=errors, quiet=quiet)
        try:
            with open(path, "rb") as f:
                reader = HistoryReader(f, shown, start)
                shown.track(f)
                await _rate_and_write(store, reader, start or Position(head, name, "", 0, 0), tally, shown, chunk,
                                      stop_after)
        finally:
            shown.end()
            await store.close()
    finally:
        await guard.close()
    return tally


async def _rate_and_write(store: BulkStore, reader: HistoryReader, origin: Position, tally: Tally, shown: Progress,
                          chunk: int, stop_after: int | None) -> None:
    """Rate the reader's messages in engine batches and hand the store a chunk to write every `chunk`
    messages, with the position reached; the last with the file's end."""
    first = reader.line
    since_flush = flushes = 0

    def messages() -> Iterator[tuple[int, Message]]:
        for number, message in reader:
            tally.lines, tally.read = number, number - first
            if message is None:
                tally.bad += 1
            else:
                yield number, message

    async for rated in rated_chunks(messages(), store, BATCH):
        report_chunk(store, rated.messages, rated.numbers, rated.result, shown)
        tally.outcomes.update(m.status for m in rated.result.messages)
        tally.changes += len(rated.result.records)
        since_flush += len(rated.messages)
        if len(rated.messages) < BATCH:  # the file's last chunk, shorter: written with the file's end below
            continue
        shown.tick()
        if since_flush >= chunk:
            await store.flush(reader.position(origin.head_digest, origin.name))
            since_flush = 0
            flushes += 1
            if stop_after is not None and flushes >= stop_after:
                await store.written_so_far()
                raise Interrupted(f"stopped after {flushes} chunks")
    await store.flush(reader.position(origin.head_digest, origin.name, finished=True))
    await store.written_so_far()


def _counts(t: Tally) -> str:
    return f"{t.lines:,} lines, {t.changes:,} changes"


def summary(name: str, t: Tally, seconds: float) -> str:
    o = t.outcomes
    rated = o["applied"]
    rate = f", {t.read / seconds:,.0f} lines/s" if seconds > 0 else ""
    return (f"backfill {name}: {t.read:,} lines in {seconds:,.1f} s{rate}: {rated:,} rated, {o['unrated']:,} "
            f"unrated, {o['duplicate']:,} duplicates, {t.bad:,} bad lines, {o['failed']:,} failed; {t.changes:,} "
            f"rating changes. The worker can go live: docs/operations.md, \"Going live from a history\"")


@command
async def main(args: argparse.Namespace) -> int:
    if args.file == "-":
        raise UsageError("a backfill reads a file (it resumes where it stopped): not standard input")
    if not os.path.isfile(args.file):
        raise UsageError(f"{args.file}: no such file")
    if args.chunk < BATCH:
        raise UsageError(f"--chunk must be at least {BATCH:,} messages")
    url = database_url(args)
    started = time.monotonic()
    try:
        tally = await backfill(args.file, url, args.chunk, args.publish, args.quiet)
    except (Interrupted, KeyboardInterrupt, asyncio.CancelledError):
        print(f"backfill {os.path.basename(args.file)}: stopped; the chunks committed are kept, and the same "
              f"command goes on after them", file=sys.stderr)
        return 130
    if tally.read:
        print(summary(os.path.basename(args.file), tally, time.monotonic() - started))
    return 0


def add_parser(sub) -> None:
    p = sub.add_parser("backfill", help="load a history into an empty PostgreSQL in bulk, then go live",
                       formatter_class=argparse.RawDescriptionHelpFormatter, description="""\
Load a platform's history into PostgreSQL in bulk, then let the worker go live from it.

Reads CloudEvents JSON lines from FILE (as `rating-worker replay` does: the same engine, the same
numbers), and writes the ratings, the history, the processed ids and the unrated reasons to PostgreSQL
in one transaction per --chunk messages, each with the position reached in the file. Bad lines are
reported on stderr with their line number and skipped. Run it again after a crash or Ctrl-C: it checks
that the file is the same and goes on after the last chunk committed. Several files of one history:
one after the other, in order. Then start the worker: docs/operations.md, "Going live from a history".

Example: rating-worker backfill history.jsonl --database-url postgresql://rating@db/ratings""")
    p.add_argument("file", help="the history: CloudEvents JSON lines, oldest first")
    p.add_argument("--database-url", help="PostgreSQL URL [env DATABASE_URL]")
    p.add_argument("--chunk", type=int, default=CHUNK, metavar="N",
                   help=f"messages per transaction (default {CHUNK:,}): a crash loses the work since the last chunk "
                        f"committed (at most two: the one being written, the one being rated); both are held in "
                        f"memory, about 30-40 MiB per 10,000 messages, and larger chunks were not faster")
    p.add_argument("--publish", action="store_true",
                   help="publish the history's rating.changed too: its changes go to the outbox, and the worker's "
                        "relay publishes them (by default a history is not published)")
    p.add_argument("--quiet", "-q", action="store_true",
                   help="no progress (on stderr: a bar on a terminal, a line every 10 s otherwise)")
    p.set_defaults(func=main)
