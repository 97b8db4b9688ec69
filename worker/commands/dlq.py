"""`rating-worker dlq` and `dlq replay`: the dead letters listed, and re-submitted after a fix exactly as
they came (worker.contract.deadletter: value, key and the record's own headers, byte for byte)."""

from __future__ import annotations

import argparse
import base64
import sys
import time

from worker import config as config_mod
from worker.commands.operator import UsageError, add_common, command, emit, kafka_settings
from worker.contract import deadletter
from worker.terminal.table import table, terminal_width


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
    cfg = kafka_settings(args)
    if args.action == "replay" and not (args.offset or args.error_class or args.all):
        raise UsageError("choose what to re-submit: --offset P:O (repeatable), --error-class CLASS or --all")
    letters = _chosen([deadletter.read(r) for r in await read_dead_letters(cfg, args.idle)], args)
    if args.action == "list":
        text = f"{len(letters)} dead letter(s) in {cfg.kafka_dlq_topic}\n" + table(
            ["partition:offset", "class", "reason", "from"],
            [[f"{x.partition}:{x.offset}", x.error_class, _short(_reason(x), 70),
              f"{x.source_topic}[{x.source_partition}]@{x.source_offset}"] for x in letters], terminal_width())
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


def add_parser(sub) -> None:
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
    add_common(p, kafka=True)
    p.set_defaults(func=command(dlq))
