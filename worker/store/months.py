"""The history's months (migration 0012): `rating_changes` is partitioned by month of `changed_at`, and a
row can be written only into a month that exists.

- `Months`: the months a store knows to exist, and the missing ones created before a write needs them.
  The worker's batches, backfill's chunks and imports bring any changed_at (an old history, a producer's
  clock ahead), so before rows are written their times are checked against the months known: one
  comparison of the rows' earliest and latest time against the month that held the last write, nearly
  always. A month missing is created by `rating_changes_add_month` in a short transaction of its own, on
  a connection outside the batch's transaction (its lock on the parent must not wait for the batch, nor
  be held until the batch commits), with a lock_timeout and a few retries; the batch then writes.
- `MonthAdmin`: `rating-worker history`'s operations on one month: list, count, detach, archive, drop.
"""

from __future__ import annotations

import asyncio
from bisect import bisect_right
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Sequence
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from dataclasses import dataclass
from datetime import UTC, date, datetime

import asyncpg

from worker.store.queries import QUERIES

__all__ = ["LOCK_TIMEOUT", "MonthAdmin", "MonthInfo", "Months", "month_gone", "month_of", "side_connection"]

LOCK_TIMEOUT = "1s"  # a creating transaction's wait for the parent's lock (another month created or detached)
ATTEMPTS = 3  # then the batch fails as a transient error (55P03) and goes again after a backoff

Side = Callable[[], AbstractAsyncContextManager[asyncpg.Connection]]


def month_of(at: float) -> date:
    """The first day of the UTC month of a time (epoch seconds)."""
    return datetime.fromtimestamp(at, UTC).date().replace(day=1)


class Months:
    """The months known to exist, and the missing ones created; one per store (a pool's connections share it).

    `side()` gives a connection outside any batch transaction (and gives it back): a new connection for
    the worker, the chunk's own connection before its transaction for backfill."""

    def __init__(self, side: Side) -> None:
        self._side = side
        self._ranges: list[tuple[float, float]] | None = None  # attached months (lo, hi), sorted by lo
        self._hit = (float("inf"), float("-inf"))  # the month that held the last write
        self._lock = asyncio.Lock()  # one creation at a time per store
        self.created = 0  # months this store created (a log line, the tests)

    async def ensure(self, times: Sequence[float]) -> None:
        """Every month of these times (epoch seconds) exists once this returns."""
        if not times:
            return
        lo, hi = min(times), max(times)
        if self._hit[0] <= lo and hi < self._hit[1]:
            return
        async with self._lock:
            if self._ranges is None or (not self._covers(lo, hi) and self._missing(times)):
                await self._create(times)
            self._hit = self._range_of(lo, hi) or self._hit

    def forget(self) -> None:
        """Read the months again before the next write (one was detached: a write into it failed)."""
        self._ranges, self._hit = None, (float("inf"), float("-inf"))

    def _range_of(self, lo: float, hi: float) -> tuple[float, float] | None:
        ranges = self._ranges or []
        i = bisect_right(ranges, (lo, float("inf"))) - 1
        if i >= 0 and ranges[i][0] <= lo and hi < ranges[i][1]:
            return ranges[i]
        return None

    def _covers(self, lo: float, hi: float) -> bool:
        """Whether the attached months hold every time in [lo, hi] (they are contiguous there)."""
        at = lo
        for start, end in self._ranges or []:
            if start <= at < end:
                at = end
                if at > hi:
                    return True
        return False

    def _missing(self, times: Iterable[float]) -> list[date]:
        months = {month_of(t) for t in times if self._range_of(t, t) is None}
        return sorted(months)

    async def _create(self, times: Sequence[float]) -> None:
        async with self._side() as conn:
            if self._ranges is None:
                await self._read(conn)
            for month in self._missing(times):
                await self._add(conn, month)
                self.created += 1
            await self._read(conn)

    async def _read(self, conn: asyncpg.Connection) -> None:
        self._ranges = [(lo, hi) for _, lo, hi in await conn.fetch(QUERIES["months_attached"])]

    async def _add(self, conn: asyncpg.Connection, month: date) -> None:
        for attempt in range(1, ATTEMPTS + 1):
            try:
                async with conn.transaction():
                    await conn.execute(QUERIES["months_lock_timeout"], LOCK_TIMEOUT)
                    await conn.execute(QUERIES["months_add"], month)
                return
            except asyncpg.LockNotAvailableError:
                if attempt == ATTEMPTS:
                    raise
                await asyncio.sleep(0.05 * attempt)


def side_connection(connect: Callable[[], Awaitable[asyncpg.Connection]]) -> Side:
    """`Months`' side for a store on a pool: a connection of its own, opened for the creation (rare: a new
    month, an old history) and closed after, so that it never waits for the pool the batches hold."""

    @asynccontextmanager
    async def side() -> AsyncIterator[asyncpg.Connection]:
        conn = await connect()
        try:
            yield conn
        finally:
            await conn.close()

    return side


def month_gone(exc: BaseException) -> asyncpg.PostgresError | None:
    """A write into a month that is not attached (detached since the store read its months) as the error
    that says so: a transient one (SQLSTATE class 55), so that the batch goes again and its month is
    created; None for any other error."""
    if isinstance(exc, asyncpg.CheckViolationError) and "no partition of relation" in str(exc):
        return asyncpg.ObjectNotInPrerequisiteStateError(
            f"a month of the history is not attached ({exc}): the rows go again once it is created")
    return None


@dataclass(frozen=True)
class MonthInfo:
    """A month of the history as `rating-worker history` lists it."""

    name: str
    lo: float | None  # epoch seconds; -inf: no lower bound; None: not attached (see `bounds`)
    hi: float | None
    attached: bool
    detaching: bool  # a DETACH ... CONCURRENTLY was interrupted: `detach` completes it
    rows_estimate: int  # the planner's (-1: not known yet)
    bytes: int  # with its indexes
    archived: str | None  # what `archive` recorded on it (file, rows, bytes, when)


class MonthAdmin:
    """`rating-worker history`'s statements on the months, on one connection (the command's)."""

    def __init__(self, conn: asyncpg.Connection) -> None:
        self.conn = conn

    async def months(self) -> list[MonthInfo]:
        return [MonthInfo(*row) for row in await self.conn.fetch(QUERIES["months_list"])]

    async def count(self, name: str) -> int:
        return await self.conn.fetchval(QUERIES["months_count"], name)

    async def unpublished(self, name: str) -> int:
        return await self.conn.fetchval(QUERIES["months_unpublished"], name)

    async def detach(self, name: str, finalize: bool = False) -> None:
        # The one statement built by the server (queries.sql months_detach): DETACH ... CONCURRENTLY runs
        # neither in a function nor in a transaction block, and DDL takes no parameters.
        if finalize:
            await self.conn.execute(await self.conn.fetchval(QUERIES["months_detach_finalize"], name))
        else:
            await self.conn.execute(await self.conn.fetchval(QUERIES["months_detach"], name))

    async def archive(self, name: str, output: Callable[[bytes], Awaitable[None]]) -> int:
        """COPY the month as CSV with a header line (loaded back by COPY ... FROM ... (FORMAT csv, HEADER
        match)) to `output`; returns its rows."""
        status = await self.conn.copy_from_table(name, output=output, format="csv", header=True)
        return int(status.split()[-1])

    async def mark_archived(self, name: str, note: str) -> None:
        await self.conn.execute(QUERIES["months_mark_archived"], name, note)

    async def drop(self, name: str) -> None:
        await self.conn.execute(QUERIES["months_drop"], name)
