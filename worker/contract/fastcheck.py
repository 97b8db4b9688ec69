"""Hand-written checks of the commonest messages' usual shape, ahead of the JSON Schema validators.

Each answers True only for a value that its schema surely accepts (a subset of what the schema
accepts: exact Python types, the canonical `YYYY-MM-DDTHH:MM:SSZ` time); False means "not sure", and
the schema's validator (fastjsonschema, in worker.contract.decode) then decides and words the error.
tests/property/test_fastcheck.py checks "True implies the schema accepts" on generated and mutated
messages, and that the usual valid messages take the fast path.

What it buys: fastjsonschema's generated code for the envelope and a game.finished costs ~17 us per
game (7% of the worker's CPU at full speed, the largest single item after the rating math);
these checks cost ~3 us.
"""

from __future__ import annotations

import re

# The schemas' `time` pattern narrowed to the canonical UTC form (no fraction, no offset, uppercase
# T and Z, no trailing newline): every such string matches the schemas' pattern.
_CANONICAL_TIME = re.compile(
    r"[0-9]{4}-(?:0[1-9]|1[0-2])-(?:0[1-9]|[12][0-9]|3[01])T(?:[01][0-9]|2[0-3]):[0-5][0-9]:[0-5][0-9]Z"
).fullmatch

_RESULTS = frozenset(("1-0", "0-1", "1/2-1/2"))
_CLOCK_KEYS = frozenset(("base_seconds", "increment_seconds"))
_COUNT_MAX = 1_000_000_000


def _short_str(value: object, most: int) -> bool:
    return value.__class__ is str and 0 < len(value) <= most


def _count(value: object, least: int = 0) -> bool:
    # `__class__ is int`: a bool is an int to Python but not to JSON Schema.
    return value.__class__ is int and least <= value <= _COUNT_MAX


def envelope_surely_valid(event: dict) -> bool:
    """schemas/envelope.json: specversion, id, source, type, time, data (an object), datacontenttype."""
    time = event.get("time")
    content_type = event.get("datacontenttype", "application/json")
    return (
        event.get("specversion") == "1.0"
        and _short_str(event.get("id"), 128)
        and _short_str(event.get("source"), 256)
        and _short_str(event.get("type"), 1 << 62)
        and time.__class__ is str
        and _CANONICAL_TIME(time) is not None
        and event.get("data").__class__ is dict
        and content_type == "application/json"
    )


def _side(side: object) -> bool:
    if side.__class__ is not dict or not _short_str(side.get("player_id"), 128):
        return False
    guest = side.get("guest", False)
    return guest is True or guest is False


def _time_control(tc: object) -> bool:
    if tc.__class__ is not dict:
        return False
    if len(tc) == 2 and tc.keys() == _CLOCK_KEYS:
        return _count(tc["base_seconds"]) and _count(tc["increment_seconds"])
    return len(tc) == 1 and _count(tc.get("days_per_move"), 1)


def game_surely_valid(data: dict) -> bool:
    """schemas/game.finished.json, for a `data` object."""
    rated = data.get("rated")
    finished_at = data.get("finished_at")
    result = data.get("result")
    return (
        _short_str(data.get("game_id"), 128)
        and (rated is True or rated is False)
        and _short_str(data.get("variant"), 64)
        and result.__class__ is str
        and result in _RESULTS
        and finished_at.__class__ is str
        and _CANONICAL_TIME(finished_at) is not None
        and _time_control(data.get("time_control"))
        and _side(data.get("white"))
        and _side(data.get("black"))
    )


# type -> the fast check of its `data` (types without one always take the schema's validator)
