"""Bad requests, in one shape: RFC 9457 problem details (`application/problem+json`), each naming the
parameter at fault; and the request's parameters, read and checked here, so that nothing unchecked
reaches a query (every value goes to PostgreSQL as a bound parameter).

A handler raises `Problem`; worker.api.app turns it into the response. A problem never carries a stack
trace or a database message: an unexpected error is a bare 500 logged on the server side.
"""

from __future__ import annotations

import base64
import binascii
from datetime import UTC, datetime
from http import HTTPStatus
from typing import Any
from urllib.parse import unquote_to_bytes

import orjson
from starlette.requests import Request
from starlette.responses import Response

from worker.ratings.registry import RATINGS

MEDIA_TYPE = "application/problem+json"
MAX_ID = 128  # the contract's longest id (schemas/envelope.json, the payloads' player ids)


class Problem(Exception):
    """An answer that is not the resource: status, a sentence for people, and the parameter at fault."""

    def __init__(self, status: int, detail: str, parameter: str | None = None,
                 headers: dict[str, str] | None = None) -> None:
        super().__init__(detail)
        self.status, self.detail, self.parameter = status, detail, parameter
        self.headers = headers or {}

    def body(self, instance: str) -> dict[str, Any]:
        body = {"type": "about:blank", "title": HTTPStatus(self.status).phrase, "status": self.status,
                "detail": self.detail, "instance": instance}
        if self.parameter is not None:
            body["parameter"] = self.parameter
        return body


def problem_response(problem: Problem, request: Request) -> Response:
    return Response(orjson.dumps(problem.body(request.url.path)), problem.status, headers=problem.headers,
                    media_type=MEDIA_TYPE)


def bad(parameter: str, detail: str) -> Problem:
    return Problem(400, f"{parameter}: {detail}", parameter)


def text_id(parameter: str, value: str | None) -> str:
    """A player id, a source or a message id as the contract allows them: 1 to 128 characters of text."""
    if value is None or value == "":
        raise bad(parameter, "required")
    if len(value) > MAX_ID:
        raise bad(parameter, f"at most {MAX_ID} characters")
    if "\x00" in value:
        raise bad(parameter, "must not contain the NUL character")
    return value


def _utf8(raw: bytes) -> bool:
    """Whether percent-encoded bytes (a path, a query's name or value) are UTF-8 text."""
    try:
        unquote_to_bytes(raw.replace(b"+", b" ")).decode()
    except UnicodeDecodeError:
        return False
    return True


# The server decodes percent-encoded bytes that are not UTF-8 (`%FF`) as U+FFFD: an id holding one is
# checked against the bytes sent, so that `/v1/players/%FF` is a 400, not a 404 about another id than the
# one sent, and `?source=%FF` never an answer about a message nobody asked for.
NOT_UTF8 = "must be UTF-8 text, percent-encoded (a byte that is not was sent)"


def path_id(request: Request, name: str) -> str:
    """A path parameter that is an id (text_id), sent as UTF-8."""
    value = text_id(name, request.path_params[name])
    if "\ufffd" in value and not _utf8(request.scope.get("raw_path", b"")):
        raise bad(name, NOT_UTF8)
    return value


def query_id(request: Request, name: str) -> str:
    """A query parameter that is an id (text_id), sent as UTF-8."""
    value = text_id(name, request.query_params.get(name))
    if "\ufffd" in value:
        for pair in request.scope.get("query_string", b"").split(b"&"):
            key, _, raw = pair.partition(b"=")
            if unquote_to_bytes(key.replace(b"+", b" ")) == name.encode() and not _utf8(raw):
                raise bad(name, NOT_UTF8)
    return value


def board(system: str, category: str) -> tuple[str, str]:
    """A system that publishes ratings, and one of its categories; else a 404 naming the valid ones."""
    if system not in RATINGS:
        raise Problem(404, f"system: no system {system!r}: one of {', '.join(RATINGS)}", "system")
    if category not in RATINGS[system]:
        raise Problem(404, f"category: {system} has no category {category!r}: one of "
                           f"{', '.join(RATINGS[system])}", "category")
    return system, category


def integer(request: Request, name: str, default: int, least: int, most: int) -> int:
    raw = request.query_params.get(name)
    if raw is None:
        return default
    try:
        value = int(raw)
    except ValueError:
        raise bad(name, f"{raw!r} is not an integer") from None
    if not least <= value <= most:
        raise bad(name, f"must be {least} to {most}, got {value}")
    return value


def positive(request: Request, name: str) -> float | None:
    raw = request.query_params.get(name)
    if raw is None:
        return None
    try:
        value = float(raw)
    except ValueError:
        raise bad(name, f"{raw!r} is not a number") from None
    if not 0 < value < 1e6:
        raise bad(name, f"must be more than 0 (and less than 1e6), got {raw}")
    return value


def time_param(request: Request, name: str, years: tuple[int, int] = (1, 9999)) -> datetime | None:
    """An RFC 3339 time with its offset ('2026-11-30T12:00:00Z'), in UTC, or None when absent. Its year in
    UTC must be within `years`: by default those a datetime (and PostgreSQL's driver) can hold, so that
    '0001-01-01T00:00:00+14:00' is a 400, not an overflow on the way to the query."""
    raw = request.query_params.get(name)
    if raw is None:
        return None
    try:
        value = datetime.fromisoformat(raw.replace("z", "Z"))
    except ValueError:
        raise bad(name, f"{raw!r} is not an RFC 3339 time such as 2026-11-30T12:00:00Z") from None
    if value.tzinfo is None:
        raise bad(name, f"{raw!r} has no offset: add Z (UTC) or +hh:mm")
    try:
        value = value.astimezone(UTC)
    except OverflowError:
        value = None
    if value is None or not years[0] <= value.year <= years[1]:
        raise bad(name, f"{raw!r} is out of range: from the year {years[0]} to {years[1]} (UTC)")
    return value


def choice(request: Request, name: str, choices: tuple[str, ...]) -> str:
    raw = request.query_params.get(name, choices[0])
    if raw not in choices:
        raise bad(name, f"one of {', '.join(choices)}, got {raw!r}")
    return raw


def encode_cursor(kind: str, *position: Any) -> str:
    """An opaque cursor: where the next page starts (a keyset position, never an offset), so that a page
    neither repeats nor skips an entry because others changed (worker.api.boards says the one exception)."""
    return base64.urlsafe_b64encode(orjson.dumps([kind, *position])).decode().rstrip("=")


def decode_cursor(request: Request, kind: str, types: tuple[type, ...]) -> list[Any] | None:
    raw = request.query_params.get("cursor")
    if raw is None:
        return None
    try:
        value = orjson.loads(base64.urlsafe_b64decode(raw + "=" * (-len(raw) % 4)))
    except (binascii.Error, ValueError):
        value = None
    if (not isinstance(value, list) or len(value) != len(types) + 1 or value[0] != kind
            or not all(isinstance(v, t) and not isinstance(v, bool) for v, t in zip(value[1:], types, strict=True))
            or not all(_sendable(v) for v in value[1:])):
        raise bad("cursor", "not a cursor of this list: use the `next` of a previous page as it is")
    return value[1:]


def _sendable(value: Any) -> bool:
    """A cursor's value that PostgreSQL takes as a parameter (text without NUL, a finite number)."""
    if isinstance(value, str):
        try:
            value.encode()
        except UnicodeEncodeError:
            return False
        return len(value) <= MAX_ID and "\x00" not in value
    return abs(value) < 1e300 if isinstance(value, float) else -2**31 < value < 2**31
