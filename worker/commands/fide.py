"""`rating-worker fide close-period YYYY-MM`: publish a FIDE rating list, as the platform's scheduler would,
by producing its `rating.period_closed` message (docs/contract.md#ratingperiod_closed-a-fide-list-is-published) to an input topic."""

from __future__ import annotations

import argparse
import calendar
import re
from datetime import UTC, datetime

import orjson

from worker.commands.operator import UsageError, command, emit, kafka_settings
from worker.contract.decode import decode
from worker.contract.reasons import BadMessage

DEFAULT_SOURCE = "/rating-worker/fide"
DEFAULT_TOPIC = "events.finished"  # one of the worker's default input topics (worker.config)
_LIST = re.compile(r"^[0-9]{4}-(0[1-9]|1[0-2])$")


def period_closed_event(list_month: str, closed_at: str, source: str = DEFAULT_SOURCE) -> bytes:
    """The CloudEvent of one list's publication. Its id is the list's own ('fide-list-2026-12'): sending
    it twice applies it once, whoever sends it."""
    return orjson.dumps({
        "specversion": "1.0", "id": f"fide-list-{list_month}", "source": source, "type": "rating.period_closed",
        "time": closed_at, "datacontenttype": "application/json",
        "data": {"system": "fide", "list": list_month, "closed_at": closed_at},
    })


def _closed_at(args: argparse.Namespace) -> str:
    if args.closed_at:
        return args.closed_at
    return f"{args.list}-01T00:00:00Z"  # the list's own date


async def close_period(args: argparse.Namespace) -> int:
    if not _LIST.match(args.list):
        raise UsageError(f"{args.list!r} is not a list month: give YYYY-MM, e.g. 2026-12")
    value = period_closed_event(args.list, _closed_at(args), args.source)
    try:
        message = decode(value)  # the worker's own decoder: what it would dead-letter is refused here
    except BadMessage as exc:
        raise UsageError(f"{exc.error_class}: {exc.reason}") from None
    if args.dry_run:
        emit(args.json, orjson.loads(value), value.decode())
        return 0
    cfg = kafka_settings(args)
    from worker.kafka_clients import producer as make_producer

    producer = make_producer(cfg)
    await producer.start()
    try:
        meta = await producer.send_and_wait(args.topic, value=value, key=b"fide")
    finally:
        await producer.stop()
    list_date = datetime(int(args.list[:4]), int(args.list[5:7]), 1, tzinfo=UTC)
    emit(args.json, {"topic": meta.topic, "partition": meta.partition, "offset": meta.offset,
                     "source": message.source, "id": message.id},
         f"sent the FIDE {calendar.month_name[list_date.month]} {list_date.year} list ({message.source} "
         f"{message.id}) to {meta.topic}[{meta.partition}]@{meta.offset}: the workers close every open period up "
         f"to it, in chunks (their log says 'sweep applied'); `rating-worker message {message.source} "
         f"{message.id}` tells when it is done")
    return 0


def add_parser(sub) -> None:
    p = sub.add_parser("fide", help="FIDE's monthly list: close-period YYYY-MM", description=(
        "FIDE's rating lists. `fide close-period YYYY-MM` publishes the list of that month as the platform's "
        "scheduler would: it produces rating.period_closed to an input topic, and the workers then close every "
        "open FIDE rating period up to that list (each player's list rating published with its rating.changed), "
        "delist ratings under 1400 and mark inactive the players with no rated game in the 12 months before it. "
        "Its id is the list's own, so sending it twice applies it once. "
        "Example: rating-worker fide close-period 2026-12 --bootstrap-servers kafka-1:9092"))
    actions = p.add_subparsers(dest="action", required=True, metavar="ACTION")
    c = actions.add_parser("close-period", help="publish a FIDE list (rating.period_closed)",
                           description="Produce rating.period_closed for the FIDE list of YYYY-MM.")
    c.add_argument("list", metavar="YYYY-MM", help="the list's month (published on its 1st)")
    c.add_argument("--closed-at", help="the list's closing time, RFC 3339: any time, FIDE's closing date (3 days before the "
                        "list) included; no rule reads it (default: YYYY-MM-01T00:00:00Z)")
    c.add_argument("--source", default=DEFAULT_SOURCE, help=f"the CloudEvent's source (default {DEFAULT_SOURCE})")
    c.add_argument("--topic", default=DEFAULT_TOPIC,
                   help=f"the input topic it goes to (default {DEFAULT_TOPIC}; any topic the workers consume)")
    c.add_argument("--bootstrap-servers", dest="kafka_bootstrap_servers",
                   help="Kafka bootstrap servers [env KAFKA_BOOTSTRAP_SERVERS]")
    c.add_argument("--dry-run", action="store_true", help="print the message, send nothing")
    c.add_argument("--json", action="store_true", help="print JSON")
    c.set_defaults(func=command(close_period))
