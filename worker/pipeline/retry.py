"""The retry policy, in one place: what is worth retrying, how long to wait, and when to give up.

A transient failure (a database or broker error a retry can get past: `is_transient`) is retried with
capped exponential backoff (0.1 s doubling up to RETRY_BACKOFF_MAX_S), not ready meanwhile (the
readiness reason "<source>: <what>"). A stop, or a drain that cannot wait (a rebalance, a stop), ends a
retry at its next failure: `Abandoned`, the batch's work is given up uncommitted. A start-up step is
`interruptible`: a stop also ends the attempt in progress at once (`Stopping`).

`classify` is the one classification of failures every retry answers to (transient: back off and try
again; wait: go again at once, behind the work that failed first; raise). `Backoff` is the one schedule
of waits in the worker: every retry and restart uses it (the batches'
database work, the broker and database calls of `Retrier`, a failed fetch, a side task's restart, the
first connection at start), each with its own first wait, all with jitter.
"""

from __future__ import annotations

import asyncio
import enum
import logging
import random
from collections.abc import Awaitable, Callable
from typing import TypeVar

import asyncpg
from aiokafka.errors import CommitFailedError, IllegalStateError, KafkaError

from worker.config import Config
from worker.observability import Metrics, Readiness, log
from worker.store.connection import EXIT_SETTING, describe

__all__ = ["DB_ERRORS", "Abandoned", "Backoff", "Behind", "Retrier", "Stopping", "Verdict", "classify",
           "is_transient"]

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


class Behind(Exception):
    """The work ahead of this one failed and goes again (the batch before it rolled back): go again behind
    it, at once."""


class Verdict(enum.Enum):
    """What a retry does after a failure."""

    TRANSIENT = "transient"  # back off (Backoff), then try again
    WAIT = "wait"  # try again at once, behind the work that failed first (Behind)
    RAISE = "raise"  # no retry can mend it: end, loudly


def classify(exc: BaseException, connecting: bool = False) -> Verdict:
    """The one classification of failures that every retry of the worker answers to.

    A broker error is transient, but an offset commit refused after a rebalance (the partitions are
    another worker's now). A database error is transient when a retry can get past it (`is_transient`).
    `connecting`: the first connection at start, where a refused login or certificate is retried too (a
    secret rotated late, docs/operations.md) and only a setting is not (a file missing, a URL asyncpg
    cannot use)."""
    if isinstance(exc, Behind):
        return Verdict.WAIT
    if isinstance(exc, CommitFailedError | IllegalStateError):
        return Verdict.RAISE
    if isinstance(exc, KafkaError):
        return Verdict.TRANSIENT
    if connecting:
        return Verdict.RAISE if describe(exc).exit_code == EXIT_SETTING else Verdict.TRANSIENT
    return Verdict.TRANSIENT if is_transient(exc) else Verdict.RAISE


class Stopping(Exception):
    """A stop was asked for: the wait or start-up step in progress is given up."""


class Abandoned(Exception):
    """The batches in hand are given up uncommitted: a stop or a rebalance cannot wait for their database
    or broker work, which failed (an outage) or took longer than DRAIN_TIMEOUT_S. Their records are
    delivered again to whoever owns the partitions next."""


class Backoff:
    """The waits between attempts: `first_s`, doubling, at most `cap_s`, each with equal jitter (half the
    step, plus a random share of the other half). Without jitter every worker that lost the same
    PostgreSQL or broker came back at the same instants and knocked together; with it they spread out,
    and a wait is never under half its step ("Exponential Backoff And Jitter", AWS Architecture Blog).
    `rng` is for tests; each Backoff otherwise draws from its own generator, seeded by the system."""

    __slots__ = ("cap_s", "failures", "first_s", "_rng", "_step")

    def __init__(self, first_s: float, cap_s: float, rng: random.Random | None = None) -> None:
        self.first_s = first_s
        self.cap_s = max(cap_s, first_s)
        self._step = first_s
        self._rng = rng if rng is not None else random.Random()
        self.failures = 0

    @property
    def waited(self) -> bool:
        """Whether there was a failure (a recovery is worth a line)."""
        return self.failures > 0

    def next(self) -> float:
        """The wait after one more failure."""
        step = self._step
        self._step = min(step * 2, self.cap_s)
        self.failures += 1
        return step / 2 + self._rng.random() * step / 2

    def reset(self) -> None:
        """A success: the next failure waits `first_s` again."""
        self._step, self.failures = self.first_s, 0


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

    def backoff(self, first_s: float = 0.1) -> Backoff:
        """The waits of one retry loop: from `first_s` (0.1 s for a call that failed), capped at
        RETRY_BACKOFF_MAX_S."""
        return Backoff(first_s, self.config.retry_backoff_max_s)

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
        """`action()` until it succeeds, retrying the `errors` that `classify` finds transient with backoff;
        not ready meanwhile (the reason "<source>: <what>": no two retries of the same `what` run at once).
        The others are raised (a rebalance's refusal of an offset commit: the partitions are another
        worker's now; a database error no retry gets past)."""
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
                    if classify(exc) is not Verdict.TRANSIENT:
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
