"""Why a message is bad: `BadMessage(error_class, reason)` and the wording of its reasons.

`error_class` is a short stable machine name (the dead letter's `error.class`, listed in
ERROR_CLASSES and worker.contract.decode's docstring); `reason` is one sentence that starts with the
field it is about, short (under 400 characters), on one line and valid UTF-8: it travels in a header.
"""

from __future__ import annotations

from typing import Any

import fastjsonschema
import orjson

__all__ = ["BadMessage", "ERROR_CLASSES", "schema_reason", "show"]

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


_TYPE_NAMES = {
    "string": "a string",
    "integer": "an integer",
    "number": "a number",
    "boolean": "a boolean",
    "object": "an object",
    "array": "an array",
    "null": "null",
}


def show(value: Any, limit: int = 40) -> str:
    """A short, safe rendering of a value for a reason (reasons end up in Kafka headers)."""
    if isinstance(value, str):
        text = repr(value[: limit + 1])
        return text if len(value) <= limit else text[:-1] + "...'"
    if value is None or isinstance(value, bool | int | float):
        return orjson.dumps(value).decode() if not isinstance(value, float) else repr(value)
    return _TYPE_NAMES.get(_json_type(value), type(value).__name__)


def field_name(key: str) -> str:
    """A field name for a reason: as is when short and printable, else quoted and shortened."""
    return key if len(key) <= 40 and key.isprintable() and key else show(key)


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


def schema_reason(exc: fastjsonschema.JsonSchemaValueException, root: str) -> str:
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
        return f"{at(field_name(extra))}: unknown field (allowed: {', '.join(allowed)})"
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
        text = f"must be one of {', '.join(show(v) for v in expected)} (got {show(value)})"
    elif rule == "const":
        text = f"must be {show(expected)} (got {show(value)})"
    elif rule == "minLength":
        text = f"must be at least {expected} character{'s' if expected != 1 else ''} long"
    elif rule == "maxLength":
        text = f"must be at most {expected} characters long (got {len(value)})"
    elif rule in ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"):
        op = {"minimum": ">=", "maximum": "<=", "exclusiveMinimum": ">", "exclusiveMaximum": "<"}[rule]
        text = f"must be {op} {_number(expected)} (got {show(value)})"
    elif rule == "pattern":
        if definition.get("format") == "date-time":
            text = "must be an RFC 3339 timestamp with offset, e.g. '2026-11-30T12:00:00Z'"
        elif field == "datacontenttype":
            text = f"must be 'application/json' (got {show(value)})"
        else:
            text = f"must match the pattern {expected}"
    elif rule in ("minItems", "maxItems"):
        text = f"must have {'at least' if rule == 'minItems' else 'at most'} {expected} items"
    else:
        text = exc.message.replace(name, "", 1).strip() or rule
    return f"{field}: {text} ({note})" if note else f"{field}: {text}"

