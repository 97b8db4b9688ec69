"""The retry policy, in one place: what is worth retrying, how long to wait, and when to give up.

A transient failure (a database or broker error a retry can get past: `is_transient`) is retried with
capped exponential backoff (0.1 s doubling up to RETRY_BACKOFF_MAX_S), not ready meanwhile (the
readiness reason "<source>: <what>"). A stop, or a drain that cannot wait (a rebalance, a stop), ends a
retry at its next failure: `Abandoned`, the batch's work is given up uncommitted. A start-up step is
`interruptible`: a stop also ends the attempt in progress at once (`Stopping`).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import TypeVar

import asyncpg
from aiokafka.errors import CommitFailedError, IllegalStateError, KafkaError

from worker.config import Config
from worker.observability import Metrics, Readiness, log

__all__ = ["DB_ERRORS", "Abandoned", "Backoff", "Retrier", "Stopping", "is_transient"]

logger = logging.getLogger("rating_worker.pipeline")
T = TypeVar("T")

DB_ERRORS = (asyncpg.PostgresError, asyncpg.InterfaceError, OSError, ConnectionError, TimeoutError)
# SQLSTATE classes that a retry can get past: connection (08), transaction rollback such as
# serialization failure and deadlock (40), insufficient resources (53), object in use / lock not
# available (55), operator intervention such as shutdown or a cancelled statement (57), system (58),
# and 25 (read-only transaction during a fail-over, idle-in-transaction timeout).
TRANSIENT_SQLSTATE_CLASSES = frozenset({"08", "25", "40", "53", "55", "57", "58"})


def is_transient(exc: BaseException) -> bool:
    """A database error worth retrying; others (bad data, a broken constraint) would fail forever."""
    if isinstance(exc, asyncpg.PostgresError):
        return (exc.sqlstate or "")[:2] in TRANSIENT_SQLSTATE_CLASSES
    return isinstance(exc, DB_ERRORS)


class Stopping(Exception):
    """A stop was asked for: the wait or start-up step in progress is given up."""


class Abandoned(Exception):
    """The batches in hand are given up uncommitted: a stop or a rebalance cannot wait for their database
    or broker work, which failed (an outage) or took longer than DRAIN_TIMEOUT_S. Their records are
    delivered again to whoever owns the partitions next."""


class Backoff:
    """The waits between attempts: 0.1 s, doubling, at most `cap_s`."""

    FIRST_S = 0.1

    def __init__(self, cap_s: float) -> None:
        self.cap_s = cap_s
        self.delay = self.FIRST_S

    @property
    def waited(self) -> bool:
        """Whether there was a failure (a recovery is worth a line)."""
        return self.delay > self.FIRST_S

    def next(self) -> float:
        delay = self.delay
        self.delay = min(self.delay * 2, self.cap_s)
        return delay


class Retrier:
    """Retries for the pipeline's collaborators, sharing its readiness, metrics and stop."""

    def __init__(self, config: Config, metrics: Metrics, readiness: Readiness, stopping: asyncio.Event,
                 giving_up: Callable[[], bool] | None = None) -> None:
        self.config = config
        self.metrics = metrics
        self.readiness = readiness
        self.stopping = stopping
        self._giving_up = giving_up or stopping.is_set

    def giving_up(self) -> bool:
        """After a failure: give up (a stop, or a drain that cannot wait) rather than retry."""
        return self._giving_up()

    def backoff(self) -> Backoff:
        return Backoff(self.config.retry_backoff_max_s)

    async def sleep(self, seconds: float) -> None:
        """Wait, or less when a stop is asked for."""
        try:
            await asyncio.wait_for(self.stopping.wait(), seconds)
        except TimeoutError:
            pass

    async def until_stopped(self, coro: Awaitable[T]) -> T:
        """`coro`, cancelled when a stop is asked for (raises Stopping then): for waits that can last
        (a fetch held while a rebalance waits for the coordinator, a client's start-up)."""
        if self.stopping.is_set():
            coro.close()
            raise Stopping()
        work = asyncio.ensure_future(coro)
        stop = asyncio.ensure_future(self.stopping.wait())
        try:
            await asyncio.wait((work, stop), return_when=asyncio.FIRST_COMPLETED)
        finally:
            stop.cancel()
            if not work.done():
                work.cancel()
                await asyncio.gather(work, return_exceptions=True)
        if work.cancelled():
            raise Stopping()
        return work.result()

    async def retry(self, what: str, action: Callable[[], Awaitable[T]], errors, counter, source: str,
                    interruptible: bool = False) -> T:
        """`action()` until it succeeds, retrying `errors` with backoff; not ready meanwhile (the reason
        "<source>: <what>": no two retries of the same `what` run at once). A rebalance's refusal of an
        offset commit is not retried (the partitions are another worker's now)."""
        reason = f"{source}: {what}"
        backoff = self.backoff()
        try:
            while True:
                try:
                    result = await (self.until_stopped(action()) if interruptible else action())
                    if backoff.waited:
                        log(logger, logging.INFO, f"{what}: recovered")
                    return result
                except errors as exc:
                    if isinstance(exc, CommitFailedError | IllegalStateError):
                        raise
                    counter.inc()
                    self.readiness.fail(reason)
                    delay = backoff.next()
                    log(logger, logging.WARNING, f"{what} failed, retrying", error=repr(exc), retry_in_s=delay)
                    if self.giving_up():
                        raise (Stopping() if interruptible else Abandoned()) from exc
                    await self.sleep(delay)
        finally:
            self.readiness.recover(reason)

    async def db(self, what: str, action: Callable[[], Awaitable[T]]) -> T:
        return await self.retry(what, action, DB_ERRORS, self.metrics.db_retries, "database")

    async def broker(self, what: str, action: Callable[[], Awaitable[T]], interruptible: bool = False) -> T:
        return await self.retry(what, action, (KafkaError,), self.metrics.broker_retries, "broker", interruptible)
