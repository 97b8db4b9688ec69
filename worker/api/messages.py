"""`/v1/messages?source=&id=` (what became of a message: support's "why did my rating not change?") and
`/v1/preview/{system}/{category}?white=&black=` (the points at stake before a game)."""

from __future__ import annotations

import hmac
import time

import orjson
from starlette.requests import Request
from starlette.responses import Response

from worker.api.problems import Problem, board, query_id, time_param
from worker.api.responses import NEVER, PRIVATE, json_response
from worker.ratings.reasons import explain
from worker.store.postgres import PostgresTx, payload_of
from worker.store.reads import OperatorReads

# A game finishing outside these years is a client's mistake, not a preview: the engine's calendars (FIDE's
# periods, US Chess's) reach past a datetime's year 9999 from a game in it.
PREVIEW_YEARS = (1900, 2999)


def check_token(request: Request) -> None:
    """The support token, when one is configured: `Authorization: Bearer <token>` (compared in constant
    time), else 401 with the challenge RFC 6750 asks for."""
    token = request.app.state.config.support_token
    if not token:
        return
    scheme, _, given = request.headers.get("authorization", "").partition(" ")
    if scheme.lower() != "bearer" or not hmac.compare_digest(given.strip().encode(), token.encode()):
        raise Problem(401, "authorization: this route needs the support token (Authorization: Bearer ...)",
                      "authorization", {"WWW-Authenticate": 'Bearer realm="rating-worker"'})


async def message(request: Request) -> Response:
    check_token(request)
    by_ref = "ref" in request.query_params and not ("source" in request.query_params or "id" in request.query_params)
    ref = query_id(request, "ref") if by_ref else None
    source = None if by_ref else query_id(request, "source")
    message_id = None if by_ref else query_id(request, "id")
    async with request.app.state.db.acquire() as conn:
        reads = OperatorReads(conn)
        if ref is not None:
            source, message_id = await _by_ref(reads, ref)
        row = await reads.message_processed(source, message_id)
        records, left_out = [], []
        if row is not None:
            records = await reads.message_records(source, message_id, row["ref"], row["type"])
            left_out = await reads.message_unrated(source, message_id)
    if row is None:
        return json_response(request, {
            "source": source, "id": message_id, "status": "unknown", "reason": None, "explanation": None,
            "changes": [], "left_out": [],
        }, PRIVATE)
    return json_response(request, {
        "source": source, "id": message_id, "status": row["outcome"], "type": row["type"], "ref": row["ref"],
        "reason": row["reason"], "explanation": explain(row["reason"]) or None,
        "processed_at": row["processed_at"], "duplicates": row["duplicates"],
        "changes": [orjson.loads(payload_of(r))["data"] for r in records],
        "left_out": [{"player_id": x["player_id"], "system": x["system"], "reason": x["reason"],
                      "explanation": explain(x["reason"])} for x in left_out],
    }, PRIVATE)


async def _by_ref(reads: OperatorReads, ref: str) -> tuple[str, str]:
    """The one message whose rating changes carry this ref (a game, competition or puzzle id): found through
    the history's index of causes (each month's, day by day), so only a message that changed a rating; one
    that changed none (a casual game) is asked for by its source and id."""
    found = await reads.messages_with_ref(ref)
    if not found:
        raise Problem(404, "ref: no message with this ref changed a rating: a message that changed none (a casual "
                           "game, a guest) is found by its source and id", "ref")
    if len(found) > 1:
        raise Problem(400, f"ref: {len(found)} messages have this ref (from several sources): give source and id",
                      "ref")
    return found[0]["cause_source"], found[0]["cause_id"]


async def preview(request: Request) -> Response:
    from worker.engine.preview import PREVIEWS, NotRatable, PreviewUnsupported, points_at_stake

    system, category = board(request.path_params["system"], request.path_params["category"])
    if category not in PREVIEWS.get(system, ()):
        raise Problem(404, f"system: no preview of {system} {category}: one of "
                           f"{', '.join(f'{s} {c}' for s, cs in PREVIEWS.items() for c in cs)}", "system")
    white = query_id(request, "white")
    black = query_id(request, "black")
    if white == black:
        raise Problem(400, "black: the same player as white", "black")
    at = time_param(request, "at", PREVIEW_YEARS)
    when = time.time() if at is None else at.timestamp()
    async with request.app.state.db.acquire() as conn:
        try:
            stakes = await points_at_stake(PostgresTx(conn), system, category, white, black, when)
        except PreviewUnsupported as exc:
            raise Problem(404, f"system: {exc}", "system") from None
        except NotRatable as exc:
            raise Problem(409, f"{exc.reason}: {explain(exc.reason)}", "white") from None
    return json_response(request, {"system": system, "category": category, "white_id": white, "black_id": black,
                                   **stakes}, NEVER)
