"""Encoding of `rating.changed` (CONTRACT.md "Output"): one CloudEvent per changed rating."""

from __future__ import annotations

import uuid

import orjson

from worker.ratings.inputs import Message
from worker.ratings.state import RatingChange, RatingState
from worker.store.base import ChangeRecord

SOURCE = "/rating-worker"
# A fixed namespace: the same cause and rating always give the same id, so consumers can drop
# re-published duplicates (the relay may publish a row twice after a crash).
_NAMESPACE = uuid.UUID("6f1c7a52-6a3e-4d0e-9a59-2f1f3c0b8e11")


def change_id(cause_source: str, cause_id: str, player_id: str, system: str, category: str) -> str:
    return str(uuid.uuid5(_NAMESPACE, "\x1f".join((cause_source, cause_id, player_id, system, category))))


def _values(state: RatingState) -> dict:
    return {"rating": state.rating, "rd": state.rd, "volatility": state.volatility}


def change_record(message: Message, change: RatingChange, cause_at: float) -> ChangeRecord:
    key = change.key
    event_id = change_id(message.source, message.id, key.player_id, key.system, key.category)
    data = {
        "player_id": key.player_id,
        "system": key.system,
        "category": key.category,
        "before": _values(change.before),
        "after": _values(change.after),
        "delta": change.delta,
        "provisional": change.provisional,
        "floor": change.floor,
        "games": change.after.games,
        "version": change.after.version,
        "cause": {"type": message.type, "source": message.source, "id": message.id, "ref": message.ref},
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
    return ChangeRecord(
        event_id=event_id,
        key=key,
        version=change.after.version,
        rating=change.after.rating,
        delta=change.delta,
        cause_type=message.type,
        cause_source=message.source,
        cause_id=message.id,
        cause_ref=message.ref,
        changed_at=cause_at,
        payload=orjson.dumps(envelope),
    )
