"""The PostgreSQL state store: one READ COMMITTED transaction per batch, players locked in order.

Round trips of one batch (`worker.engine.apply_batch`), whatever its size:

    BEGIN
    lock_players     2  insert the missing players, then SELECT ... FOR UPDATE (returns closures)
    processed        1
    closed_accounts  0  answered from what lock_players returned
    load_states      1  (a batch planned ahead: versions_changed, 1, and load_states only if the
                        plan no longer holds)
    save           1-4  `stage`: states, history rows, processed ids COPYed into the session's
                        staging tables (one round trip each, if any); a planned batch stages its rows
                        before it asks for its locks, while the batch ahead of it holds them (and, if
                        its plan no longer holds, clears them and stages again under the locks: up to
                        4 more); then `write_staged`: one statement moves them, with the outbox rows
                        and closures
    COMMIT

then, once the batch's rating.changed messages are acknowledged by the broker, `mark_published`
deletes the batch's rows from the narrow `outbox` table (the wide history rows are written once and
never updated).

A batch's writes travel by COPY (binary rows asyncpg encodes in C); its reads send their keys as one
jsonb parameter (JSON arrays written by orjson through the connection's jsonb codec) expanded by
jsonb_array_elements() on the server. History rows keep a change's values as columns; the outbox
relay rebuilds the rating.changed bytes from them.
See the header of `sql/queries.sql` for why (and the measurements). The SQL is all there.
"""

from __future__ import annotations

import math
from collections.abc import AsyncIterator, Iterable, Mapping, Sequence
from contextlib import asynccontextmanager
from typing import Any

import asyncpg
import orjson

from worker.contract.changed import ChangeRecord, encode_change
from worker.ratings.inputs import GameSide
from worker.ratings.state import RatingState, StateKey
from worker.ratings.system import HistoryQuery, RatingsQuery
from worker.store import connection
from worker.store.base import ProcessedMessage, Unpublished
from worker.store.months import Months, month_gone, side_connection
from worker.store.queries import QUERIES

FAIR_PLAY = "fair_play"
_SIDE = {"application_name": "rating-worker months"}  # the connection that creates the history's months


def _encode_jsonb(value: Any) -> bytes:
    # jsonb binary format: a version byte (1) then the JSON text.
    return b"\x01" + orjson.dumps(value)


def _decode_jsonb(data: bytes) -> Any:
    return orjson.loads(data[1:])


async def init_connection(conn: asyncpg.Connection) -> None:
    """Per connection: jsonb <-> Python values with orjson, in the binary format.

    Without it asyncpg wants jsonb as str (and a dict would have to be dumped by hand, twice-encoded
    if dumped into a json string by mistake); with it `extra` goes in and out as a dict.
    """
    await conn.set_type_codec(
        "jsonb", schema="pg_catalog", encoder=_encode_jsonb, decoder=_decode_jsonb, format="binary"
    )


async def init_store_connection(conn: asyncpg.Connection) -> None:
    """Per connection of a store's pool: the codecs, and the session's staging tables `save` COPYs
    into (queries.sql, create_staging). Not on the operator's read-only connections: a read replica
    can not create them."""
    await init_connection(conn)
    await conn.execute(QUERIES["create_staging"])


class PostgresTx:
    """The `StoreTx` of one batch transaction, on one connection."""

    __slots__ = ("_conn", "_locked", "_months", "_staged")

    def __init__(self, conn: asyncpg.Connection, months: Months | None = None) -> None:
        self._conn = conn
        self._months = months  # the history's months, created before rows are written into them
        # Players locked by this transaction -> fair-play closure time or None. Their rows can not
        # change under us until we commit, so closed_accounts answers from here.
        self._locked: dict[str, float | None] = {}
        self._staged: tuple | None = None  # what `stage` COPYed, for `write_staged`

    async def lock_players(self, player_ids: Sequence[str]) -> None:
        if not player_ids:
            return
        ids = list(player_ids)
        await self._conn.execute(QUERIES["lock_players_insert"], ids)
        rows = await self._conn.fetch(QUERIES["lock_players_select"], ids)
        locked = self._locked
        for player_id, reason, closed_at in rows:
            locked[player_id] = closed_at if reason == FAIR_PLAY else None

    async def processed(self, ids: Sequence[tuple[str, str]]) -> set[tuple[str, str]]:
        if not ids:
            return set()
        rows = await self._conn.fetch(QUERIES["processed"], list(ids))
        return {(source, ident) for source, ident in rows}

    async def closed_accounts(self, player_ids: Sequence[str]) -> dict[str, float]:
        locked = self._locked
        closed: dict[str, float] = {}
        others: list[str] = []
        for p in player_ids:
            if p in locked:
                at = locked[p]
                if at is not None:
                    closed[p] = at
            else:
                others.append(p)
        if others:
            for player_id, closed_at in await self._conn.fetch(QUERIES["closed_accounts"], others):
                closed[player_id] = closed_at
        return closed

    async def load_states(self, keys: Iterable[StateKey]) -> dict[StateKey, RatingState]:
        # Rows come back keyed by the caller's own key objects (a plain tuple is equal to, and
        # hashes like, the StateKey NamedTuple, and is ~10x cheaper to build); orjson does not
        # serialize NamedTuples, hence the plain tuples in the parameter too.
        wanted = {(k[0], k[1], k[2]): k for k in keys}
        if not wanted:
            return {}
        rows = await self._conn.fetch(QUERIES["load_states"], list(wanted))
        return {
            wanted[(p, s, c)]: RatingState(rating, rd, vol, games, peak, last_at, version, extra)
            for p, s, c, rating, rd, vol, games, peak, last_at, version, extra in rows
        }

    async def scan_states(self, system: str, after: StateKey | None, limit: int) -> list[tuple[StateKey, RatingState]]:
        p, c = (after[0], after[2]) if after is not None else ("", "")
        rows = await self._conn.fetch(QUERIES["scan_states"], system, p, c, limit)
        return [(StateKey(p, s, c), RatingState(rating, rd, vol, games, peak, last_at, version, extra))
                for p, s, c, rating, rd, vol, games, peak, last_at, version, extra in rows]

    async def versions_changed(self, expected: Mapping[StateKey, int]) -> set[StateKey]:
        if not expected:
            return set()
        rows = expected.items()
        wanted = [(k[0], k[1], k[2], v) for k, v in rows]
        changed = await self._conn.fetch(QUERIES["versions_changed"], wanted)
        if not changed:
            return set()
        keys = list(expected)
        return {keys[i - 1] for (i,) in changed}

    async def games_with(self, query: HistoryQuery) -> list[GameSide]:
        rows = await self._conn.fetch(
            QUERIES["games_with"], query.player_id, query.system, query.cause_type, query.since, query.until
        )
        return [GameSide(*row) for row in rows]

    async def ratings_at_most(self, query: RatingsQuery) -> dict[str, float]:
        rows = await self._conn.fetch(QUERIES["ratings_at_most"], query.system, query.category, query.rd_at_most)
        return dict(rows)

    async def save(
        self,
        states: dict[StateKey, RatingState],
        records: Sequence[ChangeRecord],
        processed: Sequence[ProcessedMessage],
        closures: dict[str, float],
    ) -> list[int]:
        await self.stage(states, records, processed, closures)
        return await self.write_staged()

    async def stage(
        self,
        states: dict[StateKey, RatingState],
        records: Sequence[ChangeRecord],
        processed: Sequence[ProcessedMessage],
        closures: dict[str, float],
    ) -> None:
        conn = self._conn
        if self._staged is not None:
            await conn.execute(QUERIES["clear_staging"])  # a plan's rows, staged before it failed its check
        self._staged = (states, records, processed, closures)
        await copy_staged(conn, state_rows(states), change_rows(records), processed_rows(processed))

    async def write_staged(self) -> list[int]:
        if self._staged is None:
            return []
        states, records, processed, closures = self._staged
        if not (states or records or processed or closures):
            return []
        self._check_locked(states, records, closures)
        # Checked here, not when staged: a plan's rows that are replaced (its check failed) are never written.
        check_finite(states, records, closures)
        if records and self._months is not None:
            await self._months.ensure([r.changed_at for r in records])
        try:
            rows = await self._conn.fetch(QUERIES["save"], unrated_rows(processed), list(closures.items()), True)
        except asyncpg.CheckViolationError as exc:
            if (gone := month_gone(exc)) is None or self._months is None:
                raise
            self._months.forget()
            raise gone from exc
        if not records:
            return []
        by_event = {event_id: row_id for row_id, event_id in rows}
        return [by_event[r.event_id] for r in records]

    def _check_locked(
        self, states: dict[StateKey, RatingState], records: Sequence[ChangeRecord], closures: dict[str, float]
    ) -> None:
        """Every player written must be locked by this transaction: an unlocked one could be
        written by another batch at the same time (lost update, duplicate version), and locking
        its row here, out of order, could deadlock."""
        locked = self._locked
        for p in closures:
            if p not in locked:
                raise ValueError(f"closure of player {p!r}, who was not locked in this transaction")
        for k in states:
            if k[0] not in locked:
                raise ValueError(f"state {tuple(k)} written for a player not locked in this transaction")
        for r in records:
            if r.key[0] not in locked:
                raise ValueError(
                    f"change {r.event_id} for player {r.key[0]!r}, not locked in this transaction"
                )


def state_rows(states: Mapping[StateKey, RatingState]) -> list[tuple]:
    """`staged_states` rows (queries.sql, create_staging) of these states."""
    return [(k[0], k[1], k[2], v.rating, v.rd, v.volatility, v.games, v.peak, v.last_at, v.version, v.extra)
            for k, v in states.items()]


def change_rows(records: Sequence[ChangeRecord], start: int = 0) -> list[tuple]:
    """`staged_changes` rows of these history rows, `ord` counted from `start` (their order of ids)."""
    return [
        (i, r.event_id, k[0], k[1], k[2], r.version, r.rating, r.delta, r.cause_type, r.cause_source,
         r.cause_id, r.cause_ref, r.changed_at, *r.before, *r.after, r.provisional, r.floor, r.games,
         r.time, r.inactive, r.parameters)
        for i, r in enumerate(records, start)
        for k in (r.key,)
    ]  # fmt: skip


class ChangeRow:
    """Positions in a `change_rows` row (staged_changes' columns), for code that reads the rows back."""

    PLAYER, SYSTEM, CATEGORY, RATING, DELTA, CAUSE_TYPE, SOURCE, ID, REF, AT = 2, 3, 4, 6, 7, 8, 9, 10, 11, 12


def processed_rows(processed: Sequence[ProcessedMessage]) -> list[tuple]:
    """`staged_processed` rows of these processed messages."""
    return [(m.source, m.id, m.type, m.outcome, m.reason, m.duplicates, m.ref) for m in processed]


def unrated_rows(processed: Sequence[ProcessedMessage]) -> list[tuple]:
    """`save`'s $1: a row per player a processed message left unchanged, with why (migration 0005)."""
    return [(pid, m.source, m.id, m.system, why, m.at) for m in processed for pid, why in m.left_out]


async def copy_staged(conn: asyncpg.Connection, states: list[tuple], changes: list[tuple],
                      processed: list[tuple]) -> None:
    """COPY rows into the session's staging tables, one round trip per table with rows."""
    if states:
        await conn.copy_records_to_table("staged_states", records=states)
    if changes:
        await conn.copy_records_to_table("staged_changes", records=changes)
    if processed:
        await conn.copy_records_to_table("staged_processed", records=processed)


async def history_payloads(conn: asyncpg.Connection) -> list[bytes]:
    """The rating.changed bytes of every history row, in order (for checks and audits)."""
    return [payload_of(r) for r in await conn.fetch(QUERIES["history_rows"])]


def payload_of(row: asyncpg.Record) -> bytes:
    """The rating.changed bytes of a history row: stored (before migration 0003) or rebuilt from its
    columns, byte for byte as first published."""
    if row["payload"] is not None:
        return bytes(row["payload"])
    return encode_change(ChangeRecord(
        row["event_id"], StateKey(row["player_id"], row["system"], row["category"]), row["version"], row["rating"],
        row["delta"], row["cause_type"], row["cause_source"], row["cause_id"], row["cause_ref"], row["changed_at"],
        b"", (row["before_rating"], row["before_rd"], row["before_volatility"]),
        (row["after_rating"], row["after_rd"], row["after_volatility"]), row["provisional"], row["floor"],
        row["games"], row["cause_time"], row["inactive"], row["parameters"],
    ))


def check_finite(
    states: dict[StateKey, RatingState], records: Sequence[ChangeRecord], closures: dict[str, float]
) -> None:
    """Refuse NaN and infinities (the worker's batches, backfill's chunks): JSON has no such numbers (orjson
    would write null), so they would be stored as NULL, or fail a NOT NULL with a confusing message. One sum per field: any
    non-finite term makes the sum non-finite; only then look for the culprit."""
    total = 0.0
    for v in states.values():
        total += v.rating + (v.rd or 0.0) + (v.volatility or 0.0) + (v.peak or 0.0) + (v.last_at or 0.0)
    for r in records:
        total += (r.rating or 0.0) + r.delta + r.changed_at
    total += sum(closures.values())
    if math.isfinite(total):
        return
    for k, v in states.items():
        for name in ("rating", "rd", "volatility", "peak", "last_at"):
            x = getattr(v, name)
            if x is not None and not math.isfinite(x):
                raise ValueError(f"state {tuple(k)} has {name}={x}: not a finite number")
    for r in records:
        for name in ("rating", "delta", "changed_at"):
            x = getattr(r, name)
            if x is not None and not math.isfinite(x):
                raise ValueError(f"change {r.event_id} of {tuple(r.key)} has {name}={x}: not a finite number")
    for p, at in closures.items():
        if not math.isfinite(at):
            raise ValueError(f"closure of {p!r} at {at}: not a finite number")


class PostgresStore:
    """`StateStore` on an asyncpg pool. Build with `await PostgresStore.connect(url)`."""

    def __init__(self, pool: asyncpg.Pool, url: str | None = None) -> None:
        self._pool = pool
        # The history's months (worker.store.months), created on a connection of their own; the pool's when
        # the store was given no URL.
        self.months = Months(side_connection(lambda: connection.connect(url, server_settings=_SIDE)) if url is not None else pool.acquire)

    @classmethod
    async def connect(
        cls, url: str, min_size: int = 1, max_size: int = 4, **pool_kwargs: Any
    ) -> PostgresStore:
        pool = await create_pool(url, min_size=min_size, max_size=max_size, **pool_kwargs)
        return cls(pool, url)

    @property
    def pool(self) -> asyncpg.Pool:
        return self._pool

    async def close(self) -> None:
        await self._pool.close()

    @asynccontextmanager
    async def transaction(self) -> AsyncIterator[PostgresTx]:
        async with self._pool.acquire() as conn, conn.transaction(isolation="read_committed"):
            yield PostgresTx(conn, self.months)

    @asynccontextmanager
    async def reader(self) -> AsyncIterator[PostgresTx]:
        """Reads without a transaction or locks: the snapshot a batch is planned from."""
        async with self._pool.acquire() as conn:
            yield PostgresTx(conn)

    async def mark_published(self, row_ids: Sequence[int]) -> None:
        """Take these history rows out of the outbox (ids not in it are ignored)."""
        if row_ids:
            await self._pool.execute(QUERIES["mark_published"], list(row_ids))

    async def unpublished(self, limit: int, older_than_seconds: float) -> list[Unpublished]:
        rows = await self._pool.fetch(QUERIES["unpublished"], limit, float(older_than_seconds))
        return [Unpublished(r[0], r["player_id"], payload_of(r)) for r in rows]

    async def outbox_backlog(self) -> int:
        """How many history rows are not published yet (the outbox's size), for a gauge."""
        return await self._pool.fetchval(QUERIES["outbox_backlog"])

    def short_histories(self) -> dict[HistoryQuery, float]:
        return {}  # it keeps the whole history


async def create_pool(url: str, min_size: int = 1, max_size: int = 4, **kwargs: Any) -> asyncpg.Pool:
    """An asyncpg pool whose connections all have the store's codecs, staging tables and settings."""
    settings = {"application_name": "rating-worker", "jit": "off"}
    settings.update(kwargs.pop("server_settings", None) or {})
    return await connection.create_pool(
        url, min_size=min_size, max_size=max_size, init=init_store_connection, server_settings=settings, **kwargs)
