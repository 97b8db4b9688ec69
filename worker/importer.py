"""`rating-worker import FILE`: bring existing ratings in as `rating.imported` CloudEvents (issue 12).

    FILE (CSV or JSON lines) -> one `rating.imported` per line -> checked by the worker's own decoder
        -> the input topic (default), or PostgreSQL directly (`--database-url`), or nowhere (`--dry-run`)

Each line becomes the `data` of one message. The envelope's `source` is `/rating-worker/import` (or
`--source`) and its `id` is a uuid5 of the line's data in a canonical form (keys sorted, 1500.0 written
1500, times in UTC), so the same line always gives the same id: importing a file again, or a file that
overlaps one imported before, applies nothing twice (the worker's dedupe on (source, id)). A line whose
data equals an earlier line's in the same file is skipped as a duplicate.

The pure parts (readers, ids, envelopes, checks) are plain functions for the unit tests; `main` is the
command (argparse Namespace -> exit code).
"""

from __future__ import annotations

import argparse
import asyncio
import codecs
import contextlib
import csv
import gzip
import hashlib
import io
import os
import re
import sys
import time
import uuid
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import IO, Any
from urllib.parse import urlsplit, urlunsplit

import orjson

from worker.contract.decode import decode_rateable
from worker.contract.reasons import BadMessage
from worker.contract.times import format_time, parse_time
from worker.ratings.inputs import Message

__all__ = [
    "DATA_FIELDS",
    "DEFAULT_SOURCE",
    "DEFAULT_TOPIC",
    "Good",
    "ImportError_",
    "Rejected",
    "Duplicate",
    "Record",
    "add_parser",
    "build_event",
    "check_records",
    "detect_format",
    "main",
    "message_id",
    "read_csv",
    "read_jsonl",
]

# The `data` fields of rating.imported (schemas/rating.imported.json), in the contract's order.
DATA_FIELDS = (
    "player_id", "system", "category", "rating", "rd", "volatility", "games", "wins", "draws", "losses",
    "events", "peak", "birth_year", "last_played_at", "imported_at",
)
NUMBER_FIELDS = frozenset({"rating", "rd", "volatility", "peak"})
INTEGER_FIELDS = frozenset({"games", "wins", "draws", "losses", "events", "birth_year"})
TIME_FIELDS = frozenset({"last_played_at", "imported_at"})
REQUIRED_COLUMNS = ("player_id", "system", "category", "rating")

DEFAULT_SOURCE = "/rating-worker/import"
DEFAULT_TOPIC = "ratings.imported"  # one of the worker's default input topics (worker.config)
DEFAULT_BATCH = 5000
TYPE = "rating.imported"
# Fixed forever: changing it would give every line a new id, and a file imported again would apply again.
ID_NAMESPACE = uuid.UUID("3b0c2f4e-2d1a-5c8e-9f57-7a1e0d4c6b21")
_NAMESPACE_BYTES = ID_NAMESPACE.bytes
# Placeholder envelope time for a line whose imported_at is missing or wrong: such a line is rejected
# (for its imported_at, which the reason names); the placeholder is never sent.
_NO_TIME = "1970-01-01T00:00:00Z"
# A number as JSON writes it: no NaN, no infinities, no 1_000, no hex, no Unicode digits.
_NUMBER_RE = re.compile(r"[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]+)?")
_INT_RE = re.compile(r"[+-]?[0-9]+")
_SURROGATE = re.compile("[\udc80-\udcff]")  # a byte that was not UTF-8 (decoded with surrogateescape)
FORMATS = {".csv": "csv", ".jsonl": "jsonl", ".ndjson": "jsonl", ".json": "jsonl"}

EXIT_OK, EXIT_REJECTED, EXIT_USAGE, EXIT_FAILED = 0, 1, 2, 3


class ImportError_(Exception):  # noqa: N801 - not the builtin ImportError
    """A usage or configuration error found before anything was imported (exit 2)."""


# ---------------------------------------------------------------------------------------------
# Reading: lines -> records (line number, data or the reason it has none)


@dataclass(slots=True)
class Record:
    """One line of the input: its `data` for rating.imported, or why there is none."""

    line: int  # 1-based line number in the file (a CSV record spanning lines: its first line)
    data: dict[str, Any] | None
    raw: Any  # the line as read: the CSV cells (list of str) or the JSON line (bytes), for --rejects
    error: tuple[str, str] | None = None  # (error class, reason)


def _number(name: str, text: str) -> int | float:
    if _INT_RE.fullmatch(text):
        return int(text)
    if _NUMBER_RE.fullmatch(text):
        return float(text)  # finite: the pattern has no nan/inf, and ratings are far below 1e308
    raise BadMessage("invalid_data", f"data.{name}: {text[:40]!r} is not a number")


@dataclass
class CsvHeader:
    columns: list[str]  # as normalized (stripped, lower case)
    fields: list[tuple[int, str]]  # (column index, data field) of the columns that are data fields
    ignored: list[str]  # columns that are not data fields


def parse_header(cells: list[str]) -> CsvHeader:
    """The header row -> which columns are data fields. ImportError_ for a header that cannot work."""
    columns = [c.strip().lower() for c in cells]
    if _SURROGATE.search("".join(columns)):
        raise ImportError_("the header row is not valid UTF-8")
    seen: set[str] = set()
    for c in columns:
        if c and c in seen:
            raise ImportError_(f"the header names the column {c!r} twice")
        seen.add(c)
    missing = [c for c in REQUIRED_COLUMNS if c not in seen]
    if missing:
        raise ImportError_(
            f"the header row has no {', '.join(repr(m) for m in missing)} column"
            f"{'s' if len(missing) > 1 else ''} (got: {', '.join(columns) or 'nothing'}; "
            f"columns are the rating.imported data fields: {', '.join(DATA_FIELDS)})"
        )
    known = set(DATA_FIELDS)
    fields = [(i, c) for i, c in enumerate(columns) if c in known]
    ignored = [c or f"(column {i + 1}, no name)" for i, c in enumerate(columns) if c not in known]
    return CsvHeader(columns, fields, ignored)


def csv_data(header: CsvHeader, cells: list[str]) -> dict[str, Any]:
    """One CSV row -> `data`: cells trimmed, an empty cell is absent, numbers typed. Raises BadMessage."""
    if len(cells) != len(header.columns):
        raise BadMessage(
            "invalid_csv", f"line: {len(cells)} cells, the header has {len(header.columns)} columns"
        )
    if _SURROGATE.search("".join(cells)):
        raise BadMessage("invalid_utf8", "line: not valid UTF-8")
    data: dict[str, Any] = {}
    for index, name in header.fields:
        text = cells[index].strip()
        if not text:
            continue
        data[name] = _number(name, text) if name in NUMBER_FIELDS or name in INTEGER_FIELDS else text
    return data


def _text_lines(stream: IO[bytes]) -> IO[str]:
    # utf-8-sig drops a byte order mark; surrogateescape keeps a bad byte as a lone surrogate, so that
    # the one line holding it is rejected (csv_data) and the rest of the file is still read.
    return io.TextIOWrapper(stream, encoding="utf-8-sig", errors="surrogateescape", newline="")


def read_csv(stream: IO[bytes], on_header: Callable[[CsvHeader], None] | None = None) -> Iterator[Record]:
    """Records of a CSV file (header row first). Blank lines are skipped. ImportError_ for a bad header."""
    text = _text_lines(stream)
    reader = csv.reader(text, strict=False)
    header: CsvHeader | None = None
    previous = 0
    for cells in reader:
        start, previous = previous + 1, reader.line_num
        if not cells or (len(cells) == 1 and not cells[0].strip()):
            continue
        if header is None:
            header = parse_header(cells)
            if on_header is not None:
                on_header(header)
            continue
        try:
            yield Record(start, csv_data(header, cells), cells)
        except BadMessage as exc:
            yield Record(start, None, cells, (exc.error_class, exc.reason))
    if header is None:
        raise ImportError_("the file is empty: a CSV file starts with a header row naming its columns")


def jsonl_data(line: bytes, ignored: set[str] | None = None) -> dict[str, Any]:
    """One JSON line -> `data`: null is absent, fields that are not data fields are dropped (and
    collected in `ignored`). Raises BadMessage."""
    try:
        value = orjson.loads(line)
    except orjson.JSONDecodeError as exc:
        try:
            line.decode("utf-8")
        except UnicodeDecodeError as err:
            raise BadMessage("invalid_utf8", f"line: invalid UTF-8 at byte {err.start}") from None
        raise BadMessage("invalid_json", f"line: invalid JSON ({exc})") from None
    if not isinstance(value, dict):
        kind = {list: "an array", str: "a string", bool: "a boolean", type(None): "null"}.get(type(value), "a number")
        raise BadMessage("invalid_json", f"line: must be a JSON object (the data of one rating.imported), not {kind}")
    if "specversion" in value and isinstance(value.get("data"), dict):
        raise BadMessage(
            "invalid_json",
            "line: this is a whole CloudEvent; give only the data objects, the importer writes the envelope",
        )
    known = DATA_FIELDS
    data = {}
    for key, item in value.items():
        if key not in known:
            if ignored is not None:
                ignored.add(key)
            continue
        if item is not None:
            data[key] = item
    return data


def read_jsonl(stream: IO[bytes], ignored: set[str] | None = None) -> Iterator[Record]:
    """Records of a JSON lines file: one data object per line; blank lines are skipped."""
    for number, line in enumerate(stream, start=1):
        if not line.strip():
            continue
        if number == 1 and line.startswith(codecs.BOM_UTF8):
            line = line[3:]
        try:
            yield Record(number, jsonl_data(line, ignored), line)
        except BadMessage as exc:
            yield Record(number, None, line, (exc.error_class, exc.reason))


# ---------------------------------------------------------------------------------------------
# Messages: data -> id, envelope, checked message


def _canonical(key: str, value: Any) -> Any:
    if value.__class__ is float and value.is_integer() and abs(value) < 2**53:
        return int(value)
    if key in TIME_FIELDS and isinstance(value, str):
        if len(value) == 20 and value[19] == "Z" and value[10] == "T":
            return value  # already the normal form (or wrong, and then the line is rejected anyway)
        try:
            return format_time(parse_time(value))
        except ValueError:
            return value
    return value


def message_id(data: dict[str, Any]) -> str:
    """uuid5(ID_NAMESPACE, the data in canonical form): the same rating gives the same id, whatever
    the file's format or the key order, 1500 or 1500.0, Z or +00:00."""
    canonical = orjson.dumps({k: _canonical(k, v) for k, v in data.items()}, option=orjson.OPT_SORT_KEYS)
    digest = bytearray(hashlib.sha1(_NAMESPACE_BYTES + canonical).digest()[:16])
    digest[6] = (digest[6] & 0x0F) | 0x50  # version 5
    digest[8] = (digest[8] & 0x3F) | 0x80  # RFC 4122 variant
    h = digest.hex()
    return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"


def build_event(data: dict[str, Any], source: str = DEFAULT_SOURCE, ident: str | None = None) -> bytes:
    """The rating.imported CloudEvent (JSON bytes) of one line's data; `time` is its imported_at."""
    at = data.get("imported_at")
    if not isinstance(at, str):
        at = _NO_TIME
    else:
        try:
            parse_time(at)
        except ValueError:
            at = _NO_TIME
    event = {"specversion": "1.0", "id": ident or message_id(data), "source": source, "type": TYPE, "time": at,
             "datacontenttype": "application/json", "data": data}
    player = data.get("player_id")
    if isinstance(player, str):
        event["subject"] = player
    return orjson.dumps(event)


@dataclass(slots=True)
class Good:
    line: int
    key: bytes  # the record key: player_id
    value: bytes  # the CloudEvent
    message: Message


@dataclass(slots=True)
class Rejected:
    line: int
    error_class: str
    reason: str
    raw: Any


@dataclass(slots=True)
class Duplicate:
    line: int
    first: int  # the earlier line with the same data


def check_records(
    records: Iterable[Record], source: str = DEFAULT_SOURCE, imported_at: str | None = None,
) -> Iterator[Good | Rejected | Duplicate]:
    """Each record -> a message checked by the worker's own decoder (and the engine's registry), a
    rejection with its reason, or a duplicate of an earlier line (the same data, so the same id)."""
    seen: dict[str, int] = {}
    for record in records:
        if record.error is not None:
            yield Rejected(record.line, record.error[0], record.error[1], record.raw)
            continue
        data = record.data
        if imported_at is not None and "imported_at" not in data:
            data["imported_at"] = imported_at
        ident = message_id(data)
        value = build_event(data, source, ident)
        try:
            message, _ = decode_rateable(value)
        except BadMessage as exc:
            reason = exc.reason
            if exc.error_class == "unsupported":  # worded for the file's column
                reason = f"data.system: no rating system for {data.get('system')!r} in this version of the worker"
            yield Rejected(record.line, exc.error_class, reason, record.raw)
            continue
        first = seen.setdefault(ident, record.line)
        if first != record.line:
            yield Duplicate(record.line, first)
            continue
        yield Good(record.line, message.payload.player_id.encode(), value, message)


# ---------------------------------------------------------------------------------------------
# Input files


def detect_format(path: str, given: str | None) -> str:
    if given:
        return given
    name = path.lower()
    if name.endswith(".gz"):
        name = name[:-3]
    for ext, fmt in FORMATS.items():
        if name.endswith(ext):
            return fmt
    if path == "-":
        raise ImportError_("reading stdin: say which format it is with --format csv or --format jsonl")
    raise ImportError_(
        f"cannot tell the format of {path!r} from its name (.csv, .jsonl, .ndjson, .json, optionally .gz): "
        "use --format csv or --format jsonl"
    )


def _open_input(path: str) -> IO[bytes]:
    if path == "-":
        return sys.stdin.buffer
    try:
        stream: IO[bytes] = open(path, "rb")  # noqa: SIM115 - closed by the caller
    except OSError as exc:
        raise ImportError_(f"cannot read {path!r}: {exc.strerror or exc}") from None
    if path.lower().endswith(".gz"):
        return gzip.open(stream, "rb")  # type: ignore[return-value]
    return stream


class RejectsWriter:
    """--rejects FILE: the rejected lines, in the input's format, with their line number and reason.

    CSV: the input's header with `line` and `error` columns in front, then each rejected row's cells
    (a fixed file can be imported again: those two columns are not data fields and are ignored).
    JSON lines: {"line": n, "error": "class: reason", "input": "<the line as it was>"}.
    """

    def __init__(self, path: str, fmt: str) -> None:
        self.fmt = fmt
        self._file = open(path, "w", encoding="utf-8", newline="", errors="surrogateescape")  # noqa: SIM115
        self._csv = csv.writer(self._file) if fmt == "csv" else None
        self.count = 0

    def header(self, header: CsvHeader) -> None:
        if self._csv is not None:
            self._csv.writerow(["line", "error", *header.columns])

    def write(self, rejected: Rejected) -> None:
        self.count += 1
        error = f"{rejected.error_class}: {rejected.reason}"
        if self._csv is not None:
            self._csv.writerow([rejected.line, error, *rejected.raw])
        else:
            raw = rejected.raw.rstrip(b"\r\n").decode("utf-8", errors="replace")
            self._file.write(orjson.dumps({"line": rejected.line, "error": error, "input": raw}).decode() + "\n")

    def close(self) -> None:
        self._file.close()


# ---------------------------------------------------------------------------------------------
# Running: counts, progress, the three destinations


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


class Progress:
    """One progress line on stderr: rewritten in place on a terminal, a line every 10 s otherwise."""

    def __init__(self, counts: Counts, stream: IO[str], quiet: bool) -> None:
        self.counts, self.stream, self.quiet = counts, stream, quiet
        self.tty = bool(getattr(stream, "isatty", lambda: False)())
        self.started = time.monotonic()
        self.every = 0.5 if self.tty else 10.0
        self.next = self.started + self.every
        self.dirty = False

    def elapsed(self) -> float:
        return time.monotonic() - self.started

    def text(self) -> str:
        c = self.counts
        rate = c.read / max(self.elapsed(), 1e-9)
        return (f"{c.read:,} lines read, {c.done:,} imported, {c.rejected:,} rejected, "
                f"{c.duplicates:,} duplicate, {rate:,.0f} lines/s")

    def tick(self) -> None:
        now = time.monotonic()
        if self.quiet or now < self.next:
            return
        self.next = now + self.every
        if self.tty:
            self.stream.write("\r\x1b[K" + self.text())
            self.dirty = True
        else:
            self.stream.write(self.text() + "\n")
        self.stream.flush()

    def end(self) -> None:
        if self.dirty:
            self.stream.write("\r\x1b[K")
            self.stream.flush()
            self.dirty = False


class _Failed(Exception):
    """The broker or the database failed mid-run (exit 3)."""


def _redact(url: str) -> str:
    parts = urlsplit(url)
    if parts.password is None:
        return url
    netloc = parts.netloc.replace(f":{parts.password}@", ":***@", 1)
    return urlunsplit(parts._replace(netloc=netloc))


async def _items(args, counts: Counts, progress: Progress, rejects: RejectsWriter | None,
                 notes: IO[str]) -> Any:
    """Checked lines, as an async generator that lets the event loop run every 100 lines (so a batch
    in PostgreSQL or in the producer makes progress while the next one is read)."""
    fmt = detect_format(args.file, args.format)
    stream = _open_input(args.file)
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
                _reject(counts, rejects, item)
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


def _reject(counts: Counts, rejects: RejectsWriter | None, item: Rejected) -> None:
    counts.rejected += 1
    if len(counts.shown) < SHOW_REJECTED:
        counts.shown.append(Rejected(item.line, item.error_class, item.reason, None))
    if rejects is not None:
        rejects.write(item)


async def _batches(items, size: int):
    batch: list[Good] = []
    async for item in items:
        batch.append(item)
        if len(batch) >= size:
            yield batch
            batch = []
    if batch:
        yield batch


async def _dry_run(args, counts, progress, rejects, notes) -> None:
    async for _ in _items(args, counts, progress, rejects, notes):
        counts.done += 1


def _security() -> dict:
    """aiokafka security settings from the worker's environment variables (KAFKA_SECURITY_PROTOCOL, ...)."""
    from worker import config as config_mod

    names = ("kafka_security_protocol", "kafka_sasl_mechanism", "kafka_sasl_username", "kafka_sasl_password",
             "kafka_ssl_cafile", "kafka_ssl_certfile", "kafka_ssl_keyfile")
    values = {n: os.environ[n.upper()] for n in names if os.environ.get(n.upper())}
    cfg = config_mod.Config(**values)
    if cfg.kafka_security_protocol not in ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"):
        raise ImportError_(f"KAFKA_SECURITY_PROTOCOL={cfg.kafka_security_protocol!r}: not a Kafka protocol")
    if cfg.kafka_security_protocol.startswith("SASL") and not (cfg.kafka_sasl_mechanism and cfg.kafka_sasl_username):
        raise ImportError_("KAFKA_SASL_MECHANISM and KAFKA_SASL_USERNAME are required with SASL")
    return config_mod.kafka_security(cfg)


async def _to_broker(args, counts, progress, rejects, notes, servers: str) -> None:
    from aiokafka import AIOKafkaProducer
    from aiokafka.errors import KafkaError

    producer = AIOKafkaProducer(
        bootstrap_servers=servers, enable_idempotence=False, acks="all", linger_ms=20,
        max_batch_size=1_048_576, request_timeout_ms=30_000, **_security(),
    )
    try:
        await producer.start()
    except (KafkaError, OSError) as exc:
        with contextlib.suppress(Exception):
            await producer.stop()
        raise _Failed(f"cannot connect to the broker at {servers}: {exc}") from None
    try:
        in_flight: list = []  # the previous batch's futures, awaited while the next batch is sent

        async def settle(futures: list) -> None:
            try:
                await asyncio.gather(*futures)
            except KafkaError as exc:
                raise _Failed(f"the broker refused a message: {exc!r}") from None
            counts.done += len(futures)

        async for batch in _batches(_items(args, counts, progress, rejects, notes), args.batch_size):
            futures = []
            for item in batch:
                try:
                    futures.append(await producer.send(args.topic, item.value, key=item.key))
                except KafkaError as exc:
                    raise _Failed(f"cannot send to {args.topic}: {exc!r}") from None
            await settle(in_flight)
            in_flight = futures
            progress.tick()
        await settle(in_flight)
    finally:
        with contextlib.suppress(Exception):
            await producer.stop()


async def _to_database(args, counts, progress, rejects, notes, url: str) -> None:
    import asyncpg

    from worker.engine import apply_batch
    from worker.store.migrate import MigrationError, check_schema
    from worker.store.postgres import PostgresStore

    try:
        store = await PostgresStore.connect(url, min_size=1, max_size=2, timeout=30)
    except (OSError, asyncpg.PostgresError, asyncpg.InterfaceError, TimeoutError) as exc:
        raise _Failed(f"cannot connect to PostgreSQL at {_redact(url)}: {exc}") from None
    try:
        try:
            await check_schema(store.pool)
        except MigrationError as exc:
            raise _Failed(str(exc)) from None

        async def apply(batch: list[Good]) -> None:
            try:
                result = await apply_batch(store, [g.message for g in batch])
            except (OSError, asyncpg.PostgresError, asyncpg.InterfaceError, TimeoutError) as exc:
                raise _Failed(f"PostgreSQL failed (this batch was rolled back; lines {batch[0].line} to "
                              f"{batch[-1].line}): {exc!r}") from None
            failed = dict(result.failed)
            for i, outcome in enumerate(result.outcomes):
                if outcome == "applied":
                    counts.applied += 1
                elif outcome == "duplicate":
                    counts.already += 1
                elif outcome == "unrated":
                    counts.unrated += 1
                else:
                    _reject(counts, rejects, Rejected(batch[i].line, "rating_error", failed.get(i, outcome),
                                                      _raw_of(batch[i])))
                    continue
                counts.done += 1

        pending: asyncio.Task | None = None
        try:
            async for batch in _batches(_items(args, counts, progress, rejects, notes), args.batch_size):
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


def _raw_of(good: Good) -> Any:
    """What --rejects writes for a line that failed in the rating code (rare): its data as JSON."""
    data = orjson.loads(good.value)["data"]
    return orjson.dumps(data) + b"\n"


def _summary(args, counts: Counts, elapsed: float, mode: str, out: IO[str]) -> None:
    rate = counts.read / elapsed if elapsed > 0 else 0.0
    w = out.write
    w(f"rating-worker import: {args.file}: {counts.read:,} lines read in {elapsed:.1f} s ({rate:,.0f} lines/s)\n")
    if mode == "dry-run":
        w(f"  valid     {counts.done:>12,}  (dry run: nothing was sent or written)\n")
    elif mode == "broker":
        w(f"  produced  {counts.done:>12,}  to topic {args.topic} (acknowledged by the broker; the worker applies "
          "them, skipping any imported before)\n")
    else:
        w(f"  applied   {counts.applied:>12,}  ratings replaced in PostgreSQL (rating.changed published later by "
          "a running worker's outbox relay)\n")
        w(f"  already   {counts.already:>12,}  imported before (the same source and id): skipped\n")
        if counts.unrated:
            w(f"  ignored   {counts.unrated:>12,}  accounts closed for fair play\n")
        if counts.done and not counts.applied:
            w("  nothing new: every line had been imported before\n")
    w(f"  rejected  {counts.rejected:>12,}\n")
    if counts.duplicates:
        w(f"  duplicate {counts.duplicates:>12,}  lines with the same data as an earlier line: skipped\n")
        for d in counts.shown_duplicates:
            w(f"    line {d.line}: the same as line {d.first}\n")
        if counts.duplicates > len(counts.shown_duplicates):
            w(f"    ... and {counts.duplicates - len(counts.shown_duplicates):,} more\n")
    if counts.rejected:
        w("rejected lines:\n")
        for r in counts.shown:
            w(f"  line {r.line}: {r.error_class}: {r.reason}\n")
        more = counts.rejected - len(counts.shown)
        if more > 0:
            where = f"all of them are in {args.rejects}" if args.rejects else "use --rejects FILE to write them all"
            w(f"  ... and {more:,} more ({where})\n")
        elif args.rejects:
            w(f"  (written to {args.rejects})\n")


async def _run(args, counts: Counts, progress: Progress, rejects, mode: str, target: str) -> None:
    notes = sys.stderr
    if mode == "dry-run":
        await _dry_run(args, counts, progress, rejects, notes)
    elif mode == "broker":
        await _to_broker(args, counts, progress, rejects, notes, target)
    else:
        await _to_database(args, counts, progress, rejects, notes, target)


def main(args: argparse.Namespace) -> int:
    """The command: an exit code (0 all lines good, 1 some rejected, 2 usage, 3 broker/database failure)."""
    err = sys.stderr
    rejects: RejectsWriter | None = None
    try:
        if args.batch_size < 1:
            raise ImportError_(f"--batch-size {args.batch_size}: must be at least 1")
        if not 1 <= len(args.source) <= 256 or "\x00" in args.source:
            raise ImportError_("--source: 1 to 256 characters (a CloudEvents source, e.g. /rating-worker/import)")
        if args.imported_at is not None:
            try:
                parse_time(args.imported_at)
            except ValueError as exc:
                raise ImportError_(f"--imported-at {args.imported_at!r}: {exc}") from None
        fmt = detect_format(args.file, args.format)
        if args.file != "-" and not os.path.isfile(args.file):
            raise ImportError_(f"cannot read {args.file!r}: no such file")
        if args.dry_run:
            mode, target = "dry-run", ""
        elif args.database_url is not None:
            mode, target = "database", args.database_url or os.environ.get("DATABASE_URL", "")
            if not target:
                raise ImportError_("--database-url without a URL reads DATABASE_URL, which is not set")
            if urlsplit(target).scheme not in ("postgres", "postgresql"):
                raise ImportError_(f"--database-url must start with postgresql:// (got {target.split(':')[0]!r})")
        else:
            mode = "broker"
            target = args.bootstrap_servers or os.environ.get("KAFKA_BOOTSTRAP_SERVERS", "")
            if not target:
                raise ImportError_("no broker: give --bootstrap-servers or set KAFKA_BOOTSTRAP_SERVERS "
                                   "(or --database-url to write to PostgreSQL directly, or --dry-run)")
            for server in target.split(","):
                host, _, port = server.strip().rpartition(":")
                if not host or not port.isdigit():
                    raise ImportError_(f"--bootstrap-servers: {server!r} is not host:port")
            _security()
            inputs = os.environ.get("KAFKA_INPUT_TOPICS")
            if inputs and args.topic not in [t.strip() for t in inputs.split(",")]:
                err.write(f"rating-worker import: note: topic {args.topic} is not in KAFKA_INPUT_TOPICS ({inputs}): "
                          "a worker with these settings will not read it\n")
        if args.rejects:
            rejects = RejectsWriter(args.rejects, fmt)
    except (ImportError_, OSError) as exc:
        err.write(f"rating-worker import: {exc}\n")
        return EXIT_USAGE

    counts = Counts()
    progress = Progress(counts, err, args.quiet)
    where = {"dry-run": "dry run (checking only)", "broker": f"to topic {args.topic} at {target}",
             "database": f"into PostgreSQL {_redact(target)}"}[mode]
    if not args.quiet:
        err.write(f"rating-worker import: {args.file} ({fmt}) {where}\n")
    code = EXIT_OK
    try:
        asyncio.run(_run(args, counts, progress, rejects, mode, target))
    except ImportError_ as exc:
        progress.end()
        err.write(f"rating-worker import: {exc}\n")
        return EXIT_USAGE
    except _Failed as exc:
        progress.end()
        err.write(f"rating-worker import: failed: {exc}\n"
                  f"rating-worker import: {counts.done:,} lines were imported before the failure; running the "
                  "same command again is safe (lines imported before are skipped)\n")
        code = EXIT_FAILED
    except KeyboardInterrupt:
        progress.end()
        err.write(f"rating-worker import: interrupted after {counts.done:,} imported lines; running the same "
                  "command again is safe (lines imported before are skipped)\n")
        code = 130
    finally:
        if rejects is not None:
            rejects.close()
    progress.end()
    try:
        _summary(args, counts, progress.elapsed(), mode, sys.stdout)
        sys.stdout.flush()
    except BrokenPipeError:  # `... | head`: the import itself is done; keep its exit status
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    if code != EXIT_OK:
        return code
    return EXIT_REJECTED if counts.rejected else EXIT_OK


DESCRIPTION = """\
Import existing ratings (an official FIDE or US Chess rating, the CSR of an older system, a correction
by an operator) as rating.imported messages: each line replaces the worker's state of one
(player_id, system, category), counts as a change (next version, a rating.changed with cause
rating.imported) and is applied in order with everything else. What a line leaves out takes the
system's start values.

Input: CSV with a header row, or JSON lines (one data object per line), told apart by the file name
(.csv; .jsonl, .ndjson, .json; optionally .gz) or --format ('-' reads stdin and needs --format). The
columns/fields are the rating.imported data fields:
  player_id, system, category, rating (required), rd, volatility, games, wins, draws, losses, events,
  peak, birth_year, last_played_at, imported_at (required, or --imported-at)
An empty cell (or a JSON null) is absent; cells are trimmed; other columns/fields are ignored (named
once on stderr). Which fields each system holds: the worker's schemas/rating.imported.json; a
field the system cannot hold (an RD for FIDE, a FIDE rating under 1400) makes the line bad.

Every line is checked by the worker's own decoder before anything is sent; a bad line is rejected with
its line number and reason (in the summary, and all of them in --rejects FILE) and the good lines are
imported. Use --dry-run first to check a whole file.

Ids: each message's id is derived from the line's data (source /rating-worker/import or --source), so
running the same file again, or a file that overlaps an earlier one, applies nothing twice; the
summary of a --database-url run says how many lines had been imported before. To import the same
values again on purpose, change imported_at (or --source). Lines of one file with the same data are
imported once.

Where to:
  default         produce to --topic (default ratings.imported, one of the worker's input topics),
                  keyed by player_id, at --bootstrap-servers / KAFKA_BOOTSTRAP_SERVERS (with the
                  worker's KAFKA_SECURITY_PROTOCOL / KAFKA_SASL_* / KAFKA_SSL_* settings). The running
                  worker applies and publishes them (the lines were checked here with the worker's
                  decoder, so none should be dead-lettered).
  --database-url  apply directly to PostgreSQL, --batch-size lines per transaction, through the
                  worker's engine: states, history, processed ids and the outbox, as the worker
                  writes them. The rating.changed messages are NOT published by this command: they
                  wait in the outbox and the outbox relay of a running worker publishes them (at its
                  start, then every RELAY_INTERVAL_S for rows older than RELAY_MIN_AGE_S). Meant for
                  a stopped worker (faster than the topic for a first bulk load); safe next to a
                  running one (the same row locks and dedupe), but then an import and a game of the
                  same player are applied in whichever order they commit.
  --dry-run       check only: nothing is sent or written.

Exit status: 0 every line was imported (or was a duplicate); 1 some lines were rejected (the others
were imported); 2 usage or configuration error, nothing imported; 3 the broker or the database failed
(what was acknowledged/committed stays; running the same command again is safe).

Examples:
  rating-worker import fide-2026-11.csv --dry-run
  rating-worker import fide-2026-11.csv --bootstrap-servers kafka-1:9092
  rating-worker import legacy-csr.jsonl.gz --database-url postgresql://rating@db/ratings --rejects bad.jsonl
  export-ratings | rating-worker import - --format jsonl --imported-at 2026-11-01T00:00:00Z

  player_id,system,category,rating,rd,volatility,games,peak,birth_year,imported_at
  p1,fide,standard,2012,,,57,2080,2009,2026-11-01T00:00:00Z
  anna,csr,blitz,1712.4,85,0.059,140,1750,,2026-11-01T00:00:00Z
"""


def add_parser(sub) -> None:
    p = sub.add_parser(
        "import", help="import existing ratings from a CSV or JSON lines file (rating.imported)",
        description=DESCRIPTION, formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("file", help="CSV or JSON lines file ('-' for stdin, with --format)")
    p.add_argument("--format", choices=("csv", "jsonl"), help="the input format (default: from the file name)")
    p.add_argument("--source", default=DEFAULT_SOURCE,
                   help=f"the CloudEvents source of the messages (default {DEFAULT_SOURCE}); part of their identity")
    p.add_argument("--imported-at", metavar="TIME",
                   help="imported_at for lines that have none (RFC 3339, e.g. 2026-11-01T00:00:00Z)")
    p.add_argument("--topic", default=DEFAULT_TOPIC, help=f"the topic to produce to (default {DEFAULT_TOPIC})")
    p.add_argument("--bootstrap-servers", metavar="HOST:PORT[,...]",
                   help="Kafka bootstrap servers [env KAFKA_BOOTSTRAP_SERVERS]")
    p.add_argument("--database-url", nargs="?", const="", metavar="URL",
                   help="apply directly to this PostgreSQL instead of producing (alone: the URL in DATABASE_URL)")
    p.add_argument("--batch-size", type=int, default=DEFAULT_BATCH,
                   help=f"lines per PostgreSQL transaction, or per producer flush (default {DEFAULT_BATCH})")
    p.add_argument("--dry-run", action="store_true", help="check every line, import nothing")
    p.add_argument("--rejects", metavar="FILE",
                   help="write the rejected lines there, with their line number and reason (CSV in, CSV out)")
    p.add_argument("--quiet", "-q", action="store_true", help="no progress line, only the summary")
    p.set_defaults(func=main)
