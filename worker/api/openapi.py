"""The read API's OpenAPI 3.1 document: served at /openapi.json and committed as schemas/openapi.json
(`rating-worker docs` writes it; a test fails when the committed one is stale). Its paths and fields are
the public contract: fields may be added, none renamed.

A history item is the `data` of a `rating.changed` record, so its schema is schemas/rating.changed.json
itself (its `$defs` moved under components), not a copy that could drift.
"""

from __future__ import annotations

import functools
import json
from importlib import resources
from typing import Any

from worker.ratings.registry import RATINGS

VERSION = "1.0.0"
PROBLEM = "application/problem+json"


def _ref(name: str) -> dict[str, str]:
    return {"$ref": f"#/components/schemas/{name}"}


def _rewritten(node: Any, prefix: str) -> Any:
    if isinstance(node, dict):
        return {k: (f"#/components/schemas/{prefix}{v.removeprefix('#/$defs/')}" if k == "$ref" and
                    isinstance(v, str) and v.startswith("#/$defs/") else _rewritten(v, prefix)) for k, v in node.items()}
    if isinstance(node, list):
        return [_rewritten(v, prefix) for v in node]
    return node


def _rating_changed() -> dict[str, dict]:
    """schemas/rating.changed.json as components: RatingChanged and its definitions."""
    text = (resources.files("worker") / "schemas" / "rating.changed.json").read_text()
    schema = json.loads(text)
    defs = schema.pop("$defs", {})
    schema.pop("$schema", None)
    schema.pop("$id", None)
    out = {"RatingChanged": _rewritten(schema, "RatingChanged_")}
    out.update({f"RatingChanged_{name}": _rewritten(d, "RatingChanged_") for name, d in defs.items()})
    return out


NUMBER_OR_NULL = {"type": ["number", "null"]}
TIME_OR_NULL = {"type": ["string", "null"], "format": "date-time"}
ID = {"type": "string", "minLength": 1, "maxLength": 128}

SCHEMAS: dict[str, Any] = {
    "Problem": {
        "type": "object", "description": "RFC 9457 problem details: what was wrong, naming the parameter",
        "required": ["type", "title", "status", "detail"],
        "properties": {"type": {"type": "string"}, "title": {"type": "string"}, "status": {"type": "integer"},
                       "detail": {"type": "string"}, "instance": {"type": "string"},
                       "parameter": {"type": "string", "description": "the parameter at fault"}},
    },
    "Rating": {
        "type": "object",
        "required": ["system", "category", "rating", "rd", "volatility", "provisional", "floor", "peak", "games",
                     "version", "last_played_at", "rank", "percentile", "inactive", "start"],
        "properties": {
            "system": {"type": "string", "enum": list(RATINGS)},
            "category": {"type": "string"},
            "rating": {**NUMBER_OR_NULL, "description": "as published (FIDE: the listed rating; null unlisted)"},
            "rd": NUMBER_OR_NULL, "volatility": NUMBER_OR_NULL,
            "provisional": {"type": "boolean", "description": "shown with '?' (each system's own rule)"},
            "floor": NUMBER_OR_NULL, "peak": NUMBER_OR_NULL,
            "games": {"type": "integer", "minimum": 0},
            "version": {"type": "integer", "minimum": 0, "description": "its changes so far (0: a start)"},
            "last_played_at": TIME_OR_NULL,
            "rank": {"type": ["integer", "null"], "minimum": 1,
                     "description": "on its leaderboard (competition rank: 1, 2, 2, 4); null when not on it"},
            "percentile": {**NUMBER_OR_NULL, "minimum": 0, "maximum": 100,
                           "description": "the share (in %) of the leaderboard's players rated lower"},
            "inactive": {"type": ["boolean", "null"], "description": "FIDE: marked inactive at a list"},
            "start": {"type": "boolean", "description": "a CSR speed not played yet: the start a first game "
                                                        "would be rated from, from the other speeds"},
        },
    },
    "Player": {
        "type": "object", "required": ["player_id", "closed", "closed_at", "ratings"],
        "properties": {"player_id": ID, "closed": {"type": "boolean", "description": "closed for fair play"},
                       "closed_at": TIME_OR_NULL, "ratings": {"type": "array", "items": _ref("Rating")}},
    },
    "History": {
        "type": "object", "required": ["items", "next"],
        "properties": {"items": {"type": "array", "items": _ref("RatingChanged")},
                       "next": {"type": ["string", "null"], "description": "the next page's cursor"}},
    },
    "Leaderboard": {
        "type": "object", "required": ["items", "next"],
        "properties": {
            "system": {"type": "string"}, "category": {"type": "string"}, "active_days": NUMBER_OR_NULL,
            "items": {"type": "array", "items": {
                "type": "object", "required": ["rank", "player_id", "rating", "rd", "games", "last_played_at"],
                "properties": {"rank": {"type": "integer", "minimum": 1}, "player_id": ID,
                               "rating": {"type": "number"}, "rd": NUMBER_OR_NULL,
                               "games": {"type": "integer"}, "last_played_at": TIME_OR_NULL}}},
            "next": {"type": ["string", "null"]},
        },
    },
    "Unrated": {
        "type": "object", "required": ["player_id", "items"],
        "properties": {"player_id": ID, "items": {"type": "array", "items": {
            "type": "object",
            "required": ["source", "id", "type", "ref", "system", "reason", "explanation", "message_at"],
            "properties": {
                "source": {"type": "string"}, "id": {"type": "string"},
                "type": {"type": "string", "description": "the message's CloudEvents type"},
                "ref": {"type": ["string", "null"], "description": "its game, competition or puzzle id"},
                "system": {"type": "string", "description": "the system that left him unchanged (fairplay: an "
                                                            "account closure)"},
                "reason": {"type": "string"}, "explanation": {"type": "string", "description": "the reason, "
                                                                                               "in a sentence"},
                "message_at": {**TIME_OR_NULL, "description": "the message's own time (finished_at, ...)"}}}}},
    },
    "Message": {
        "type": "object", "required": ["status", "reason", "explanation", "changes", "left_out"],
        "properties": {
            "source": {"type": "string"}, "id": {"type": "string"},
            "status": {"enum": ["applied", "unrated", "unknown"]},
            "type": {"type": "string"}, "ref": {"type": ["string", "null"]},
            "reason": {"type": ["string", "null"], "description": "why the whole message changed nobody"},
            "explanation": {"type": ["string", "null"]},
            "processed_at": TIME_OR_NULL, "duplicates": {"type": "integer"},
            "changes": {"type": "array", "items": _ref("RatingChanged")},
            "left_out": {"type": "array", "items": {
                "type": "object", "required": ["player_id", "reason", "explanation"],
                "properties": {"player_id": ID, "system": {"type": "string"}, "reason": {"type": "string"},
                               "explanation": {"type": "string"}}}},
        },
    },
    "Stakes": {
        "type": "object", "required": ["win", "draw", "loss"],
        "description": "the delta rating.changed would publish after each result; null where it would publish "
                       "none (a FIDE or US Chess newcomer, whose games go to his first rating)",
        "properties": {"win": NUMBER_OR_NULL, "draw": NUMBER_OR_NULL, "loss": NUMBER_OR_NULL,
                       "reason": {"type": ["string", "null"],
                                  "description": "why no result changes his rating (FIDE: unrated_opponent)"}},
    },
    "Preview": {
        "type": "object", "required": ["white", "black"],
        "properties": {"system": {"type": "string"}, "category": {"type": "string"},
                       "white_id": ID, "black_id": ID, "white": _ref("Stakes"), "black": _ref("Stakes")},
    },
}


def _header(description: str, schema: dict | None = None) -> dict:
    return {"required": True, "description": description, "schema": schema or {"type": "string"}}


ETAG = _header("a digest of the body: send it back in If-None-Match to get 304 while nothing changed")
CACHE_CONTROL = _header("how long the answer may be reused: no-cache (revalidate by ETag), a few seconds for a "
                        "leaderboard, no-store for points at stake")


def _problem(description: str, headers: dict | None = None) -> dict:
    return {"description": description, **({"headers": headers} if headers else {}),
            "content": {PROBLEM: {"schema": _ref("Problem")}}}


def _json(schema: dict, description: str = "OK") -> dict:
    return {"description": description, "headers": {"ETag": ETAG, "Cache-Control": CACHE_CONTROL},
            "content": {"application/json": {"schema": schema}}}


def _path(name: str, description: str, schema: dict | None = None) -> dict:
    return {"name": name, "in": "path", "required": True, "description": description,
            "schema": schema or {"type": "string"}}


def _query(name: str, description: str, schema: dict, required: bool = False) -> dict:
    return {"name": name, "in": "query", "required": required, "description": description, "schema": schema}


UNAVAILABLE = _problem("PostgreSQL is unavailable (Retry-After says when to try again)", {
    "Retry-After": _header("seconds to wait before asking again", {"type": "integer", "minimum": 0})})
ERRORS = {"400": _problem("a parameter is wrong (`parameter` names it)"), "404": _problem("no such resource"),
          "503": UNAVAILABLE}
NOT_MODIFIED = {"304": {"description": "Not Modified (If-None-Match matched the ETag)",
                         "headers": {"ETag": ETAG, "Cache-Control": CACHE_CONTROL}}}
PLAYER = _path("player_id", "the player's id, as the platform sends it, percent-encoded: a \"/\" in it as %2F", ID)
BOARD = [_path("system", "a system that publishes ratings", {"type": "string", "enum": list(RATINGS)}),
         _path("category", "one of the system's categories (a 404 names them)",
               {"type": "string", "enum": sorted({c for cs in RATINGS.values() for c in cs})})]
LIMIT = _query("limit", "how many (default 100, at most 1000)", {"type": "integer", "minimum": 1, "maximum": 1000})
CURSOR = _query("cursor", "the `next` of the page before, as it is", {"type": "string"})
AT = {"type": "string", "format": "date-time"}


def _get(summary: str, parameters: list, ok: dict, others: dict | None = None,
         security: list | None = None) -> dict:
    return {"get": {"summary": summary, "parameters": parameters, **({"security": security} if security else {}),
                    "responses": {"200": ok, **NOT_MODIFIED, **ERRORS, **(others or {})}}}


PATHS = {
    "/v1/players/{player_id}": _get(
        "Every rating of a player, as published (CSR: all five speeds; one not played yet as its start)",
        [PLAYER], _json(_ref("Player"))),
    "/v1/players/{player_id}/history/{system}/{category}": _get(
        "One rating's rating.changed records, field for field as published, in version order",
        [PLAYER, *BOARD, _query("from", "changed_at at or after", AT), _query("to", "changed_at at or before", AT),
         _query("order", "asc (default) or desc", {"type": "string", "enum": ["asc", "desc"]}), LIMIT, CURSOR],
        _json(_ref("History"))),
    "/v1/players/{player_id}/unrated": _get(
        "The latest valid messages that changed none of the player's ratings, and why, newest first",
        [PLAYER, _query("limit", "how many (default 20, at most 1000)", {"type": "integer", "minimum": 1,
                                                                         "maximum": 1000})],
        _json(_ref("Unrated"))),
    "/v1/leaderboards/{system}/{category}": _get(
        "The best established ratings, accounts closed for fair play left out; equal ratings share a rank",
        [*BOARD, LIMIT, CURSOR, _query("active_days", "only players whose last rated game is at most this many "
                                       "days old", {"type": "number", "exclusiveMinimum": 0, "maximum": 999999})],
        _json(_ref("Leaderboard"))),
    "/v1/messages": _get(
        "What became of a message: applied (its changes), unrated and why, or unknown; who it left out and why",
        [_query("source", "the message's CloudEvents source (with id)",
                {"type": "string", "minLength": 1, "maxLength": 128}),
         _query("id", "the message's CloudEvents id (with source)", ID),
         _query("ref", "instead of source and id: the game, competition or puzzle id of a message that changed a "
                       "rating (404 for one that changed none: ask by source and id)", ID)],
        _json(_ref("Message")), {"401": _problem("the support token is configured and was not given", {
            "WWW-Authenticate": _header("the challenge: Bearer (RFC 6750)")})}, security=[{"support": []}]),
    "/v1/preview/{system}/{category}": _get(
        "The points at stake before a game: each player's rating change after a win, a draw and a loss",
        [*BOARD, _query("white", "White's player id", ID, True), _query("black", "Black's player id", ID, True),
         _query("at", "when the game would finish (default: now), in the years 1900 to 2999", AT)],
        _json(_ref("Preview")), {"409": _problem("the game would not be rated (a closed account, ...)")}),
    "/v1/fide/lists/{month}": {"get": {
        "summary": "FIDE's list of that month as published: listed players only, streamed",
        "parameters": [_path("month", "the list's month, YYYY-MM", {"type": "string", "pattern": "^[0-9]{4}-[0-9]{2}$"}),
                       _query("rating_type", "standard (default), rapid or blitz",
                              {"type": "string", "enum": ["standard", "rapid", "blitz"]})],
        "responses": {"200": {"description": "CSV: player_id,rating,games,k,inactive,birth_year (an empty cell: "
                                             "not known, or no birth year)",
                              "headers": {"Cache-Control": CACHE_CONTROL},
                              "content": {"text/csv": {"schema": {"type": "string"}}}}, **ERRORS,
                      "404": _problem("that month's list has not been applied yet"),
                      "410": _problem("a later list replaced it: only the newest list is served")}}},
}


def document() -> dict[str, Any]:
    return {
        "openapi": "3.1.0",
        "info": {"title": "rating-worker read API", "version": VERSION,
                 "description": "Ratings as the platform shows them, computed by the same engine and rules as "
                                "rating.changed, so that the two never disagree."},
        "paths": PATHS,
        "components": {"schemas": {**SCHEMAS, **_rating_changed()},
                       "securitySchemes": {"support": {"type": "http", "scheme": "bearer"}}},
    }


@functools.cache
def document_bytes() -> bytes:
    """The document as committed: indented, keys in order, a newline at the end."""
    return (json.dumps(document(), indent=2, ensure_ascii=False) + "\n").encode()
