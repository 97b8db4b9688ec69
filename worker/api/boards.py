"""`/v1/leaderboards/{system}/{category}`: the best established ratings, as `rating-worker leaderboard`
shows them (the same view: each system's established rule, accounts closed for fair play left out,
competition ranks ordered by player id), a page at a time.

A page starts after the last entry of the one before (its cursor holds that entry's rating and player
id): it is read from the board's index in order, so the first page of 100 reads about 100 index entries
on a board of any size, and an entry is neither repeated nor skipped because others moved, entered or
left in between (an offset would repeat or skip one each time). Only an entry whose own rating crossed
the cursor's in between is shown where it now is: a second time, or not at all. The ranks of a later
page are counted at its first entry (one index range up to it), on the board as it is then.
"""

from __future__ import annotations

import math
import time

from starlette.requests import Request
from starlette.responses import Response

from worker.api.problems import board, decode_cursor, encode_cursor, integer, positive
from worker.api.responses import BOARD, json_response
from worker.store.reads import OperatorReads, ranks

LIMIT, MOST = 100, 1000
DAY_S = 86400.0
FIRST = (math.inf, "")  # before every entry: the first page


async def leaderboard(request: Request) -> Response:
    system, category = board(request.path_params["system"], request.path_params["category"])
    limit = integer(request, "limit", LIMIT, 1, MOST)
    days = positive(request, "active_days")
    cursor = decode_cursor(request, "board", (int | float, str))
    since = None if days is None else time.time() - days * DAY_S
    async with request.app.state.db.acquire() as conn:
        reads = OperatorReads(conn)
        rows = await reads.leaderboard_page(system, category, limit + 1, tuple(cursor or FIRST), since)
        more, rows = len(rows) > limit, rows[:limit]
        above = position = 0
        if cursor is not None and rows:
            ahead = await reads.leaderboard_ahead(system, category, rows[0]["rating"], rows[0]["player_id"], since)
            above, position = ahead["above"], ahead["above"] + ahead["tied_before"]
    ratings = [r["rating"] for r in rows]
    items = [{"rank": rank, "player_id": r["player_id"], "rating": r["rating"], "rd": r["rd"], "games": r["games"],
              "last_played_at": r["last_played_at"]} for rank, r in zip(ranks(ratings, above, position), rows, strict=True)]
    last = rows[-1] if rows else None
    return json_response(request, {
        "system": system, "category": category, "active_days": days, "items": items,
        "next": encode_cursor("board", last["rating"], last["player_id"]) if more and last is not None else None,
    }, BOARD)

