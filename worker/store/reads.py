"""The reads of PostgreSQL for people, behind one object (procrastinate's "manager" habit): what
`rating-worker player`, `message`, `leaderboard` and `outbox` show, the demo's screen, and the read API's
answers (worker.api), so that the commands and the API read the same rows.

`OperatorReads` takes anything that runs asyncpg's fetch, fetchrow and fetchval: a connection (set up by
worker.store.postgres.init_connection, for the jsonb codec) or a pool; whoever opened it closes it. The
rows come back as asyncpg gives them; every statement is in sql/queries.sql. Nothing here writes.
"""

from __future__ import annotations

import sys
from array import array
from collections.abc import AsyncIterator, Sequence
from datetime import datetime
from typing import Any

from worker.contract.types import WITHOUT_REF
from worker.ratings.state import RatingState
from worker.store.queries import QUERIES

#: Rows a cursor fetches at a time from a long read (a FIDE list)
PREFETCH = 2000


def ranks(ratings: Sequence[float], before: tuple[float, int, int] | None = None) -> list[int]:
    """Competition ranks of a page of ratings in descending order: equal ratings share a rank, and the next
    one skips as many (1, 2, 2, 4), so that a rank says how many are above. A later page continues from
    the entry `before` it: its (rating, rank, position from 1)."""
    previous, rank, position = before or (None, 0, 0)
    out: list[int] = []
    for i, rating in enumerate(ratings):
        if rating != previous:
            rank = position + i + 1
        out.append(rank)
        previous = rating
    return out


class OperatorReads:
    """The operator's questions, one method each, each one statement (two for a message's changes)."""

    def __init__(self, db: Any) -> None:
        self.db = db

    # A player (`rating-worker player`)

    async def player_account(self, player_id: str):
        """His account row (closed, and why), or None for a player never seen."""
        return await self.db.fetchrow(QUERIES["player_account"], player_id)

    async def player_ratings(self, player_id: str, systems: Sequence[str]):
        """Every rating of his in these systems (those that publish ratings), as last published."""
        return await self.db.fetch(QUERIES["player_ratings"], player_id, list(systems))

    async def player_series(self, player_id: str, system: str | None, category: str | None, changes: int):
        """His ratings' histories for the charts: each rating's last `changes` changes, oldest first."""
        return await self.db.fetch(QUERIES["player_series"], player_id, system, category, changes)

    async def player_history(self, player_id: str, limit: int, system: str | None, category: str | None):
        """His latest `limit` changes, newest first, as published."""
        return await self.db.fetch(QUERIES["player_history"], player_id, limit, system, category)

    async def player_unrated(self, player_id: str, limit: int, system: str | None):
        """The latest `limit` valid messages that left him unchanged, and why, newest first."""
        return await self.db.fetch(QUERIES["player_unrated"], player_id, limit, system)

    # A message (`rating-worker message`)

    async def message_processed(self, source: str, message_id: str):
        """The processed message's row, or None: never processed."""
        return await self.db.fetchrow(QUERIES["message_processed"], source, message_id)

    async def message_changes(self, source: str, message_id: str, ref: str | None, message_type: str):
        """The rating changes it caused (`message_processed`'s `ref` and `type`): by its ref (a game,
        competition, puzzle or list); by its source and id in the months' index of causes without a ref
        (migration 0015) for a type that has none; for a message processed before migration 0005, which did
        not keep its ref, by a scan of the history."""
        if ref is not None:
            return await self.db.fetch(QUERIES["message_changes_by_ref"], source, message_id, ref)
        if message_type in WITHOUT_REF:
            return await self.db.fetch(QUERIES["message_changes_without_ref"], source, message_id)
        return await self.db.fetch(QUERIES["message_changes_by_cause"], source, message_id)

    async def message_unrated(self, source: str, message_id: str):
        """The players it left unchanged, and why."""
        return await self.db.fetch(QUERIES["message_unrated"], source, message_id)

    # Leaderboards, the outbox, the demo

    async def leaderboard(self, system: str, category: str, top: int, active_since: float | None = None):
        """The `top` best established ratings; with `active_since` (epoch seconds), of the players who
        played since then."""
        if active_since is None:
            return await self.db.fetch(QUERIES["leaderboard"], system, category, top)
        return await self.db.fetch(QUERIES["leaderboard_active"], system, category, top, active_since)

    async def outbox_oldest(self):
        """The outbox's backlog and its oldest unpublished change."""
        return await self.db.fetchrow(QUERIES["outbox_oldest"])

    async def demo_status(self):
        """Changes awaiting publication, and the newest change's id."""
        return await self.db.fetchrow(QUERIES["demo_status"])

    async def provisional_movers(self, after_change: int, top: int):
        """The CSR ratings still provisional that moved most through the changes after that id."""
        return await self.db.fetch(QUERIES["provisional_movers"], after_change, top)

    async def processed_from(self, source: str) -> int:
        """How many messages of this source were processed."""
        return await self.db.fetchval(QUERIES["demo_processed"], source)

    # The read API's own (worker.api)

    async def player_boards(self, player_id: str, systems: Sequence[str]):
        """His ratings that stand on their leaderboards: system, category, rating."""
        return await self.db.fetch(QUERIES["player_boards"], player_id, list(systems))

    async def board_ratings(self, system: str, category: str) -> array:
        """Every rating on a leaderboard, lowest first (read as one value: see the query)."""
        ratings = array("d", await self.db.fetchval(QUERIES["board_ratings"], system, category))
        if sys.byteorder == "little":  # float8send writes network order
            ratings.byteswap()
        return ratings

    async def leaderboard_page(self, system: str, category: str, limit: int, after: tuple[float, str],
                               active_since: float | None):
        """The `limit` entries after `after` (rating, player id) in the board's order."""
        if active_since is None:
            return await self.db.fetch(QUERIES["leaderboard_page"], system, category, limit, *after)
        return await self.db.fetch(QUERIES["leaderboard_page_active"], system, category, limit, *after,
                                   active_since)

    async def rating_history(self, player_id: str, system: str, category: str, after_version: int,
                             since: datetime | None, until: datetime | None, limit: int, newest_first: bool):
        """One rating's history rows from a version on (newest first: before it), in a time window."""
        if newest_first:
            return await self.db.fetch(QUERIES["rating_history_desc"], player_id, system, category, after_version,
                                       since, until, limit)
        return await self.db.fetch(QUERIES["rating_history"], player_id, system, category, after_version, since,
                                   until, limit)

    async def message_records(self, source: str, message_id: str, ref: str | None, message_type: str):
        """The history rows a message caused, to rebuild their rating.changed (found as `message_changes`)."""
        if ref is not None:
            return await self.db.fetch(QUERIES["message_records_by_ref"], source, message_id, ref)
        if message_type in WITHOUT_REF:
            return await self.db.fetch(QUERIES["message_records_without_ref"], source, message_id)
        return await self.db.fetch(QUERIES["message_records_by_cause"], source, message_id)

    async def messages_with_ref(self, ref: str):
        """The (cause_source, cause_id) of the messages whose rating changes carry this ref, at most two."""
        return await self.db.fetch(QUERIES["messages_with_ref"], ref)

    async def fide_list_applied(self, month: str) -> bool:
        """Whether the worker has applied FIDE's list of that month (its rating.period_closed)."""
        return await self.db.fetchval(QUERIES["fide_list_applied"], month)

    async def fide_states(self, category: str) -> AsyncIterator[tuple[str, RatingState]]:
        """Every stored FIDE state of a rating type, by player id, read through a cursor (a list is long).
        Needs a connection, not a pool: the cursor lives in a transaction."""
        async with self.db.transaction(readonly=True):
            async for r in self.db.cursor(QUERIES["fide_states"], category, prefetch=PREFETCH):
                yield r["player_id"], RatingState(r["rating"], r["rd"], r["volatility"], r["games"], r["peak"],
                                                  r["last_at"], r["version"], r["extra"])
