"""`/v1/players/{player_id}` (every rating of a player, as the Account tab shows it),
`/v1/players/{player_id}/history/{system}/{category}` (one rating's `rating.changed` records, as published)
and `/v1/players/{player_id}/unrated` (the messages that changed none of his ratings, and why).
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any

import orjson
from starlette.requests import Request
from starlette.responses import Response

from worker.api.problems import (
    Problem,
    board,
    choice,
    decode_cursor,
    encode_cursor,
    integer,
    path_id,
    time_param,
)
from worker.api.responses import FRESH, json_response
from worker.engine.preview import PREVIEWS, first_game_start
from worker.ratings.reasons import explain
from worker.ratings.registry import RATINGS, SYSTEMS
from worker.ratings.state import RatingState, StateKey
from worker.store.postgres import payload_of
from worker.store.reads import OperatorReads

LIMIT, MOST = 100, 1000  # a history page's default and largest size
UNRATED_LIMIT = 20  # the unrated messages shown by default: the latest few answer "why did it not count?"
NEWEST = 2**31 - 1  # above every version: a newest-first history starts below it


def _value(v: Any) -> Any:
    # jsonb fields come back decoded by the connection's codec; text from a jsonb -> is a str.
    return orjson.loads(v) if isinstance(v, str | bytes) else v


def _entry(r: Mapping, place: tuple[int, float] | None) -> dict[str, Any]:
    """One stored rating as published (the latest change's shown rating, provisional mark and floor), with
    its rank and percentile on its leaderboard (worker.api.standings) when it stands on it."""
    rank, percentile = place or (None, None)
    return {
        "system": r["system"], "category": r["category"],
        "rating": _value(r["shown"]) if r["version"] else r["rating"],
        "rd": r["rd"], "volatility": r["volatility"], "provisional": bool(_value(r["provisional"])),
        "floor": _value(r["floor"]), "peak": r["peak"], "games": r["games"], "version": r["version"],
        "last_played_at": r["last_at"], "rank": rank, "percentile": percentile,
        "inactive": _value(r["inactive"]), "start": False,
    }


def _starts(player_id: str, stored: dict[StateKey, RatingState]) -> list[dict[str, Any]]:
    """The ratings he has not played yet that a system shows anyway (CSR's five speeds, a system whose
    players have a rating before their first game): each with the start the engine would rate his first
    game in it from now, from his other ratings (worker.engine.preview.first_game_start)."""
    now = time.time()
    out = []
    for system in SYSTEMS:
        if system.starts_unrated or system.name not in PREVIEWS:
            continue
        for category in system.categories:
            if StateKey(player_id, system.name, category) in stored:
                continue
            rating, rd, volatility = first_game_start(system.name, category, player_id, stored, now)
            state = RatingState(rating, rd, volatility)
            out.append({
                "system": system.name, "category": category, "rating": rating, "rd": rd, "volatility": volatility,
                "provisional": not system.established(state), "floor": None, "peak": None, "games": 0,
                "version": 0, "last_played_at": None, "rank": None, "percentile": None,
                "inactive": system.inactive(state), "start": True,
            })
    return out


async def player(request: Request) -> Response:
    player_id = path_id(request, "player_id")
    systems = list(RATINGS)
    async with request.app.state.db.acquire() as conn:
        reads = OperatorReads(conn)
        account = await reads.player_account(player_id)
        rows = await reads.player_ratings(player_id, systems)
        boards = await reads.player_boards(player_id, systems) if rows else []
    if account is None and not rows:
        raise Problem(404, f"player_id: no player {player_id!r} (never seen by the worker)", "player_id")
    stored = {StateKey(player_id, r["system"], r["category"]): RatingState(
        r["rating"], r["rd"], r["volatility"], r["games"], r["peak"], r["last_at_s"], r["version"], r["extra"])
        for r in rows}
    standings = request.app.state.standings
    places = {(b["system"], b["category"]): await standings.place(b["system"], b["category"], b["rating"])
              for b in boards}
    ratings = [_entry(r, places.get((r["system"], r["category"]))) for r in rows] + _starts(player_id, stored)
    ratings.sort(key=lambda e: (e["system"], RATINGS[e["system"]].index(e["category"])))
    closed = account is not None and account["closed_reason"] == "fair_play"
    return json_response(request, {
        "player_id": player_id, "closed": closed,
        "closed_at": account["closed_at"] if closed else None,
        "ratings": ratings,
    }, FRESH)


async def history(request: Request) -> Response:
    player_id = path_id(request, "player_id")
    system, category = board(request.path_params["system"], request.path_params["category"])
    limit = integer(request, "limit", LIMIT, 1, MOST)
    order = choice(request, "order", ("asc", "desc"))
    since, until = time_param(request, "from"), time_param(request, "to")
    if since is not None and until is not None and since > until:
        raise Problem(400, "from: later than to", "from")
    cursor = decode_cursor(request, f"history-{order}", (int,))
    after = cursor[0] if cursor is not None else (NEWEST if order == "desc" else 0)
    async with request.app.state.db.acquire() as conn:
        reads = OperatorReads(conn)
        rows = await reads.rating_history(player_id, system, category, after, since, until, limit + 1,
                                          order == "desc")
        if not rows and cursor is None and await reads.player_account(player_id) is None:
            raise Problem(404, f"player_id: no player {player_id!r} (never seen by the worker)", "player_id")
    items = [orjson.loads(payload_of(r))["data"] for r in rows[:limit]]
    more = len(rows) > limit
    return json_response(request, {
        "items": items, "next": encode_cursor(f"history-{order}", items[-1]["version"]) if more else None,
    }, FRESH)


async def unrated(request: Request) -> Response:
    """The latest valid messages that changed none of his ratings, and why, newest first by their own time:
    "why did my game not count?" (`rating-worker player --history` shows the same rows)."""
    player_id = path_id(request, "player_id")
    limit = integer(request, "limit", UNRATED_LIMIT, 1, MOST)
    async with request.app.state.db.acquire() as conn:
        reads = OperatorReads(conn)
        rows = await reads.player_unrated(player_id, limit, None)
        if not rows and await reads.player_account(player_id) is None:
            raise Problem(404, f"player_id: no player {player_id!r} (never seen by the worker)", "player_id")
    return json_response(request, {"player_id": player_id, "items": [{
        "source": r["source"], "id": r["id"], "type": r["type"], "ref": r["ref"], "system": r["system"],
        "reason": r["reason"], "explanation": explain(r["reason"]), "message_at": r["message_at"],
    } for r in rows]}, FRESH)
