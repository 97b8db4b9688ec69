"""The read API's answers as HTTP clients expect them: JSON by orjson, an `ETag` with `304 Not Modified`
on `If-None-Match`, and a `Cache-Control` per kind of resource.

The ETag is a digest of the body, and the body carries the ratings' versions (a player's ratings, a
history's items, a leaderboard's entries): it changes exactly when one of them does, and a client that
revalidates gets 304 without the body (the API still reads the rows: PostgreSQL answers the same
questions either way, and a digest of a few kB costs microseconds).
"""

from __future__ import annotations

import hashlib
from typing import Any

import orjson
from starlette.requests import Request
from starlette.responses import Response

#: Cache-Control per kind of answer: a player's ratings and histories change with every game (revalidate
#: each time, cheaply, by ETag); a leaderboard may be a few seconds old; what support asks is private.
FRESH = "public, no-cache"
BOARD = "public, max-age=10"
PRIVATE = "private, no-cache"
NEVER = "no-store"
STATIC = "public, max-age=3600"

_OPTIONS = orjson.OPT_UTC_Z | orjson.OPT_NON_STR_KEYS


def dumps(obj: Any) -> bytes:
    return orjson.dumps(obj, option=_OPTIONS)


def _matches(header: str | None, etag: str) -> bool:
    """If-None-Match: `*`, or a list of tags (weak ones compare equal to the strong one, RFC 9110 13.1.2)."""
    if header is None:
        return False
    if header.strip() == "*":
        return True
    return any(tag.strip().removeprefix("W/") == etag for tag in header.split(","))


def json_response(request: Request, obj: Any, cache: str = FRESH) -> Response:
    body = dumps(obj)
    etag = '"' + hashlib.blake2b(body, digest_size=16).hexdigest() + '"'
    headers = {"ETag": etag, "Cache-Control": cache, "Vary": "Accept-Encoding, Authorization"}
    if _matches(request.headers.get("if-none-match"), etag):
        return Response(status_code=304, headers=headers)
    return Response(body, 200, headers=headers, media_type="application/json")
