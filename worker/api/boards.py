"""`/v1/leaderboards/{system}/{category}`: the best established ratings, as `rating-worker leaderboard`
shows them (the same view: each system's established rule, accounts closed for fair play left out,
competition ranks ordered by player id), a page at a time.

A page starts after the last entry of the one before: its cursor holds that entry's rating, player id,
rank and position. It is read from the board's index in order, so a page of 100 reads about 100 index
entries wherever it is on a board of any size, and an entry is neither repeated nor skipped because
others moved, entered or left in between (an offset would repeat or skip one each time). Only an entry
whose own rating crossed the cursor's in between is shown where it now is: a second time, or not at all.
A later page's ranks go on from the cursor's, as the pages before it numbered the board: counting every
entry above a page cost what its position is (18 ms in the middle of a board of 280,000, over a second at
p99 with a worker writing beside it: docs/performance.md).
"""

from __future__ import annotations

import math
import time

from starlette.requests import Request
from starlette.responses import Response

from worker.api.problems import bad, board, decode_cursor, encode_cursor, integer, positive
from worker.api.responses import BOARD, json_response
from worker.store.reads import OperatorReads, ranks

LIMIT, MOST = 100, 1000
DAY_S = 86400.0
FIRST = (math.inf, "")  # before every entry: the first page


async def leaderboard(request: Request) -> Response:
    system, category = board(request.path_params["system"], request.path_params["category"])
    limit = integer(request, "limit", LIMIT, 1, MOST)
    days = positive(request, "active_days")
    cursor = decode_cursor(request, "board", (int | float, str, int, int))
    if cursor is not None and not 1 <= cursor[2] <= cursor[3]:
        raise bad("cursor", "not a cursor of this list: use the `next` of a previous page as it is")
    since = None if days is None else time.time() - days * DAY_S
    rows = await OperatorReads(request.app.state.db).leaderboard_page(
        system, category, limit + 1, (cursor[0], cursor[1]) if cursor else FIRST, since)
    more, rows = len(rows) > limit, rows[:limit]
    before = (cursor[0], cursor[2], cursor[3]) if cursor else None
    items = [{"rank": rank, "player_id": r["player_id"], "rating": r["rating"], "rd": r["rd"], "games": r["games"],
              "last_played_at": r["last_played_at"]}
             for rank, r in zip(ranks([r["rating"] for r in rows], before), rows, strict=True)]
    position = (cursor[3] if cursor else 0) + len(items)
    last = items[-1] if more else None
    return json_response(request, {
        "system": system, "category": category, "active_days": days, "items": items,
        "next": encode_cursor("board", last["rating"], last["player_id"], last["rank"], position) if last else None,
    }, BOARD)

