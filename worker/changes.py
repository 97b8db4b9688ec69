"""Encoding of `rating.changed` (CONTRACT.md "Output"): one CloudEvent per changed rating."""

from __future__ import annotations

import hashlib
import uuid
from collections.abc import Callable

import orjson

from worker.ratings.inputs import Message
from worker.ratings.state import RatingChange, RatingState
from worker.store.base import ChangeRecord

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


def change_record(
    message: Message, change: RatingChange, cause_at: float, cause: dict | None = None,
    shown_rating: Callable[[RatingState], float | None] = _rating,
) -> ChangeRecord:
    """The history/outbox row of one change; `cause` may be passed in when a message has several changes.

    `shown_rating` is the rating published (the system's: None for a FIDE rating that is not listed);
    `delta` is always the difference of the stored ratings.
    """
    key = change.key
    after = change.after
    event_id = change_id(message.source, message.id, key.player_id, key.system, key.category, after.version)
    if cause is None:
        cause = message_cause(message)
    before = change.before
    data = {
        "player_id": key.player_id,
        "system": key.system,
        "category": key.category,
        "before": {"rating": shown_rating(before), "rd": before.rd, "volatility": before.volatility},
        "after": {"rating": shown_rating(after), "rd": after.rd, "volatility": after.volatility},
        "delta": after.rating - before.rating,
        "provisional": change.provisional,
        "floor": change.floor,
        "games": after.games,
        "version": after.version,
        "cause": cause,
        "changed_at": message.time,
    }
    envelope = {
        "specversion": "1.0",
        "id": event_id,
        "source": SOURCE,
        "type": "rating.changed",
        "subject": key.player_id,
        "time": message.time,
        "datacontenttype": "application/json",
        "data": data,
    }
    return ChangeRecord(event_id, key, after.version, after.rating, data["delta"], message.type, message.source,
                        message.id, message.ref, cause_at, orjson.dumps(envelope))


def message_cause(message: Message) -> dict:
    return {"type": message.type, "source": message.source, "id": message.id, "ref": message.ref}
