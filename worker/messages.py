"""Decode and validate incoming CloudEvents (CONTRACT.md) into typed messages; anything else is a BadMessage.

The JSON Schemas in `schemas/` are the public form of the contract; this module checks the same rules
by hand on the hot path (a game is checked in a few microseconds) and the schema tests keep the two
in agreement.
"""

from __future__ import annotations

from datetime import UTC, datetime

import orjson

from worker.ratings.inputs import GameFinished, Message, TimeControl

INPUT_TYPES = ("game.finished", "event.finished", "puzzle.attempted", "account.closed", "rating.imported")
RESULTS = ("1-0", "0-1", "1/2-1/2")


class BadMessage(Exception):
    """A message the contract does not allow: `error_class` is a stable short name, `reason` a sentence."""

    def __init__(self, error_class: str, reason: str) -> None:
        super().__init__(f"{error_class}: {reason}")
        self.error_class = error_class
        self.reason = reason


def parse_time(text: str) -> float:
    """RFC 3339 with an offset (Z or +hh:mm) -> epoch seconds."""
    if not isinstance(text, str) or len(text) < 20 or text[10] not in "Tt ":
        raise ValueError("not an RFC 3339 timestamp")
    value = datetime.fromisoformat(text[:-1] + "+00:00" if text[-1] in "Zz" else text)
    if value.tzinfo is None:
        raise ValueError("an RFC 3339 timestamp needs an offset (Z or +hh:mm)")
    return value.timestamp()


def format_time(epoch: float) -> str:
    """Epoch seconds -> RFC 3339 UTC text: 2026-11-30T12:00:00Z (microseconds only when not zero)."""
    value = datetime.fromtimestamp(epoch, UTC)
    text = value.strftime("%Y-%m-%dT%H:%M:%S")
    return text + (f".{value.microsecond:06d}Z" if value.microsecond else "Z")


def _bad(field: str, rule: str) -> BadMessage:
    return BadMessage("invalid_data", f"{field}: {rule}")


def _string(obj: dict, name: str, where: str, low: int = 1, high: int = 256) -> str:
    value = obj.get(name)
    if not isinstance(value, str) or not low <= len(value) <= high:
        raise _bad(f"{where}.{name}", f"must be a string of {low} to {high} characters")
    return value


def _time(obj: dict, name: str, where: str) -> float:
    try:
        return parse_time(obj.get(name))
    except (ValueError, TypeError):
        raise _bad(f"{where}.{name}", "must be an RFC 3339 timestamp with an offset") from None


def _int(obj: dict, name: str, where: str, low: int) -> int:
    value = obj.get(name)
    if type(value) is not int or value < low:
        raise _bad(f"{where}.{name}", f"must be an integer >= {low}")
    return value


def _envelope(event) -> tuple[str, str, str]:
    if not isinstance(event, dict):
        raise BadMessage("invalid_envelope", "the record value must be a JSON object (a CloudEvent)")
    if event.get("specversion") != "1.0":
        raise BadMessage("invalid_envelope", "specversion: must be \"1.0\"")
    for name, high in (("id", 128), ("source", 256)):
        value = event.get(name)
        if not isinstance(value, str) or not 1 <= len(value) <= high:
            raise BadMessage("invalid_envelope", f"{name}: must be a string of 1 to {high} characters")
    kind = event.get("type")
    if not isinstance(kind, str):
        raise BadMessage("invalid_envelope", "type: must be a string")
    if kind not in INPUT_TYPES:
        raise BadMessage("unknown_type", f"type: {kind[:80]!r} is not one of {', '.join(INPUT_TYPES)}")
    try:
        parse_time(event.get("time"))
    except (ValueError, TypeError):
        raise BadMessage("invalid_envelope", "time: must be an RFC 3339 timestamp with an offset") from None
    if "datacontenttype" in event and event["datacontenttype"] != "application/json":
        raise BadMessage("invalid_envelope", "datacontenttype: must be \"application/json\"")
    if not isinstance(event.get("data"), dict):
        raise BadMessage("invalid_envelope", "data: must be a JSON object")
    return event["id"], event["source"], kind


def _player(data: dict, side: str) -> tuple[str, bool]:
    obj = data.get(side)
    if not isinstance(obj, dict):
        raise _bad(f"data.{side}", "must be an object with player_id")
    player = _string(obj, "player_id", f"data.{side}", 1, 128)
    guest = obj.get("guest", False)
    if not isinstance(guest, bool):
        raise _bad(f"data.{side}.guest", "must be true or false")
    return player, guest


def _time_control(data: dict) -> TimeControl:
    tc = data.get("time_control")
    if not isinstance(tc, dict):
        raise _bad("data.time_control", "must be an object")
    if "days_per_move" in tc:
        if len(tc) != 1:
            raise _bad("data.time_control", "days_per_move stands alone (no base_seconds/increment_seconds)")
        return TimeControl(days_per_move=_int(tc, "days_per_move", "data.time_control", 1))
    if set(tc) != {"base_seconds", "increment_seconds"}:
        raise _bad("data.time_control", "must be {base_seconds, increment_seconds} or {days_per_move}")
    return TimeControl(_int(tc, "base_seconds", "data.time_control", 0),
                       _int(tc, "increment_seconds", "data.time_control", 0))


def _game(data: dict) -> GameFinished:
    game_id = _string(data, "game_id", "data", 1, 256)
    rated = data.get("rated")
    if not isinstance(rated, bool):
        raise _bad("data.rated", "must be true or false")
    variant = _string(data, "variant", "data", 1, 64)
    white, white_guest = _player(data, "white")
    black, black_guest = _player(data, "black")
    if white == black:
        raise BadMessage("invalid_rule", f"data.black.player_id: a player may not meet himself ({white!r})")
    result = data.get("result")
    if result not in RESULTS:
        raise _bad("data.result", "must be one of '1-0', '0-1', '1/2-1/2'")
    return GameFinished(game_id, rated, variant, _time_control(data), white, black, result,
                        _time(data, "finished_at", "data"), white_guest, black_guest)


def decode(value: bytes | None, max_bytes: int = 1_048_576) -> Message:
    """Record value -> Message, or BadMessage with the reason."""
    if value is None:
        raise BadMessage("invalid_json", "the record has no value (a tombstone)")
    if len(value) > max_bytes:
        raise BadMessage("too_large", f"the record value is {len(value)} bytes, more than the limit {max_bytes}")
    try:
        event = orjson.loads(value)
    except orjson.JSONDecodeError as exc:
        try:
            bytes(value).decode("utf-8")
        except UnicodeDecodeError:
            raise BadMessage("invalid_utf8", "the record value is not valid UTF-8") from None
        raise BadMessage("invalid_json", f"the record value is not JSON: {exc}") from None
    event_id, source, kind = _envelope(event)
    data = event["data"]
    if kind == "game.finished":
        game = _game(data)
        return Message(source, event_id, kind, format_time(game.finished_at), game, game.game_id)
    return _unrated_type(source, event_id, kind, data)


def _unrated_type(source: str, event_id: str, kind: str, data: dict) -> Message:
    """Types whose rating systems this version does not have yet: identified, not validated further.

    The pipeline dead-letters them as `unsupported` (nothing is marked processed), so they can be
    re-submitted from the DLQ once their system exists.
    """
    from worker.ratings import inputs

    if kind == "event.finished":
        payload = inputs.EventFinished(str(data.get("competition_id", "")), str(data.get("kind", "")),
                                       bool(data.get("rated")), 0.0, ())
    elif kind in ("puzzle.attempted", "rating.imported"):
        payload = inputs.PuzzleAttempted(str(data.get("system", "")), "", "", False, 0.0)
    else:
        payload = inputs.AccountClosed(str(data.get("player_id", "")), str(data.get("reason", "")), 0.0)
    return Message(source, event_id, kind, "", payload, None)
