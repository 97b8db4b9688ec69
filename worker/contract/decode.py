"""Decode and validate input messages (docs/contract.md): a Kafka record value -> a typed `Message`.

    decode(value) -> Message        or raises BadMessage(error_class, reason)

Nothing else ever comes out of `decode`, whatever the bytes: no other exception, no hang (the work is
linear in the size of the record, which is at most `max_bytes`), and a `Message` it returns carries only
finite numbers within the ranges of the schemas.

The steps, in order, each with its own `error_class` (the `error.class` header of the dead letter):

    too_large         the record value is over the size limit (MAX_MESSAGE_BYTES, default 1 MiB)
    invalid_utf8      not UTF-8 (also: lone surrogates)
    invalid_json      not JSON (or no value at all: a tombstone), JSON nested deeper than 1,024 levels,
                      or a number too large for a 64-bit float (1e400)
    invalid_envelope  not a CloudEvents 1.0 envelope as in schemas/envelope.json, `time` not a real
                      date and time, or before 1970; U+0000 in `id` or `source`
    unknown_type      `type` is not one of the input types
    invalid_data      `data` breaks the JSON Schema of its type (schemas/<type>.json: types, ranges,
                      lengths, e.g. ids at most 128 characters), a time in it is not a real date and time
                      or is before 1970, or a string in it contains U+0000
    invalid_rule      a rule JSON Schema cannot express: a player meeting himself, a player listed
                      twice in an event, a game of an event between players it does not list, a time
                      in `data` more than a day after the envelope's `time`, a FIDE event's
                      started_at after its finished_at (a list's closed_at may be any time: docs/contract.md)

`reason` is one sentence that starts with the field it is about, e.g.
"data.result: must be one of '1-0', '0-1', '1/2-1/2' (got '2-0')"; it is short (under 400 characters),
on one line and valid UTF-8: it travels in a Kafka header.

Times. Every time the worker keeps (the envelope's `time`, finished_at, attempted_at, closed_at,
imported_at, last_played_at) must be from 1970-01-01T00:00:00Z (MIN_TIME) to the end of 9999 (what a
date can hold), and no time in `data` may be more than a day (MAX_AHEAD) after the envelope's own `time`.
The worker never looks at the wall clock (a replay must give the same output), so "far in the future"
can only mean: later than the message says it was sent. A day leaves room for skewed clocks between the
game server and the emitter; a cause long *before* its envelope time is fine (late delivery, backfills).

The schemas are compiled once, at import, with fastjsonschema (formats off: times are checked by the
schemas' regex and then parsed here). Times become epoch seconds (float, UTC) in the payload, and the
cause's time (finished_at, attempted_at, closed_at, imported_at) becomes `Message.time` as RFC 3339
UTC text, `2026-11-30T12:00:00Z`, with microseconds only when there are some.
"""


from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import orjson

from worker.contract.binding import binary_attributes
from worker.contract.fastcheck import envelope_surely_valid
from worker.contract.payloads import new_message
from worker.contract.reasons import BadMessage, field_name, schema_reason, show
from worker.contract.schemas import SchemaError, compile_schema
from worker.contract.times import MIN_TIME, MIN_TIME_TEXT, parse_normalized
from worker.contract.types import INPUT_TYPES, INPUTS, OUTPUT_TYPE
from worker.ratings.inputs import Message, RatingImported
from worker.ratings.registry import system_for
from worker.ratings.system import RatingSystem

__all__ = ["INPUT_TYPES", "MAX_AHEAD", "MAX_BYTES", "MAX_DEPTH", "OUTPUT_TYPE", "decode", "decode_rateable"]

MAX_BYTES = 1_048_576  # the default of MAX_MESSAGE_BYTES (worker.config): the pipeline passes its own
MAX_DEPTH = 1024  # the deepest JSON nesting orjson parses (its fixed limit): deeper is invalid_json
MAX_AHEAD = 86_400.0  # seconds: no time in `data` may be more than this after the envelope's `time`

_ENVELOPE = compile_schema("envelope")
# type -> (data validator, payload builder, hand-written check of the usual shape or None, cause field),
# from the types' declarations (worker.contract.types)
_TYPES = {t.name: (compile_schema(t.name), t.build, t.surely_valid, t.cause_field) for t in INPUTS}


def _not_ahead(epoch: float, text: str, field: str, envelope: str, envelope_text: str) -> None:
    """A time of `data` may be at most MAX_AHEAD after the envelope's `time` (see the module docstring).

    `envelope_text` is the envelope's time, normalized. A date up to the envelope's own date is always
    within a day of it, and normalized dates compare as text: the parse is only for the rest.
    """
    if text[:10] <= envelope_text[:10]:
        return
    if epoch - parse_normalized(envelope)[0] > MAX_AHEAD:
        raise BadMessage(
            "invalid_rule",
            f"{field}: {text} is more than a day after the envelope's time ({envelope_text})",
        )





def _not_json(value: Any, exc: Exception) -> BadMessage:
    if isinstance(value, bytes | bytearray | memoryview):
        try:
            bytes(value).decode("utf-8")
        except UnicodeDecodeError as err:
            return BadMessage(
                "invalid_utf8", f"record value: invalid UTF-8 at byte {err.start} ({err.reason})"
            )
    text = str(exc)
    where = text[text.find(": line ") + 2 :] if ": line " in text else ""
    if text.startswith("depth limit exceeded"):
        return BadMessage("invalid_json", f"record value: JSON nested deeper than {MAX_DEPTH} levels, at {where}")
    if text.startswith("number is infinity"):
        return BadMessage(
            "invalid_json", f"record value: a number too large for a 64-bit float (like 1e400), at {where}"
        )
    return BadMessage("invalid_json", f"record value: invalid JSON ({text})")


def _nul_path(value: Any, path: str) -> str | None:
    """The first field (or key) at or under `path` whose text contains U+0000, if any.

    Iterative: JSON may nest 1,024 deep, deeper than Python's recursion limit. And lazy: a path is
    spelled out only for the field found, never for every field on the way (a megabyte of siblings
    1,000 levels down would otherwise cost gigabytes of path text).
    """
    # Each entry: (value, trail), a trail being None or (parent trail, step): shared, O(1) to extend.
    stack: list[tuple[Any, Any]] = [(value, None)]
    while stack:
        value, trail = stack.pop()
        if value.__class__ is str:
            if "\x00" in value:
                return _spell(path, trail)
        elif value.__class__ is dict:
            for key in value:
                if "\x00" in key:
                    return _spell(path, (trail, key))
            stack.extend([(item, (trail, key)) for key, item in reversed(value.items())])
        elif value.__class__ is list:
            stack.extend([(item, (trail, i)) for i, item in reversed(list(enumerate(value)))])
    return None


def _spell(path: str, trail: Any) -> str:
    """A trail from _nul_path -> "data.players[0].player_id", shortened in the middle if long."""
    steps = []
    while trail is not None:
        trail, step = trail
        steps.append(f"[{step}]" if step.__class__ is int else f".{field_name(step)}")
    text = path + "".join(reversed(steps))
    if len(text) > 120:  # deep nesting: keep the reason (a Kafka header) short
        text = f"{text[:60]}...{text[-40:]}"
    return text


def _reject_nul(event: dict) -> None:
    """PostgreSQL text cannot hold U+0000: no string the worker keeps may contain it."""
    for name in ("id", "source"):
        if "\x00" in event[name]:
            raise BadMessage("invalid_envelope", f"{name}: must not contain the NUL character (U+0000)")
    found = _nul_path(event["data"], "data")
    if found:
        raise BadMessage("invalid_data", f"{found}: must not contain the NUL character (U+0000)")


def decode(value: bytes | None, max_bytes: int = MAX_BYTES, headers: Sequence[tuple[str, bytes]] = ()) -> Message:
    """One Kafka record -> a valid input `Message`, or BadMessage(error_class, reason).

    `headers` are the record's: a binary-mode record (worker.contract.binding) has its attributes there and its
    `data` alone in the value; a structured one (the usual case, and every record without headers) has
    the whole event in the value."""
    if headers:
        try:
            attributes = binary_attributes(headers)
        except ValueError as exc:
            raise BadMessage("invalid_envelope", str(exc)) from None
        if attributes is not None:
            data, nul = _parse_value(value, max_bytes)
            event = {**attributes, "data": data}
            return _decode_event(event, nul or any("\x00" in v for v in attributes.values()))
    event, nul = _parse_value(value, max_bytes)
    if event.__class__ is not dict:
        raise BadMessage("invalid_envelope", f"envelope: must be a JSON object, not {show(event)}")
    return _decode_event(event, nul)


def decode_rateable(value: bytes | None, max_bytes: int = MAX_BYTES,
                    headers: Sequence[tuple[str, bytes]] = ()) -> tuple[Message, RatingSystem]:
    """`decode`, then the system that rates the message: a valid message that no system of this version
    rates (a new kind of event, say) is `unsupported`, dead-lettered to be re-submitted after an upgrade."""
    message = decode(value, max_bytes, headers)
    system = system_for(message)
    if system is None:
        raise BadMessage("unsupported", f"{message.type}: no rating system for it in this version")
    return message, system


def _parse_value(value: bytes | None, max_bytes: int) -> tuple[Any, bool]:
    """The record value's JSON (size, UTF-8 and JSON checked), and whether its text has an escaped NUL."""
    if value is None:
        raise BadMessage("invalid_json", "record value: missing (a null value, e.g. a tombstone)")
    size = len(value)
    if value.__class__ is str and size <= max_bytes and not value.isascii():
        size = len(value.encode("utf-8", "surrogatepass"))  # a str (tests, tools) counts its UTF-8 bytes
    if size > max_bytes:
        raise BadMessage("too_large", f"record value: {size} bytes, over the limit of {max_bytes} bytes")
    if value.__class__ is memoryview:
        value = value.tobytes()
    try:
        parsed = orjson.loads(value)
    except orjson.JSONDecodeError as exc:
        if value.__class__ is str:
            try:
                value.encode("utf-8")
            except UnicodeEncodeError as err:
                raise BadMessage(
                    "invalid_utf8", f"record value: not UTF-8 at character {err.start} (a lone surrogate)"
                ) from None
        raise _not_json(value, exc) from None
    # A NUL can only be written \u0000 in JSON: the exact check runs only when the text has one.
    return parsed, (b"\\u0000" if value.__class__ is not str else "\\u0000") in value


def _decode_event(event: dict, nul: bool) -> Message:
    """A parsed event (structured, or assembled from a binary record) -> a valid `Message`."""
    if not envelope_surely_valid(event):
        try:
            _ENVELOPE(event)
        except SchemaError as exc:
            raise BadMessage("invalid_envelope", schema_reason(exc, "")) from None
    type_ = event["type"]
    entry = _TYPES.get(type_)
    if entry is None:
        if type_ == OUTPUT_TYPE:
            raise BadMessage(
                "unknown_type", "type: 'rating.changed' is the worker's output, not an input type"
            )
        raise BadMessage(
            "unknown_type",
            f"type: unknown message type {show(type_)} (expected one of {', '.join(INPUT_TYPES)})",
        )
    time = event["time"]
    # The schema's regex leaves impossible days (Feb 30), years before 1970 and the rarer forms (offsets,
    # fractions) to check: a canonical time from 1970 on with a day up to 28 is valid as it stands.
    if len(time) == 20 and time[19] == "Z" and time[10] == "T" and time[8:10] <= "28" and time[:4] >= "1970":
        envelope_text = time
    else:
        try:
            epoch, envelope_text = parse_normalized(time)
        except ValueError as exc:
            raise BadMessage("invalid_envelope", f"time: {exc}") from None
        if epoch < MIN_TIME:
            raise BadMessage(
                "invalid_envelope", f"time: must not be before {MIN_TIME_TEXT} (got {envelope_text})"
            )
    validate, build, surely_valid, cause_field = entry
    data = event["data"]
    if surely_valid is None or not surely_valid(data):
        try:
            validate(data)
        except SchemaError as exc:
            raise BadMessage("invalid_data", schema_reason(exc, "data")) from None
    if nul:
        _reject_nul(event)
    payload, cause_at, cause_time, ref = build(data)
    if cause_time[:10] > envelope_text[:10]:
        _not_ahead(cause_at, cause_time, f"data.{cause_field}", time, envelope_text)
    if payload.__class__ is RatingImported and payload.last_played_at is not None:
        last_at, last_text = parse_normalized(data["last_played_at"])
        _not_ahead(last_at, last_text, "data.last_played_at", time, envelope_text)
    return new_message(event["source"], event["id"], type_, cause_time, payload, ref)

