"""`rating-worker message SOURCE ID`: what became of one message, for support's "why did my rating not
change?": applied (the changes it caused), unrated and why (for whom), delivered again and ignored,
dead-lettered (with the reason), or never seen."""

from __future__ import annotations

import argparse
from typing import Any

import orjson

from worker import config as config_mod
from worker.commands.operator import UsageError, add_common, command, connect, emit
from worker.contract import deadletter
from worker.contract.binding import binary_attributes
from worker.ratings.reasons import explain
from worker.store.reads import OperatorReads
from worker.terminal.table import cell, table, terminal_width


async def message(args: argparse.Namespace) -> int:
    conn = await connect(args)
    try:
        reads = OperatorReads(conn)
        row = await reads.message_processed(args.source, args.id)
        changes, left_out = [], []
        if row is not None:
            changes = await reads.message_changes(args.source, args.id, row["ref"], row["type"])
            left_out = await reads.message_unrated(args.source, args.id)
    finally:
        await conn.close()
    if row is not None:
        obj = _processed(args, row, [dict(c) for c in changes], [dict(x) for x in left_out])
        emit(args.json, obj, _processed_text(obj))
        return 0
    letters = await _dead_letters_of(args)
    if letters is None:
        obj = {"source": args.source, "id": args.id, "status": "not_processed", "dead_letters": None}
        text = (f"{args.source} {args.id}: not processed (never seen, not consumed yet, or its id expired: "
                "DEDUPE_WINDOW_DAYS); the dead-letter topic "
                "was not searched: give --bootstrap-servers or KAFKA_BOOTSTRAP_SERVERS")
    elif letters:
        obj = {"source": args.source, "id": args.id, "status": "dead_lettered", "dead_letters": letters}
        text = f"{args.source} {args.id}: dead-lettered (a bad message changes nothing; its id stays unused)\n" + table(
            ["partition:offset", "class", "reason"],
            [[f"{x['partition']}:{x['offset']}", x["error_class"], x["error_message"]] for x in letters],
            terminal_width())
    else:
        obj = {"source": args.source, "id": args.id, "status": "never_seen", "dead_letters": []}
        text = (f"{args.source} {args.id}: never seen: not processed, and not in the dead-letter topic "
                "(or not consumed yet, or processed longer ago than the workers keep ids: DEDUPE_WINDOW_DAYS)")
    emit(args.json, obj, text)
    return 0 if obj["status"] == "dead_lettered" else 1


def _processed(args: argparse.Namespace, row, changes: list[dict], left_out: list[dict]) -> dict[str, Any]:
    status = row["outcome"]  # applied | unrated
    return {
        "source": args.source, "id": args.id, "type": row["type"], "status": status, "ref": row["ref"],
        "reason": row["reason"], "explained": explain(row["reason"]) or None,
        "processed_at": row["processed_at"], "duplicates": row["duplicates"],
        "changes": changes,
        "unchanged": [{**x, "explained": explain(x["reason"])} for x in left_out],
    }


def _processed_text(obj: dict[str, Any]) -> str:
    head = f"{obj['source']} {obj['id']} ({obj['type']}{', ' + obj['ref'] if obj['ref'] else ''}): {obj['status']}"
    if obj["reason"]:
        head += f": {obj['reason']} ({obj['explained']})"
    lines = [head, f"processed at {cell(obj['processed_at'])}"]
    if obj["duplicates"]:
        lines.append(f"delivered {obj['duplicates']} more time(s) and ignored: nothing is applied twice")
    if obj["changes"]:
        lines += ["", f"{len(obj['changes'])} rating change(s)", table(
            ["player", "system", "category", "version", "before", "after", "delta"],
            [[c["player_id"], c["system"], c["category"], c["version"], c["before_rating"], c["rating"],
              None if c["delta"] is None else f"{c['delta']:+.1f}"] for c in obj["changes"]], terminal_width())]
    if obj["unchanged"]:
        lines += ["", f"{len(obj['unchanged'])} player(s) left unchanged", table(
            ["player", "system", "why"],
            [[x["player_id"], x["system"], f"{x['reason']}: {x['explained']}"] for x in obj["unchanged"]],
            terminal_width())]
    return "\n".join(lines)


def identity_of(letter: deadletter.Letter) -> tuple[str | None, str | None]:
    """The CloudEvents source and id of a dead letter, when it has them, in either content mode as the
    worker reads them (worker.contract.binding): binary mode in its ce_* headers, structured in the value."""
    try:
        attributes = binary_attributes(letter.headers)
    except ValueError:
        return None, None
    if attributes is not None:
        return attributes.get("source"), attributes.get("id")
    try:
        event = orjson.loads(letter.value or b"")
    except orjson.JSONDecodeError:
        return None, None
    if not isinstance(event, dict):
        return None, None
    return event.get("source"), event.get("id")


async def _dead_letters_of(args: argparse.Namespace) -> list[dict] | None:
    """The dead letters of this (source, id), or None when no broker is configured."""
    try:
        cfg = config_mod.load_for_tool(args)
        if not cfg.kafka_bootstrap_servers:
            return None
        config_mod.load_for_tool(args, kafka=True)  # the broker settings checked, as `dlq` checks them
    except config_mod.ConfigError as exc:
        raise UsageError(str(exc)) from None
    from worker.commands.dlq import read_dead_letters

    try:
        records = await read_dead_letters(cfg, args.idle)
    except UsageError:  # no dead-letter topic yet: nothing was ever dead-lettered
        return []
    found = []
    for record in records:
        letter = deadletter.read(record)
        if identity_of(letter) == (args.source, args.id):
            found.append({"partition": letter.partition, "offset": letter.offset, "error_class": letter.error_class,
                          "error_message": letter.error_message})
    return found


def add_parser(sub) -> None:
    p = sub.add_parser("message", help="what became of one message (applied, unrated and why, dead-lettered)",
                       description=(
        "What became of the message with this CloudEvents source and id: applied (with the rating changes it "
        "caused), unrated and why (for each of its players), delivered again and ignored (counted), "
        "dead-lettered (with the reason: the dead-letter topic is searched when a broker is configured), or "
        "never seen. Exit status 0 when it was processed or dead-lettered, 1 when it was never seen. "
        "Example: rating-worker message /game-server/eu-1 g-81723-end"))
    p.add_argument("source", help="the message's CloudEvents source")
    p.add_argument("id", help="the message's CloudEvents id")
    p.add_argument("--bootstrap-servers", dest="kafka_bootstrap_servers",
                   help="Kafka bootstrap servers, to search the dead-letter topic [env KAFKA_BOOTSTRAP_SERVERS]")
    p.add_argument("--topic", dest="kafka_dlq_topic", help="dead-letter topic [env KAFKA_DLQ_TOPIC, default ratings.dlq]")
    p.add_argument("--idle", type=float, default=2.0,
                   help="seconds without new dead letters that end the search (default 2)")
    add_common(p)
    p.set_defaults(func=command(message))
