"""Decode and validate input messages (CONTRACT.md): a Kafka record value -> a typed `Message`.

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
                      in `data` more than a day after the envelope's `time`

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

import dataclasses
import math
import re
from collections.abc import Sequence
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import fastjsonschema
import orjson

from worker.binding import binary_attributes
from worker.fastcheck import DATA_CHECKS, envelope_surely_valid
from worker.ratings.inputs import (
    AccountClosed,
    EventFinished,
    EventGame,
    EventPlayer,
    GameFinished,
    Message,
    PuzzleAttempted,
    RatingImported,
    TeamGames,
    TimeControl,
    TurboPlayer,
)

__all__ = [
    "BadMessage",
    "ERROR_CLASSES",
    "INPUT_TYPES",
    "MAX_AHEAD",
    "MAX_BYTES",
    "MAX_DEPTH",
    "MIN_TIME",
    "OUTPUT_TYPE",
    "SCHEMAS_DIR",
    "decode",
    "format_time",
    "load_schema",
    "parse_time",
    "validate_output",
]

SCHEMAS_DIR = Path(__file__).parent / "schemas"
MAX_BYTES = 1_048_576  # the default of MAX_MESSAGE_BYTES (worker.config): the pipeline passes its own
MAX_DEPTH = 1024  # the deepest JSON nesting orjson parses (its fixed limit): deeper is invalid_json
MIN_TIME = 0.0  # 1970-01-01T00:00:00Z: no time in a message may be earlier
MAX_AHEAD = 86_400.0  # seconds: no time in `data` may be more than this after the envelope's `time`
INPUT_TYPES = ("game.finished", "event.finished", "puzzle.attempted", "account.closed", "rating.imported")
OUTPUT_TYPE = "rating.changed"
ERROR_CLASSES = (
    "too_large",
    "invalid_utf8",
    "invalid_json",
    "invalid_envelope",
    "unknown_type",
    "invalid_data",
    "invalid_rule",
)


class BadMessage(Exception):
    """A message the worker cannot accept: it goes to the dead-letter topic, the worker carries on.

    `error_class` is a short stable machine name (see the module docstring), `reason` a sentence for
    people that names the field.
    """

    def __init__(self, error_class: str, reason: str) -> None:
        super().__init__(error_class, reason)
        self.error_class = error_class
        self.reason = reason

    def __str__(self) -> str:
        return f"{self.error_class}: {self.reason}"


# ---------------------------------------------------------------------------------------------
# Times


_EPOCH = datetime(1970, 1, 1)
_ONE_US = timedelta(microseconds=1)
# RFC 3339 section 5.6 date-time (with the offset required). [0-9], not \d: \d would take any
# Unicode digit. Leap seconds (:60) are accepted and count as the first second of the next minute.
_TIME_RE = re.compile(
    r"([0-9]{4})-([0-9]{2})-([0-9]{2})[Tt]([0-9]{2}):([0-9]{2}):([0-9]{2})(?:\.([0-9]+))?"
    r"(?:[Zz]|([+-])([0-9]{2}):([0-9]{2}))"
)


def _format_utc(dt: datetime) -> str:
    """A naive UTC datetime as RFC 3339 text, microseconds only when non-zero."""
    text = f"{dt.year:04d}-{dt.month:02d}-{dt.day:02d}T{dt.hour:02d}:{dt.minute:02d}:{dt.second:02d}"
    if dt.microsecond:
        return f"{text}.{dt.microsecond:06d}Z"
    return text + "Z"


def _parse_slow(text: str) -> tuple[float, str]:
    """Any RFC 3339 date-time with offset -> (epoch seconds, normalized UTC text); ValueError if not."""
    m = _TIME_RE.fullmatch(text)
    if m is None:
        raise ValueError("not an RFC 3339 timestamp with offset, e.g. '2026-11-30T12:00:00Z'")
    year, month, day, hour, minute, second, fraction, sign, off_h, off_m = m.groups()
    second = int(second)
    leap = second == 60
    if second > 60:
        raise ValueError("second must be in 0..60")
    # Fractions finer than a microsecond are truncated (float epoch seconds cannot hold them anyway).
    micro = int((fraction or "")[:6].ljust(6, "0"))
    try:
        local = datetime(
            int(year), int(month), int(day), int(hour), int(minute), 59 if leap else second, micro
        )
    except ValueError as exc:
        raise ValueError(f"not a real date and time ({exc})") from None
    utc = local
    if sign is not None:
        oh, om = int(off_h), int(off_m)
        if oh > 23 or om > 59:
            raise ValueError("the offset must be within -23:59..+23:59")
        offset = timedelta(hours=oh, minutes=om)
        utc = local - offset if sign == "+" else local + offset
    if leap:
        utc += timedelta(seconds=1)
    micros = (utc - _EPOCH) // _ONE_US
    return micros / 1_000_000, _format_utc(utc)


def _parse(text: str) -> tuple[float, str]:
    """(epoch seconds, normalized text), with a fast path for text already in the normalized form."""
    if (
        len(text) == 20
        and text[19] == "Z"
        and text[10] == "T"
        and text[4] == text[7] == "-"
        and text[13] == text[16] == ":"
    ):
        try:
            # Python 3.11 parses the 'Z'; the regex of the schema has already checked the shape.
            return datetime.fromisoformat(text).timestamp(), text
        except ValueError:
            pass  # a leap second or an impossible date: the slow path says which
    try:
        return _parse_slow(text)
    except OverflowError:
        raise ValueError("outside the years 0001..9999 once converted to UTC") from None


def parse_time(text: str) -> float:
    """An RFC 3339 timestamp with offset -> epoch seconds (float, UTC). Raises ValueError if invalid.

    Lowercase 't'/'z' and any number of fraction digits are accepted (truncated to microseconds);
    a leap second (:60) counts as the first second of the next minute.
    """
    if not isinstance(text, str):
        raise ValueError("not a string")
    return _parse(text)[0]


def format_time(epoch: float) -> str:
    """Epoch seconds -> RFC 3339 UTC text: `2026-11-30T12:00:00Z`, `2026-11-30T12:00:00.250000Z`.

    Rounded to the microsecond; `format_time(parse_time(t))` is the normalized form of `t`.
    Raises ValueError for NaN, infinities and times outside the years 0001..9999.
    """
    if not math.isfinite(epoch):
        raise ValueError(f"not a finite time: {epoch!r}")
    seconds = math.floor(epoch)
    micros = round((epoch - seconds) * 1_000_000)  # epoch - floor(epoch) is exact
    try:
        return _format_utc(_EPOCH + timedelta(seconds=seconds, microseconds=micros))
    except OverflowError:
        raise ValueError(f"time out of range: {epoch!r}") from None


_MIN_TIME_TEXT = "1970-01-01T00:00:00Z"


def _time(text: str, field: str) -> tuple[float, str]:
    """A time of `data` (already shaped by the schema's regex) -> (epoch seconds, normalized text)."""
    try:
        epoch, normalized = _parse(text)
    except ValueError as exc:
        raise BadMessage("invalid_data", f"{field}: {exc}") from None
    if epoch < MIN_TIME:
        raise BadMessage("invalid_data", f"{field}: must not be before {_MIN_TIME_TEXT} (got {normalized})")
    return epoch, normalized


def _not_ahead(epoch: float, text: str, field: str, envelope: str, envelope_text: str) -> None:
    """A time of `data` may be at most MAX_AHEAD after the envelope's `time` (see the module docstring).

    `envelope_text` is the envelope's time, normalized. A date up to the envelope's own date is always
    within a day of it, and normalized dates compare as text: the parse is only for the rest.
    """
    if text[:10] <= envelope_text[:10]:
        return
    if epoch - _parse(envelope)[0] > MAX_AHEAD:
        raise BadMessage(
            "invalid_rule",
            f"{field}: {text} is more than a day after the envelope's time ({envelope_text})",
        )


# ---------------------------------------------------------------------------------------------
# Schemas


def load_schema(name: str) -> dict[str, Any]:
    """The JSON Schema of one message type (`envelope`, `game.finished`, ..., `rating.changed`)."""
    return orjson.loads((SCHEMAS_DIR / f"{name}.json").read_bytes())


def _no_remote_refs(uri: str):
    raise ValueError(f"schemas/ must be self-contained: no remote $ref ({uri})")


def _compile(name: str):
    # Formats off: times are checked by the schemas' regex, then parsed here. No remote $ref, ever.
    handlers = {"http": _no_remote_refs, "https": _no_remote_refs, "file": _no_remote_refs}
    return fastjsonschema.compile(load_schema(name), handlers=handlers, use_default=False, use_formats=False)


_ENVELOPE = _compile("envelope")
_OUTPUT = _compile(OUTPUT_TYPE)
_SchemaError = fastjsonschema.JsonSchemaValueException

_TYPE_NAMES = {
    "string": "a string",
    "integer": "an integer",
    "number": "a number",
    "boolean": "a boolean",
    "object": "an object",
    "array": "an array",
    "null": "null",
}


def _show(value: Any, limit: int = 40) -> str:
    """A short, safe rendering of a value for a reason (reasons end up in Kafka headers)."""
    if isinstance(value, str):
        text = repr(value[: limit + 1])
        return text if len(value) <= limit else text[:-1] + "...'"
    if value is None or isinstance(value, bool | int | float):
        return orjson.dumps(value).decode() if not isinstance(value, float) else repr(value)
    return _TYPE_NAMES.get(_json_type(value), type(value).__name__)


def _key(key: str) -> str:
    """A field name for a reason: as is when short and printable, else quoted and shortened."""
    return key if len(key) <= 40 and key.isprintable() and key else _show(key)


def _json_type(value: Any) -> str:
    if isinstance(value, dict):
        return "object"
    if isinstance(value, list):
        return "array"
    if isinstance(value, str):
        return "string"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int | float):
        return "number"
    return "null"


def _number(n: Any) -> str:
    return str(int(n)) if isinstance(n, float) and n.is_integer() else str(n)


def _schema_reason(exc: fastjsonschema.JsonSchemaValueException, root: str) -> str:
    """fastjsonschema's error -> "field: what is wrong". `root` names the validated object ("" or "data")."""
    name = exc.name  # "data", "data.white.player_id", "data.players[0].votes"
    field = root + name[4:] if root else name[5:]
    rule, expected, value = exc.rule, exc.rule_definition, exc.value
    definition = exc.definition if isinstance(exc.definition, dict) else {}
    note = definition.get("description")

    def at(key: str) -> str:
        return f"{field}.{key}" if field else key

    if rule == "required":
        missing = next((k for k in expected if isinstance(value, dict) and k not in value), expected[0])
        return f"{at(missing)}: is required"
    if rule == "additionalProperties":
        allowed = definition.get("properties", {})
        extra = next((k for k in value if k not in allowed), "?") if isinstance(value, dict) else "?"
        return f"{at(_key(extra))}: unknown field (allowed: {', '.join(allowed)})"
    if not field:
        field = "envelope"
    if rule in ("not", "oneOf", "anyOf", "maxProperties", "minProperties", "dependencies", None):
        # `not: {}` forbids a field where it has no meaning; the others describe the allowed shapes.
        if note:
            return f"{field}: {note}"
        return f"{field}: is not allowed here" if rule in ("not", None) else exc.message
    if rule == "type":
        names = [expected] if isinstance(expected, str) else list(expected)
        want = " or ".join(_TYPE_NAMES.get(t, t) for t in names)
        text = f"must be {want}, not {_TYPE_NAMES[_json_type(value)]}"
    elif rule == "enum":
        text = f"must be one of {', '.join(_show(v) for v in expected)} (got {_show(value)})"
    elif rule == "const":
        text = f"must be {_show(expected)} (got {_show(value)})"
    elif rule == "minLength":
        text = f"must be at least {expected} character{'s' if expected != 1 else ''} long"
    elif rule == "maxLength":
        text = f"must be at most {expected} characters long (got {len(value)})"
    elif rule in ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"):
        op = {"minimum": ">=", "maximum": "<=", "exclusiveMinimum": ">", "exclusiveMaximum": "<"}[rule]
        text = f"must be {op} {_number(expected)} (got {_show(value)})"
    elif rule == "pattern":
        if definition.get("format") == "date-time":
            text = "must be an RFC 3339 timestamp with offset, e.g. '2026-11-30T12:00:00Z'"
        elif field == "datacontenttype":
            text = f"must be 'application/json' (got {_show(value)})"
        else:
            text = f"must match the pattern {expected}"
    elif rule in ("minItems", "maxItems"):
        text = f"must have {'at least' if rule == 'minItems' else 'at most'} {expected} items"
    else:
        text = exc.message.replace(name, "", 1).strip() or rule
    return f"{field}: {text} ({note})" if note else f"{field}: {text}"


# ---------------------------------------------------------------------------------------------
# Payload builders: validated `data` dict -> (payload, cause time, cause time text, ref)


def _int(v: Any) -> int:
    # JSON Schema's "integer" includes 5.0; the payload gets a real int.
    return v if v.__class__ is int else int(v)


def _opt_int(v: Any) -> int | None:
    return None if v is None else _int(v)


def _float(v: Any) -> float:
    # + 0.0 turns -0.0 (which passes "minimum": 0) into 0.0: no negative zero reaches the rating rules.
    return float(v) + 0.0


def _opt_float(v: Any) -> float | None:
    return None if v is None else float(v) + 0.0


def _positional_constructor(cls):
    """A constructor taking every field of a frozen slots dataclass positionally, about twice as fast.

    A frozen dataclass's __init__ sets each field through object.__setattr__; this sets the slots
    directly. The object is the same (==, hash, repr), so it is only used on the hot path (game.finished).
    """
    names = [f.name for f in dataclasses.fields(cls)]
    if "__slots__" not in cls.__dict__ or hasattr(cls, "__post_init__"):
        return cls
    namespace = {"_new": object.__new__, "_cls": cls}
    namespace.update({f"_set_{n}": cls.__dict__[n].__set__ for n in names})
    lines = [f"def make({', '.join(names)}):", "    obj = _new(_cls)"]
    lines += [f"    _set_{n}(obj, {n})" for n in names]
    lines.append("    return obj")
    exec("\n".join(lines), namespace)  # noqa: S102 - generated from the dataclass's own field names
    make = namespace["make"]
    make.__doc__ = f"{cls.__name__}(...) with every field given positionally."
    return make


_new_game = _positional_constructor(GameFinished)
_new_message = _positional_constructor(Message)
_TIME_CONTROLS: dict[tuple, TimeControl] = {}


def _game(d: dict) -> tuple[GameFinished, float, str, str]:
    tc = d["time_control"]
    days = tc.get("days_per_move")
    key = (days,) if days is not None else (tc["base_seconds"], tc["increment_seconds"])
    time_control = _TIME_CONTROLS.get(key)
    if time_control is None:
        if days is not None:
            time_control = TimeControl(days_per_move=_int(days))
        else:
            time_control = TimeControl(base_seconds=_int(key[0]), increment_seconds=_int(key[1]))
        if len(_TIME_CONTROLS) < 1024:  # the few common controls; never unbounded
            _TIME_CONTROLS[key] = time_control
    white, black = d["white"], d["black"]
    white_id, black_id = white["player_id"], black["player_id"]
    if white_id == black_id:
        raise BadMessage(
            "invalid_rule",
            f"data.black.player_id: a player may not meet himself ({_show(white_id)} is also white)",
        )
    finished_at, text = _time(d["finished_at"], "data.finished_at")
    game_id = d["game_id"]
    return (
        _new_game(
            game_id,
            d["rated"],
            d["variant"],
            time_control,
            white_id,
            black_id,
            d["result"],
            finished_at,
            white.get("guest", False),
            black.get("guest", False),
        ),
        finished_at,
        text,
        game_id,
    )


def _event(d: dict) -> tuple[EventFinished, float, str, str]:
    finished_at, text = _time(d["finished_at"], "data.finished_at")
    kind = d["kind"]
    listed: set[str] = set()
    players: list = []
    for i, p in enumerate(d["players"]):
        pid = p["player_id"]
        if pid in listed:
            raise BadMessage(
                "invalid_rule", f"data.players[{i}].player_id: {_show(pid)} is listed more than once"
            )
        listed.add(pid)
        if kind == "turbo_live":
            tg = p["team_games"]
            players.append(
                TurboPlayer(
                    pid,
                    _float(p["agreement"]),
                    _int(p["votes"]),
                    TeamGames(_int(tg["won"]), _int(tg["drawn"]), _int(tg["lost"])),
                    _int(p.get("top_ups", 0)),
                )
            )
        else:
            players.append(EventPlayer(pid, _opt_int(p.get("age")), _opt_int(p.get("birth_year"))))
    games = []
    for j, g in enumerate(d.get("games", ())):
        white, black = g["white"], g["black"]
        if white == black:
            raise BadMessage(
                "invalid_rule",
                f"data.games[{j}].black: a player may not meet himself ({_show(white)} is also white)",
            )
        for side, pid in (("white", white), ("black", black)):
            if pid not in listed:
                raise BadMessage(
                    "invalid_rule", f"data.games[{j}].{side}: {_show(pid)} is not listed in data.players"
                )
        games.append(EventGame(_int(g["round"]), white, black, g["result"]))
    tc = d.get("time_control")
    competition_id = d["competition_id"]
    return (
        EventFinished(
            competition_id,
            kind,
            d["rated"],
            finished_at,
            tuple(players),
            tuple(games),
            d.get("format"),
            None if tc is None else _float(tc["base_minutes"]),
            None if tc is None else _int(tc["increment_seconds"]),
            d.get("rating_type"),
        ),
        finished_at,
        text,
        competition_id,
    )


def _puzzle(d: dict) -> tuple[PuzzleAttempted, float, str, str]:
    attempted_at, text = _time(d["attempted_at"], "data.attempted_at")
    puzzle_id = d["puzzle_id"]
    return (
        PuzzleAttempted(
            d["system"],
            d["player_id"],
            puzzle_id,
            d["correct"],
            attempted_at,
            d.get("mode"),
            _opt_float(d.get("seconds")),
            _opt_float(d.get("seconds_after_first_move")),
            d.get("challenge", False),
            _opt_float(d.get("puzzle_rating")),
        ),
        attempted_at,
        text,
        puzzle_id,
    )


def _closed(d: dict) -> tuple[AccountClosed, float, str, None]:
    closed_at, text = _time(d["closed_at"], "data.closed_at")
    return AccountClosed(d["player_id"], d["reason"], closed_at), closed_at, text, None


def _imported(d: dict) -> tuple[RatingImported, float, str, None]:
    imported_at, text = _time(d["imported_at"], "data.imported_at")
    last = d.get("last_played_at")
    last_played_at = None if last is None else _time(last, "data.last_played_at")[0]
    return (
        RatingImported(
            d["player_id"],
            d["system"],
            d["category"],
            _float(d["rating"]),
            imported_at,
            rd=_opt_float(d.get("rd")),
            volatility=_opt_float(d.get("volatility")),
            games=_opt_int(d.get("games")),
            wins=_opt_int(d.get("wins")),
            draws=_opt_int(d.get("draws")),
            losses=_opt_int(d.get("losses")),
            events=_opt_int(d.get("events")),
            peak=_opt_float(d.get("peak")),
            birth_year=_opt_int(d.get("birth_year")),
            last_played_at=last_played_at,
        ),
        imported_at,
        text,
        None,
    )


_BUILDERS = {
    "game.finished": _game,
    "event.finished": _event,
    "puzzle.attempted": _puzzle,
    "account.closed": _closed,
    "rating.imported": _imported,
}
# type -> (data validator, payload builder, hand-written check of the usual shape or None)
_TYPES = {t: (_compile(t), _BUILDERS[t], DATA_CHECKS.get(t)) for t in INPUT_TYPES}


# ---------------------------------------------------------------------------------------------
# Decoding


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
        steps.append(f"[{step}]" if step.__class__ is int else f".{_key(step)}")
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

    `headers` are the record's: a binary-mode record (worker.binding) has its attributes there and its
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
        raise BadMessage("invalid_envelope", f"envelope: must be a JSON object, not {_show(event)}")
    return _decode_event(event, nul)


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
        except _SchemaError as exc:
            raise BadMessage("invalid_envelope", _schema_reason(exc, "")) from None
    type_ = event["type"]
    entry = _TYPES.get(type_)
    if entry is None:
        if type_ == OUTPUT_TYPE:
            raise BadMessage(
                "unknown_type", "type: 'rating.changed' is the worker's output, not an input type"
            )
        raise BadMessage(
            "unknown_type",
            f"type: unknown message type {_show(type_)} (expected one of {', '.join(INPUT_TYPES)})",
        )
    time = event["time"]
    # The schema's regex leaves impossible days (Feb 30), years before 1970 and the rarer forms (offsets,
    # fractions) to check: a canonical time from 1970 on with a day up to 28 is valid as it stands.
    if len(time) == 20 and time[19] == "Z" and time[10] == "T" and time[8:10] <= "28" and time[:4] >= "1970":
        envelope_text = time
    else:
        try:
            epoch, envelope_text = _parse(time)
        except ValueError as exc:
            raise BadMessage("invalid_envelope", f"time: {exc}") from None
        if epoch < MIN_TIME:
            raise BadMessage(
                "invalid_envelope", f"time: must not be before {_MIN_TIME_TEXT} (got {envelope_text})"
            )
    validate, build, surely_valid = entry
    data = event["data"]
    if surely_valid is None or not surely_valid(data):
        try:
            validate(data)
        except _SchemaError as exc:
            raise BadMessage("invalid_data", _schema_reason(exc, "data")) from None
    if nul:
        _reject_nul(event)
    payload, cause_at, cause_time, ref = build(data)
    if cause_time[:10] > envelope_text[:10]:
        _not_ahead(cause_at, cause_time, f"data.{_CAUSE_FIELDS[type_]}", time, envelope_text)
    if payload.__class__ is RatingImported and payload.last_played_at is not None:
        last_at, last_text = _parse(data["last_played_at"])
        _not_ahead(last_at, last_text, "data.last_played_at", time, envelope_text)
    return _new_message(event["source"], event["id"], type_, cause_time, payload, ref)


_CAUSE_FIELDS = {
    "game.finished": "finished_at",
    "event.finished": "finished_at",
    "puzzle.attempted": "attempted_at",
    "account.closed": "closed_at",
    "rating.imported": "imported_at",
}


def validate_output(event: dict) -> None:
    """Check one outgoing rating.changed CloudEvent (envelope + data, subject = player_id).

    For tests and tools: raises BadMessage (invalid_envelope / unknown_type / invalid_data / invalid_rule).
    """
    try:
        _ENVELOPE(event)
    except _SchemaError as exc:
        raise BadMessage("invalid_envelope", _schema_reason(exc, "")) from None
    if event["type"] != OUTPUT_TYPE:
        raise BadMessage("unknown_type", f"type: must be 'rating.changed' (got {_show(event['type'])})")
    try:
        _OUTPUT(event["data"])
    except _SchemaError as exc:
        raise BadMessage("invalid_data", _schema_reason(exc, "data")) from None
    if event.get("subject") != event["data"]["player_id"]:
        raise BadMessage("invalid_rule", "subject: must be the data.player_id")
    _time(event["data"]["changed_at"], "data.changed_at")
