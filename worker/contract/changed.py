"""`rating.changed`, the worker's output (docs/contract.md#ratingchanged-the-output): one CloudEvent per changed rating.

`ChangeRecord` is one change as the history, the outbox and the publisher hold it; `change_record`
builds it (and its bytes, encoded once) from a message's change; `encode_change` rebuilds the same bytes
from the stored columns (the outbox relay); `validate_output` checks one event against the schemas.
"""

from __future__ import annotations

import hashlib
import uuid
from collections.abc import Callable
from typing import NamedTuple

import orjson

from worker.contract.decode import OUTPUT_TYPE
from worker.contract.payloads import time_of
from worker.contract.reasons import BadMessage, schema_reason, show
from worker.contract.schemas import SchemaError, compile_schema
from worker.ratings.inputs import Message
from worker.ratings.state import RatingChange, RatingState, StateKey


class ChangeRecord(NamedTuple):
    """One row of history (with an outbox row until published): a `rating.changed` ready to publish."""

    event_id: str  # the rating.changed CloudEvent id: stable for the same cause and rating
    key: StateKey
    version: int
    rating: float | None
    delta: float
    cause_type: str
    cause_source: str
    cause_id: str
    cause_ref: str | None
    changed_at: float  # epoch seconds of the cause
    payload: bytes  # the encoded CloudEvent (orjson), published as is; rebuilt from the rest by
    #                 encode_change
    before: tuple[float | None, float | None, float | None] = (None, None, None)  # shown rating, rd, volatility
    after: tuple[float | None, float | None, float | None] = (None, None, None)
    provisional: bool = False
    floor: float | None = None
    games: int = 0
    time: str = ""  # the cause's time as the message gave it (`changed_at` in rating.changed)
    inactive: bool | None = None  # FIDE: marked inactive at a list; None: a system without the mark
    parameters: str | None = None  # the parameter set that rated it ("csr-1"); None: a row from before sets


SOURCE = "/rating-worker"
# A fixed namespace: the same cause and rating always give the same id, so consumers can drop
# re-published duplicates (the relay may publish a row twice after a crash).
NAMESPACE = uuid.UUID("6f1c7a52-6a3e-4d0e-9a59-2f1f3c0b8e11")
_NAMESPACE_BYTES = NAMESPACE.bytes


def change_id(cause_source: str, cause_id: str, player_id: str, system: str, category: str, version: int) -> str:
    """uuid5(NAMESPACE, the cause, the rating and its version), computed directly (uuid.uuid5 costs 9 us; this 2).

    The version is part of it because one message may change one rating twice (a FIDE event first
    closes the player's previous rating period, then rates the event).
    """
    name = "\x1f".join((cause_source, cause_id, player_id, system, category, str(version))).encode()
    digest = bytearray(hashlib.sha1(_NAMESPACE_BYTES + name).digest()[:16])
    digest[6] = (digest[6] & 0x0F) | 0x50  # version 5
    digest[8] = (digest[8] & 0x3F) | 0x80  # RFC 4122 variant
    h = digest.hex()
    return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"


def _rating(state: RatingState) -> float:
    return state.rating


def _no_mark(state: RatingState) -> None:
    return None


def change_record(
    message: Message, change: RatingChange, cause_at: float,
    shown_rating: Callable[[RatingState], float | None] = _rating, starts_unrated: bool = False,
    inactive: Callable[[RatingState], bool | None] = _no_mark, parameters: str | None = None,
) -> ChangeRecord:
    """The history/outbox row of one change; its cause is the message.

    `shown_rating` is the rating published (the system's: None for a FIDE rating that is not listed);
    in a system that `starts_unrated` (FIDE, US Chess), the first change of a rating had none before it.
    The row's `delta` is the difference of the stored ratings (the fair-play refunds add them up); the
    published `delta` is null when either published rating is (docs/rules.md#common-to-all-systems). `inactive` is the
    system's activity mark of a state (FIDE's), None where it has none; `parameters` the name of the parameter
    set that rated it (worker.ratings.parameters).
    """
    key = change.key
    after = change.after
    before = change.before
    event_id = change_id(message.source, message.id, key.player_id, key.system, key.category, after.version)
    shown_before = (None if starts_unrated and before.version == 0 else shown_rating(before), before.rd,
                    before.volatility)
    shown_after = (shown_rating(after), after.rd, after.volatility)
    delta = after.rating - before.rating
    mark = inactive(after)
    payload = _encode(event_id, key, after.version, delta, message.type, message.source, message.id, message.ref,
                      shown_before, shown_after, change.provisional, change.floor, after.games, message.time, mark,
                      parameters)
    return ChangeRecord(
        event_id, key, after.version, after.rating, delta, message.type, message.source, message.id, message.ref,
        cause_at, payload, shown_before, shown_after, change.provisional, change.floor, after.games, message.time,
        mark, parameters,
    )


def encode_change(r: ChangeRecord) -> bytes:
    """The `rating.changed` CloudEvent of a history row, from its columns alone.

    The database keeps the columns, not these bytes (they were two thirds of the history's WAL): the
    outbox relay rebuilds the payload of a row left unpublished with this same function, so a change
    published twice is published as the same bytes.
    """
    return _encode(r.event_id, r.key, r.version, r.delta, r.cause_type, r.cause_source, r.cause_id, r.cause_ref,
                   r.before, r.after, r.provisional, r.floor, r.games, r.time, r.inactive, r.parameters)


def _encode(event_id, key, version, delta, cause_type, cause_source, cause_id, cause_ref, before, after,
            provisional, floor, games, time, inactive=None, parameters=None) -> bytes:
    # Positional on purpose: built twice per rated game, where a record's _replace costs ~10 us.
    if before[0] is None or after[0] is None:
        delta = None
    data = {
        "player_id": key.player_id,
        "system": key.system,
        "category": key.category,
        "before": {"rating": before[0], "rd": before[1], "volatility": before[2]},
        "after": {"rating": after[0], "rd": after[1], "volatility": after[2]},
        "delta": delta,
        "provisional": provisional,
        "floor": floor,
        "games": games,
        "version": version,
        "cause": {"type": cause_type, "source": cause_source, "id": cause_id, "ref": cause_ref},
        "changed_at": time,
    }
    if inactive is not None:
        data["inactive"] = inactive
    if parameters is not None:  # absent from the rows published before parameter sets (their bytes stay)
        data["parameters"] = parameters
    encoded = orjson.dumps({
        "specversion": "1.0",
        "id": event_id,
        "source": SOURCE,
        "type": "rating.changed",
        "subject": key.player_id,
        "time": time,
        "datacontenttype": "application/json",
        "data": data,
    })
    # Copied to its exact size: orjson's bytes keep the buffer they were written into, 4 or 8 KiB (orjson
    # 3.13, tracemalloc: 8,154 bytes held for a 611-byte event), and a record keeps its bytes from the plan
    # to the publication. The worker's largest RSS went from 381-430 MiB to 172-177 (5,000-game batches,
    # 20,000 players, six runs each), its speed the same to +6% in pairs run in turns (docs/performance.md,
    # "What made the difference"); the copy costs ~0.3 us.
    return bytes(memoryview(encoded))


_ENVELOPE = compile_schema("envelope")
_OUTPUT = compile_schema(OUTPUT_TYPE)


def validate_output(event: dict) -> None:
    """Check one outgoing rating.changed CloudEvent (envelope + data, subject = player_id).

    For tests and tools: raises BadMessage (invalid_envelope / unknown_type / invalid_data / invalid_rule).
    """
    try:
        _ENVELOPE(event)
    except SchemaError as exc:
        raise BadMessage("invalid_envelope", schema_reason(exc, "")) from None
    if event["type"] != OUTPUT_TYPE:
        raise BadMessage("unknown_type", f"type: must be 'rating.changed' (got {show(event['type'])})")
    try:
        _OUTPUT(event["data"])
    except SchemaError as exc:
        raise BadMessage("invalid_data", schema_reason(exc, "data")) from None
    if event.get("subject") != event["data"]["player_id"]:
        raise BadMessage("invalid_rule", "subject: must be the data.player_id")
    time_of(event["data"]["changed_at"], "data.changed_at")

