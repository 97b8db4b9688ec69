"""The operator's commands: `player`, `leaderboard`, `dlq`, `outbox`.

Each reads PostgreSQL (or the dead-letter topic) and prints a table for people, or JSON with
`--json` for scripts. They only read, except `dlq replay`, which produces the chosen dead letters,
bytes unchanged, back to the topic they came from. The SQL is in store/sql/queries.sql.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import sys
import time
from datetime import datetime
from typing import Any

import orjson

from worker import config as config_mod
from worker.contract import deadletter
from worker.store.queries import QUERIES

# ---------------------------------------------------------------------------------------------
# Output


def _cell(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:.1f}"
    if isinstance(value, datetime):
        return value.strftime("%Y-%m-%d %H:%M:%S")
    return str(value)


def table(headers: list[str], rows: list[list[Any]]) -> str:
    """A plain text table: numbers to one decimal (rounding is for display; JSON keeps them whole)."""
    cells = [[_cell(v) for v in row] for row in rows]
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


async def _connect(args: argparse.Namespace):
    import asyncpg

    from worker.store.postgres import init_connection

    conn = await asyncpg.connect(_database_url(args))
    await init_connection(conn)
    return conn


def _run(coro_fn):
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


# ---------------------------------------------------------------------------------------------
# player, leaderboard, outbox: PostgreSQL


def _json_value(v: Any) -> Any:
    # jsonb fields come back decoded by the connection's codec; text from a jsonb -> is a str.
    return orjson.loads(v) if isinstance(v, str | bytes) else v


async def player(args: argparse.Namespace) -> int:
    conn = await _connect(args)
    try:
        account = await conn.fetchrow(QUERIES["player_account"], args.player_id)
        ratings = await conn.fetch(QUERIES["player_ratings"], args.player_id)
        history = []
        if args.history:
            history = await conn.fetch(QUERIES["player_history"], args.player_id, args.history, args.system,
                                       args.category)
    finally:
        await conn.close()
    if account is None and not ratings:
        print(f"rating-worker player: no player {args.player_id!r}", file=sys.stderr)
        return 1
    rows = [{
        "system": r["system"], "category": r["category"], "rating": r["rating"],
        "shown": _json_value(r["shown"]), "rd": r["rd"], "volatility": r["volatility"], "games": r["games"],
        "provisional": _json_value(r["provisional"]), "floor": _json_value(r["floor"]), "peak": r["peak"],
        "version": r["version"], "last_played_at": r["last_at"],
    } for r in ratings if args.system in (None, r["system"]) and args.category in (None, r["category"])]
    changes = [dict(h) for h in history]
    closed = None if account is None or account["closed_reason"] is None else {
        "reason": account["closed_reason"], "at": account["closed_at"]}
    obj = {"player_id": args.player_id, "closed": closed, "ratings": rows}
    if args.history:
        obj["history"] = changes
    lines = [f"player {args.player_id}" + (f"  (closed: {closed['reason']} at {_cell(closed['at'])})" if closed else "")]
    lines.append(table(
        ["system", "category", "rating", "rd", "games", "floor", "peak", "version", "last played"],
        [[r["system"], r["category"], _shown(r), r["rd"], r["games"], r["floor"], r["peak"], r["version"],
          r["last_played_at"]] for r in rows]))
    if args.history:
        lines += ["", f"latest {len(changes)} changes, newest first"]
        lines.append(table(
            ["changed at", "system", "category", "version", "rating", "delta", "cause", "ref"],
            [[c["changed_at"], c["system"], c["category"], c["version"], c["rating"], _signed(c["delta"]),
              c["cause_type"], c["cause_ref"] or c["cause_id"]] for c in changes]))
    emit(args.json, obj, "\n".join(lines))
    return 0


def _shown(r: dict) -> str:
    """The rating as published, with the provisional mark ("?") of its system."""
    shown = r["shown"] if r["version"] else r["rating"]
    return ("unlisted" if shown is None else f"{shown:.1f}") + ("?" if r["provisional"] else "")


def _signed(x: float) -> str:
    return f"{x:+.1f}"


def leaderboard_systems() -> list[str]:
    """The systems that have ratings of their own (the leaderboard view has a rule for each)."""
    from worker.ratings.registry import SYSTEMS

    return [s.name for s in SYSTEMS if s.categories]


async def leaderboard(args: argparse.Namespace) -> int:
    if args.top < 1:
        raise UsageError("--top must be at least 1")
    conn = await _connect(args)
    try:
        rows = await conn.fetch(QUERIES["leaderboard"], args.system, args.category, args.top)
    finally:
        await conn.close()
    entries = [{"rank": i, **dict(r)} for i, r in enumerate(rows, start=1)]
    text = f"{args.system} {args.category}: top {args.top} established ratings\n" + table(
        ["#", "player", "rating", "rd", "games"],
        [[e["rank"], e["player_id"], e["rating"], e["rd"], e["games"]] for e in entries])
    emit(args.json, {"system": args.system, "category": args.category, "entries": entries}, text)
    return 0


async def outbox(args: argparse.Namespace) -> int:
    conn = await _connect(args)
    try:
        row = await conn.fetchrow(QUERIES["outbox_oldest"])
    finally:
        await conn.close()
    oldest = None
    if row["event_id"] is not None:
        oldest = {k: row[k] for k in ("event_id", "player_id", "system", "category", "version", "changed_at")}
        oldest["queued_at"] = row["created_at"]
    text = f"outbox backlog: {row['backlog']} unpublished change(s)"
    if oldest:
        text += (f"\noldest: {oldest['player_id']} {oldest['system']}/{oldest['category']} v{oldest['version']}"
                 f" queued {_cell(oldest['queued_at'])} (event {oldest['event_id']})")
    emit(args.json, {"backlog": row["backlog"], "oldest": oldest}, text)
    return 0


# ---------------------------------------------------------------------------------------------
# dlq: the dead-letter topic


def _kafka(args: argparse.Namespace) -> config_mod.Config:
    try:
        return config_mod.load_for_tool(args, kafka=True)
    except config_mod.ConfigError as exc:
        raise UsageError(str(exc)) from None


async def read_dead_letters(cfg: config_mod.Config, idle_s: float) -> list:
    """Every record of the dead-letter topic, from the start, without joining a consumer group."""
    from aiokafka import TopicPartition

    from worker.kafka_clients import reader

    consumer = reader(cfg)
    await consumer.start()
    try:
        if cfg.kafka_dlq_topic not in await consumer.topics():  # also fetches the metadata
            raise UsageError(f"no topic {cfg.kafka_dlq_topic!r} on {cfg.kafka_bootstrap_servers}")
        partitions = consumer.partitions_for_topic(cfg.kafka_dlq_topic) or set()
        tps = [TopicPartition(cfg.kafka_dlq_topic, p) for p in sorted(partitions)]
        if not tps:
            return []
        consumer.assign(tps)
        await consumer.seek_to_beginning(*tps)
        records, quiet_since = [], time.monotonic()
        # Read until nothing has come for `idle_s` (the topic's end as far as a reader can tell).
        while time.monotonic() - quiet_since < idle_s:
            batch = await consumer.getmany(timeout_ms=200)
            for recs in batch.values():
                records.extend(recs)
                quiet_since = time.monotonic()
    finally:
        await consumer.stop()
    return sorted(records, key=lambda r: (r.partition, r.offset))


def _bytes_json(raw: bytes | None, name: str) -> dict:
    """Bytes for JSON output: as text when they are UTF-8, else base64 (`NAME_base64`)."""
    if raw is None:
        return {name: None}
    try:
        return {name: raw.decode("utf-8")}
    except UnicodeDecodeError:
        return {f"{name}_base64": base64.b64encode(raw).decode("ascii")}


def _listed(letter: deadletter.Letter, full: bool) -> dict:
    out = {
        "partition": letter.partition, "offset": letter.offset, "error_class": letter.error_class,
        "error_message": letter.error_message, "source_topic": letter.source_topic,
        "source_partition": letter.source_partition, "source_offset": letter.source_offset,
        **_bytes_json(letter.key, "key"),
        "headers": [{"name": k, **_bytes_json(v, "value")} for k, v in letter.headers],
        "omitted": letter.omitted,
    }
    if full:
        out.update(_bytes_json(letter.value, "value"))
    return out


def _chosen(letters: list[deadletter.Letter], args: argparse.Namespace) -> list[deadletter.Letter]:
    wanted = set()
    for ref in args.offset or ():
        p, sep, o = ref.partition(":")
        if not sep or not p.isdigit() or not o.isdigit():
            raise UsageError(f"--offset {ref!r}: expected PARTITION:OFFSET of the dead-letter topic")
        wanted.add((int(p), int(o)))
    out = []
    for letter in letters:
        if wanted and (letter.partition, letter.offset) not in wanted:
            continue
        if args.error_class and letter.error_class != args.error_class:
            continue
        out.append(letter)
    return out


async def dlq(args: argparse.Namespace) -> int:
    cfg = _kafka(args)
    if args.action == "replay" and not (args.offset or args.error_class or args.all):
        raise UsageError("choose what to re-submit: --offset P:O (repeatable), --error-class CLASS or --all")
    letters = _chosen([deadletter.read(r) for r in await read_dead_letters(cfg, args.idle)], args)
    if args.action == "list":
        text = f"{len(letters)} dead letter(s) in {cfg.kafka_dlq_topic}\n" + table(
            ["partition:offset", "class", "reason", "from"],
            [[f"{x.partition}:{x.offset}", x.error_class, _short(_reason(x), 70),
              f"{x.source_topic}[{x.source_partition}]@{x.source_offset}"] for x in letters])
        emit(args.json, [_listed(x, args.full) for x in letters], text)
        return 0
    return await _resubmit(cfg, letters, args)


def _reason(letter: deadletter.Letter) -> str:
    left_out = ", ".join(f"{part} ({size} bytes)" for part, size in letter.omitted.items())
    return (letter.error_message or "") + (f" [left out: {left_out}]" if left_out else "")


def _short(text: str | None, n: int) -> str:
    text = (text or "").replace("\n", " ")
    return text if len(text) <= n else text[: n - 1] + "…"


def _skip_reason(letter: deadletter.Letter) -> str | None:
    """Why a dead letter cannot be re-submitted as the record it was, if it cannot."""
    if not letter.source_topic:
        return "it has no source.topic header"
    if "value" in letter.omitted:
        return (f"its value ({letter.omitted['value']} bytes) was too large to keep: the original is "
                f"{letter.source_topic}[{letter.source_partition}]@{letter.source_offset}")
    if letter.value is None:
        return "it has no value (the record was a tombstone): there is nothing to rate"
    if "key" in letter.omitted or "headers" in letter.omitted:
        parts = " and ".join(p for p in ("key", "headers") if p in letter.omitted)
        return (f"its {parts} were too large to keep: the original is "
                f"{letter.source_topic}[{letter.source_partition}]@{letter.source_offset}")
    return None


async def _resubmit(cfg: config_mod.Config, letters: list[deadletter.Letter], args: argparse.Namespace) -> int:
    """Produce each chosen dead letter to the topic (and partition) it came from, exactly as it came:
    value, key and headers byte for byte (the error.* and source.* headers are the dead letter's, not
    the record's). A dead letter that is not the whole record is listed and skipped.

    The worker then decodes it again: with the fix deployed it is rated (or dead-lettered again,
    with the new reason). A message that was applied is never applied twice (its id is recorded).
    """
    from worker.kafka_clients import producer as make_producer

    sendable = []
    for x in letters:
        why = _skip_reason(x)
        if why is None:
            sendable.append(x)
        else:
            print(f"rating-worker dlq replay: skipping {x.partition}:{x.offset}: {why}", file=sys.stderr)
    if args.dry_run:
        for x in sendable:
            print(f"would re-submit {x.partition}:{x.offset} to {x.source_topic}[{x.source_partition}]")
        return 0
    producer = make_producer(cfg)
    await producer.start()
    sent = []
    try:
        for x in sendable:
            partitions = await producer.partitions_for(x.source_topic)
            partition = x.source_partition if x.source_partition in partitions else None
            meta = await producer.send_and_wait(x.source_topic, value=x.value, key=x.key, headers=x.headers,
                                                partition=partition)
            sent.append({"partition": x.partition, "offset": x.offset, "topic": x.source_topic,
                         "to_partition": meta.partition, "to_offset": meta.offset})
    finally:
        await producer.stop()
    skipped = len(letters) - len(sendable)
    emit(args.json, {"resubmitted": sent, "skipped": skipped},
         f"re-submitted {len(sent)} dead letter(s)" + (f", skipped {skipped}" if skipped else ""))
    return 0


# ---------------------------------------------------------------------------------------------
# Parsers


def _common(p: argparse.ArgumentParser, kafka: bool = False) -> None:
    if kafka:
        p.add_argument("--bootstrap-servers", dest="kafka_bootstrap_servers",
                       help="Kafka bootstrap servers [env KAFKA_BOOTSTRAP_SERVERS]")
        p.add_argument("--topic", dest="kafka_dlq_topic",
                       help="dead-letter topic [env KAFKA_DLQ_TOPIC, default ratings.dlq]")
    else:
        p.add_argument("--database-url", help="PostgreSQL URL [env DATABASE_URL]")
    p.add_argument("--json", action="store_true", help="print JSON instead of a table")


def add_parsers(sub) -> None:
    p = sub.add_parser("player", help="a player's ratings (and recent changes)", description=(
        "Every rating of a player: the rating as published (with '?' while provisional, 'unlisted' for a FIDE "
        "rating below the list), RD, games, floor, peak and version; --history N adds the N latest changes "
        "with their causes. Example: rating-worker player anna --history 10"))
    p.add_argument("player_id")
    p.add_argument("--history", type=int, default=0, metavar="N", help="also show the N latest changes")
    p.add_argument("--system", help="only this system (csr, tsr, fide, uscf, chesskite)")
    p.add_argument("--category", help="only this category (blitz, standard, ...)")
    _common(p)
    p.set_defaults(func=_run(player))

    p = sub.add_parser("leaderboard", help="the best established ratings of one system and category",
                       description=(
        "The top established ratings (CSR and TSR: RD <= 110; US Chess: more than 25 games; FIDE: listed), "
        "accounts closed for fair play left out. Example: rating-worker leaderboard csr blitz --top 20"))
    p.add_argument("system", help=f"one of {', '.join(leaderboard_systems())}")
    p.add_argument("category")
    p.add_argument("--top", type=int, default=10, help="how many (default 10)")
    _common(p)
    p.set_defaults(func=_run(leaderboard))

    p = sub.add_parser("outbox", help="rating changes not yet published", description=(
        "The outbox backlog (history rows whose rating.changed the broker has not acknowledged) and its oldest "
        "row. A backlog that stays, or an old oldest row, means publishing is stuck: see the worker's logs."))
    _common(p)
    p.set_defaults(func=_run(outbox))

    p = sub.add_parser("dlq", help="list dead letters, or re-submit them after a fix", description=(
        "`dlq` (or `dlq list`) lists the dead-letter topic with each record's error class, reason and origin. "
        "`dlq replay` produces chosen dead letters back to the topic and partition they came from, exactly as "
        "they came (value, key and the record's own headers, byte for byte), once the cause is fixed; a message "
        "already applied is never applied twice. A dead letter that is not the whole record (a tombstone, or "
        "parts left out for size) is listed and skipped. "
        "Examples: rating-worker dlq --json;  rating-worker dlq replay --error-class unsupported;  "
        "rating-worker dlq replay --offset 0:17 --offset 2:3"))
    p.add_argument("action", nargs="?", choices=("list", "replay"), default="list")
    p.add_argument("--offset", action="append", metavar="P:O", help="replay: this dead letter (repeatable)")
    p.add_argument("--error-class", help="only dead letters of this class (bad_json, schema, unsupported, ...)")
    p.add_argument("--all", action="store_true", help="replay: every dead letter listed")
    p.add_argument("--dry-run", action="store_true", help="replay: say what would be re-submitted, send nothing")
    p.add_argument("--full", action="store_true", help="list --json: include each record's value (text when it is "
                   "UTF-8, else value_base64)")
    p.add_argument("--idle", type=float, default=2.0, help="seconds without new records that end the read (default 2)")
    _common(p, kafka=True)
    p.set_defaults(func=_run(dlq))
