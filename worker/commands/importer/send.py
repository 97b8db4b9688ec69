"""Where the good lines go: the input topic (keyed by player), PostgreSQL through the worker's engine
(one transaction per batch), or nowhere (a dry run); and the counts of what happened to each line."""

from __future__ import annotations

import asyncio
import contextlib
import sys
from dataclasses import dataclass, field
from typing import IO, Any

import orjson

from worker.commands.importer.events import Duplicate, Good, Rejected, RejectsWriter, check_records
from worker.commands.importer.read import (
    CsvHeader,
    ImportError_,
    detect_format,
    open_input,
    read_csv,
    read_jsonl,
)
from worker.config import mask_url
from worker.terminal.progress import Progress


@dataclass
class Counts:
    read: int = 0  # data lines read (header and blank lines not counted)
    rejected: int = 0
    duplicates: int = 0  # lines with the same data as an earlier line of the file
    done: int = 0  # produced and acknowledged / committed / checked (dry run)
    applied: int = 0  # --database-url: ratings replaced
    already: int = 0  # --database-url: imported before (the same source and id), skipped
    unrated: int = 0  # --database-url: ignored (an account closed for fair play)
    shown: list[Rejected] = field(default_factory=list)  # the first rejections, for the summary
    shown_duplicates: list[Duplicate] = field(default_factory=list)


SHOW_REJECTED = 50
SHOW_DUPLICATES = 10




class Failed(Exception):
    """The broker or the database failed mid-run (exit 3)."""


async def checked_items(args, counts: Counts, progress: Progress, rejects: RejectsWriter | None,
                 notes: IO[str]) -> Any:
    """Checked lines, as an async generator that lets the event loop run every 100 lines (so a batch
    in PostgreSQL or in the producer makes progress while the next one is read)."""
    fmt = detect_format(args.file, args.format)
    stream = open_input(args.file)
    progress.track(stream)
    ignored: set[str] = set()

    def on_header(header: CsvHeader) -> None:
        if "imported_at" not in header.columns and args.imported_at is None:
            raise ImportError_("the header row has no 'imported_at' column: add one, or give --imported-at TIME")
        if header.ignored:
            notes.write(f"rating-worker import: ignoring columns that are not rating.imported fields: "
                        f"{', '.join(header.ignored)}\n")
        if rejects is not None:
            rejects.header(header)

    records = read_csv(stream, on_header) if fmt == "csv" else read_jsonl(stream, ignored)
    try:
        for n, item in enumerate(check_records(records, args.source, args.imported_at)):
            counts.read += 1
            if item.__class__ is Good:
                yield item
            elif item.__class__ is Rejected:
                count_rejected(counts, rejects, item)
            else:
                counts.duplicates += 1
                if len(counts.shown_duplicates) < SHOW_DUPLICATES:
                    counts.shown_duplicates.append(item)
            if n % 100 == 99:
                progress.tick()
                await asyncio.sleep(0)
    finally:
        if stream is not sys.stdin.buffer:
            stream.close()
        if ignored:
            notes.write(f"rating-worker import: ignored fields that are not rating.imported fields: "
                        f"{', '.join(sorted(ignored)[:20])}\n")


def count_rejected(counts: Counts, rejects: RejectsWriter | None, item: Rejected) -> None:
    counts.rejected += 1
    if len(counts.shown) < SHOW_REJECTED:
        counts.shown.append(Rejected(item.line, item.error_class, item.reason, None))
    if rejects is not None:
        rejects.write(item)


async def batches(items, size: int):
    batch: list[Good] = []
    async for item in items:
        batch.append(item)
        if len(batch) >= size:
            yield batch
            batch = []
    if batch:
        yield batch


async def dry_run(args, counts, progress, rejects, notes) -> None:
    async for _ in checked_items(args, counts, progress, rejects, notes):
        counts.done += 1


async def to_broker(args, counts, progress, rejects, notes, kafka) -> None:
    """Produce the good lines to --topic, keyed by player, with the worker's own producer settings."""
    from aiokafka.errors import KafkaError

    from worker.kafka_clients import producer as make_producer

    servers = kafka.kafka_bootstrap_servers
    producer = make_producer(kafka, linger_ms=20)
    try:
        await producer.start()
    except (KafkaError, OSError) as exc:
        with contextlib.suppress(Exception):
            await producer.stop()
        raise Failed(f"cannot connect to the broker at {servers}: {exc}") from None
    try:
        in_flight: list = []  # the previous batch's futures, awaited while the next batch is sent

        async def settle(futures: list) -> None:
            try:
                await asyncio.gather(*futures)
            except KafkaError as exc:
                raise Failed(f"the broker refused a message: {exc!r}") from None
            counts.done += len(futures)

        async for batch in batches(checked_items(args, counts, progress, rejects, notes), args.batch_size):
            futures = []
            for item in batch:
                try:
                    futures.append(await producer.send(args.topic, item.value, key=item.key))
                except KafkaError as exc:
                    raise Failed(f"cannot send to {args.topic}: {exc!r}") from None
            await settle(in_flight)
            in_flight = futures
            progress.tick()
        await settle(in_flight)
    finally:
        with contextlib.suppress(Exception):
            await producer.stop()


async def to_database(args, counts, progress, rejects, notes, url: str) -> None:
    from worker.engine import apply_batch
    from worker.store.connection import ERRORS, describe
    from worker.store.migrate import MigrationError, check_schema
    from worker.store.postgres import PostgresStore

    try:
        store = await PostgresStore.connect(url, min_size=1, max_size=2, timeout=30)
    except ERRORS as exc:
        raise Failed(f"cannot connect to PostgreSQL at {mask_url(url)}: {describe(exc)}") from None
    try:
        try:
            await check_schema(store.pool)
        except MigrationError as exc:
            raise Failed(str(exc)) from None

        async def apply(batch: list[Good]) -> None:
            try:
                result = await apply_batch(store, [g.message for g in batch])
            except ERRORS as exc:
                raise Failed(f"PostgreSQL failed (this batch was rolled back; lines {batch[0].line} to "
                              f"{batch[-1].line}): {describe(exc)}") from None
            failed = dict(result.failed)
            for i, outcome in enumerate(result.outcomes):
                if outcome == "applied":
                    counts.applied += 1
                elif outcome == "duplicate":
                    counts.already += 1
                elif outcome == "unrated":
                    counts.unrated += 1
                else:
                    count_rejected(counts, rejects, Rejected(batch[i].line, "rating_error", failed.get(i, outcome),
                                                      raw_of(batch[i])))
                    continue
                counts.done += 1

        pending: asyncio.Task | None = None
        try:
            async for batch in batches(checked_items(args, counts, progress, rejects, notes), args.batch_size):
                if pending is not None:
                    await pending
                pending = asyncio.create_task(apply(batch))
                progress.tick()
            if pending is not None:
                await pending
                pending = None
        finally:
            if pending is not None and not pending.done():
                pending.cancel()
                with contextlib.suppress(BaseException):
                    await pending
    finally:
        await store.close()


def raw_of(good: Good) -> Any:
    """What --rejects writes for a line that failed in the rating code (rare): its data as JSON."""
    data = orjson.loads(good.value)["data"]
    return orjson.dumps(data) + b"\n"


