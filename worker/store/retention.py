"""Retention's statements (sql/queries.sql, "Retention"): expired processed ids and unrated rows removed in
chunks, and the readings an operator watches (the oldest rows kept, the tables' sizes).

Each chunk is its own short transaction on the caller's connection: short lock and statement timeouts (a
table lock held by a migration or a detach makes the chunk fail fast, not wait), then a transaction-level
advisory lock that one worker of the group holds at a time (the others skip), then one DELETE of at most
`limit` rows that skips the rows a batch holds. Nothing here waits for a batch.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass

import asyncpg

from worker.store.queries import QUERIES

#: The outcomes stored in processed_messages (worker.engine.compute), each a range of its expiry index
OUTCOMES = ("applied", "unrated")
#: The tables whose sizes an operator watches (issue 42): the ones that grow with the messages
BIG_TABLES = ("outbox", "processed_messages", "rating_changes", "ratings", "unrated_players")
LOCK_TIMEOUT = "1s"
STATEMENT_TIMEOUT = "30s"


@dataclass(frozen=True, slots=True)
class Removed:
    """What one chunk removed: processed ids, and unrated rows (with their ids, or by their own window)."""

    ids: int = 0
    unrated: int = 0


@dataclass(frozen=True, slots=True)
class Oldest:
    """The age in seconds of the oldest row kept of each kind (None: there is none)."""

    applied: float | None
    unrated_ids: float | None
    unrated_players: float | None


@asynccontextmanager
async def _chunk(conn: asyncpg.Connection) -> AsyncIterator[bool]:
    """One chunk's own transaction: True when this worker holds retention's lock (False: another one does)."""
    async with conn.transaction():
        await conn.execute(QUERIES["retention_limits"], LOCK_TIMEOUT, STATEMENT_TIMEOUT)
        yield await conn.fetchval(QUERIES["retention_lock"])


async def remove_processed(conn: asyncpg.Connection, outcome: str, window_s: float, limit: int) -> Removed | None:
    """Up to `limit` ids of this outcome stored more than `window_s` ago, oldest first, with their unrated
    rows; None when another worker is removing."""
    async with _chunk(conn) as mine:
        if not mine:
            return None
        row = await conn.fetchrow(QUERIES["retention_processed"], outcome, float(window_s), limit)
    return Removed(row["ids"], row["unrated"])


async def remove_unrated(conn: asyncpg.Connection, window_s: float, limit: int) -> Removed | None:
    """Up to `limit` unrated rows stored more than `window_s` ago; None when another worker is removing."""
    async with _chunk(conn) as mine:
        if not mine:
            return None
        row = await conn.fetchrow(QUERIES["retention_unrated"], float(window_s), limit)
    return Removed(0, row[0])


async def oldest(conn: asyncpg.Connection) -> Oldest:
    row = await conn.fetchrow(QUERIES["retention_oldest"])
    return Oldest(row["applied"], row["unrated_ids"], row["unrated_players"])


async def table_sizes(conn: asyncpg.Connection, tables: tuple[str, ...] = BIG_TABLES) -> dict[str, tuple[int, int]]:
    """Each table's (rows, indexes) bytes, summed over its partitions when it is partitioned."""
    rows = await conn.fetch(QUERIES["table_sizes"], list(tables))
    return {r["name"]: (r["table_bytes"], r["index_bytes"]) for r in rows}
