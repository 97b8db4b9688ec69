"""Backfill's store (`rating-worker backfill`, issue 22 item 3): the engine rates against memory, and
PostgreSQL receives what it wrote in bulk, a large chunk per transaction.

The worker's store answers every read from PostgreSQL under row locks, one batch of about a thousand
messages per transaction. A backfill is the database's only writer (it refuses a database something else
wrote to), so the states it needs are the ones it wrote: they stay in memory (every state, every
player, every fair-play closure), read back from the database when a run resumes. What memory cannot hold
for a whole history is asked of the database, exactly as the worker asks it:

- whether a message was processed before: the chunks not yet committed first, then `processed_messages`
  (every id ever written, as the worker checks it: a duplicate any time later is still one);
- the games a fair-play closure refunds: `rating_changes`, plus the chunks not yet committed (a game the
  database already returns is not taken from them twice).

`flush` hands the chunk so far to a task that writes it in one transaction, with the same staging tables
and `save` statement as the worker (so the rows are the worker's, to the byte), the new players' lock
anchors, and where the history file stands (`backfill_progress`); the engine goes on rating the next chunk
meanwhile (the database works on its own core). One write is in flight at a time.

The backfill's bookkeeping is here too: its lock (one backfill per database), the runs so far
(`backfill_progress`), and what the database holds before a run starts.
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from sys import intern

import asyncpg

from worker.contract.changed import ChangeRecord
from worker.ratings.inputs import GameSide
from worker.ratings.state import RatingState, StateKey
from worker.ratings.system import HistoryQuery
from worker.store.base import ProcessedMessage
from worker.store.memory import MemoryStore, _MemoryTx
from worker.store.months import Months
from worker.store.postgres import (
    FAIR_PLAY,
    ChangeRow,
    PostgresTx,
    change_rows,
    check_finite,
    copy_staged,
    create_pool,
    processed_rows,
    state_rows,
    unrated_rows,
)
from worker.store.queries import QUERIES

__all__ = ["BulkStore", "Chunk", "Position", "backfill_runs", "backfill_written", "lock_backfill"]


@dataclass(frozen=True)
class Position:
    """Where a history file stands once a chunk is committed (a row of backfill_progress)."""

    head_digest: str  # sha256 (hex) of its first MiB: which file it is
    name: str
    digest: str  # sha256 (hex) of its bytes up to here
    bytes_done: int  # an offset just after a whole line
    lines_done: int
    finished: bool = False
    processed: int = 0  # rows the file's backfill wrote to processed_messages and rating_changes so far
    changes: int = 0  # (as read back from backfill_progress; a new position's are counted by the store)


async def lock_backfill(conn) -> bool:
    """Take the database's backfill lock for this connection's session; False: another backfill holds it."""
    return await conn.fetchval(QUERIES["backfill_lock"])


async def backfill_runs(conn):
    """Every history file backfilled into this database (backfill_progress), finished or not, in order."""
    return await conn.fetch(QUERIES["backfill_runs"])


async def backfill_written(conn):
    """(processed ids, whether any player or rating exists): what a backfill checks before it starts."""
    return await conn.fetchrow(QUERIES["backfill_written"])


@dataclass
class Chunk:
    """What the engine wrote since the last flush, as the database will receive it."""

    states: dict[StateKey, RatingState] = field(default_factory=dict)  # the last state of each key
    changes: list[tuple] = field(default_factory=list)  # staged_changes rows, in order
    messages: dict[tuple[str, str], ProcessedMessage] = field(default_factory=dict)  # first processed here
    repeats: dict[tuple[str, str], int] = field(default_factory=dict)  # more deliveries of earlier ones
    closures: dict[str, float] = field(default_factory=dict)
    players: list[str] = field(default_factory=list)  # seen for the first time: their lock anchors

    def processed(self) -> list[ProcessedMessage]:
        return [*self.messages.values(),
                *(ProcessedMessage(s, i, "", "duplicate", duplicates=n) for (s, i), n in self.repeats.items())]


class _BulkTx(_MemoryTx):
    """The memory transaction, with what memory does not hold asked of the database."""

    async def lock_players(self, player_ids: Sequence[str]) -> None:
        self._store.seen(player_ids)  # no lock: the backfill is the database's only writer

    async def processed(self, ids: Sequence[tuple[str, str]]) -> set[tuple[str, str]]:
        return await self._store.processed_of(ids)

    async def games_with(self, query: HistoryQuery) -> list[GameSide]:
        return await self._store.games_of(query)


class BulkStore(MemoryStore):
    def __init__(self, pool: asyncpg.Pool, publish: bool = False) -> None:
        super().__init__(packed=True)  # every player of the history, for the whole run
        del self.history, self.messages  # kept in the database, and in the chunks until they are there
        self._pool = pool
        self.publish = publish  # the history's changes go to the outbox, for the worker's relay to publish
        self._players: set[str] = set()
        self.chunk = Chunk()
        self._writing: Chunk | None = None  # the chunk being written, until its commit
        self._write: asyncio.Task | None = None
        self.written = {"processed": 0, "changes": 0}  # rows committed for the file (resume: from its row)
        self.months = Months(pool.acquire)  # the history's months: an old history's are created as it comes

    @classmethod
    async def open(cls, url: str, publish: bool = False) -> BulkStore:
        """A store on this database, holding every state, player and closure already in it."""
        pool = await create_pool(url, min_size=2, max_size=2)
        store = cls(pool, publish)
        try:
            await store._load()
        except BaseException:
            await pool.close()
            raise
        return store

    async def _load(self) -> None:
        async with self._pool.acquire() as conn:
            async with conn.transaction(isolation="repeatable_read", readonly=True):
                async for p, s, c, *values in conn.cursor(QUERIES["backfill_states"], prefetch=10_000):
                    self.states[StateKey(p, s, c)] = RatingState(*values)
                for player_id, reason, closed_at in await conn.fetch(QUERIES["backfill_players"]):
                    self._players.add(intern(player_id))  # the string the packed states keep
                    if reason == FAIR_PLAY and closed_at is not None:
                        self.closures[player_id] = closed_at

    async def close(self) -> None:
        """End (a run stopped part way: the write in flight is rolled back; one that failed has raised
        already, or is being raised by the caller) and close the pool."""
        try:
            if self._write is not None:
                if not self._write.done():
                    self._write.cancel()
                await asyncio.gather(self._write, return_exceptions=True)  # its outcome taken: no "never retrieved"
        finally:
            await self._pool.close()

    # ---- the engine's transactions ---------------------------------------------------------------------

    @asynccontextmanager
    async def transaction(self):
        tx = _BulkTx(self)
        yield tx
        tx.commit()

    @asynccontextmanager
    async def reader(self):
        yield _BulkTx(self)

    def seen(self, player_ids: Sequence[str]) -> None:
        known = self._players
        for p in player_ids:
            if p not in known:
                p = intern(p)  # one string per player, shared with the packed states
                known.add(p)
                self.chunk.players.append(p)

    async def processed_of(self, ids: Sequence[tuple[str, str]]) -> set[tuple[str, str]]:
        # The chunks in memory first, then the database: a chunk leaves memory only once committed, so an
        # id found in neither was in none when the query began.
        found = {i for i in ids if i in self.chunk.messages or i in self.chunk.repeats}
        writing = self._writing
        if writing is not None:
            found.update(i for i in ids if i in writing.messages or i in writing.repeats)
        rest = [i for i in ids if i not in found]
        if rest:
            async with self._pool.acquire() as conn:
                found |= await PostgresTx(conn).processed(rest)
        return found

    async def games_of(self, query: HistoryQuery) -> list[GameSide]:
        """The worker's answer (queries.sql, games_with): the database's rows, then those of the chunk being
        written, then the current chunk's, in the order their ids will have. Without waiting for the write in
        flight (a closure a day would otherwise stall the engine for a chunk's commit each): a game's sides are
        all in one chunk, so a game the database returns is dropped from the chunks (the write committed while
        the query ran); the chunks are looked at before the query, and a chunk leaves them only once committed."""
        pending = [c.changes for c in (self._writing, self.chunk) if c is not None]
        async with self._pool.acquire() as conn:
            stored = await PostgresTx(conn).games_with(query)
        known = {(g.cause_source, g.cause_id) for g in stored}
        return stored + [side for rows in pending for side in _games_in(rows, query)
                         if (side.cause_source, side.cause_id) not in known]

    def next_row_ids(self, n: int) -> list[int]:
        return []  # the history's rows are not published by the engine's caller

    def commit(self, states: dict[StateKey, RatingState], records: list[ChangeRecord],
               processed: list[ProcessedMessage], closures: dict[str, float]) -> None:
        self._update(states, closures)
        chunk = self.chunk
        chunk.states.update(states)
        chunk.changes += change_rows(records, len(chunk.changes))
        chunk.closures.update(closures)
        for p in processed:
            ident = (p.source, p.id)
            if p.outcome != "duplicate":
                chunk.messages[ident] = p
            elif ident in chunk.messages:
                first = chunk.messages[ident]
                chunk.messages[ident] = first._replace(duplicates=first.duplicates + p.duplicates)
            else:
                chunk.repeats[ident] = chunk.repeats.get(ident, 0) + p.duplicates

    # ---- writing -----------------------------------------------------------------------------------------

    async def flush(self, position: Position) -> None:
        """Write the chunk so far and the file's `position` after it in one transaction of its own, while
        the engine goes on rating the next one; waits for the write before it to commit first."""
        await self.written_so_far()
        chunk, self.chunk = self.chunk, Chunk()
        _check_finite(chunk)
        self._writing = chunk
        self._write = asyncio.create_task(self._commit(chunk, position), name="backfill-write")

    async def written_so_far(self) -> None:
        """Wait for the write in flight (its error, if it failed, is raised here)."""
        if self._write is not None:
            write, self._write = self._write, None
            await write

    async def _commit(self, chunk: Chunk, position: Position) -> None:
        processed = chunk.processed()
        await self.months.ensure([row[ChangeRow.AT] for row in chunk.changes])  # before the chunk's transaction
        async with self._pool.acquire() as conn, conn.transaction():
            if chunk.players:
                await conn.copy_records_to_table("players", records=[(p,) for p in chunk.players],
                                                 columns=["player_id"])
            await copy_staged(conn, state_rows(chunk.states), chunk.changes, processed_rows(processed))
            await conn.execute(QUERIES["save"], unrated_rows(processed), list(chunk.closures.items()), self.publish)
            counts = (self.written["processed"] + len(chunk.messages), self.written["changes"] + len(chunk.changes))
            await conn.execute(QUERIES["backfill_record"], position.head_digest, position.name, position.digest,
                               position.bytes_done, position.lines_done, *counts, self.publish, position.finished)
        self.written["processed"], self.written["changes"] = counts
        self._writing = None


def _games_in(rows: list[tuple], query: HistoryQuery) -> list[GameSide]:
    """games_with's answer among history rows not yet in the database (`change_rows`), as queries.sql gives
    it: both sides of the player's games of that type in the window, in the rows' order."""
    c = ChangeRow
    causes = {(r[c.SOURCE], r[c.ID]) for r in rows
              if r[c.PLAYER] == query.player_id and r[c.SYSTEM] == query.system and r[c.CAUSE_TYPE] == query.cause_type
              and r[c.REF] is not None and query.since <= r[c.AT] <= query.until}
    return [GameSide(r[c.SOURCE], r[c.ID], r[c.PLAYER], r[c.CATEGORY], r[c.DELTA], r[c.AT])
            for r in rows if r[c.SYSTEM] == query.system and (r[c.SOURCE], r[c.ID]) in causes]


def _check_finite(chunk: Chunk) -> None:
    """Refuse NaN and infinities before they reach the database: the states and closures as the worker's
    store checks them (naming the culprit), the history rows (already rows) by their sum."""
    check_finite(chunk.states, [], chunk.closures)
    c = ChangeRow
    if not math.isfinite(sum((r[c.RATING] or 0.0) + r[c.DELTA] + r[c.AT] for r in chunk.changes)):
        raise ValueError("a change with a number that is not finite: nothing of this chunk is written")
