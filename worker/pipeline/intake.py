"""What the pipeline takes from the consumer: every record once, in order, none skipped, and the records
it cannot read named loudly instead of retried in silence.

Why this is its own object: a fetch can fail *after* the Kafka client has moved some partitions' positions
past records it never handed over (aiokafka drains partition after partition into one answer, and an
error in the next partition - a batch it cannot decompress - throws the answer away). Retrying from there
would skip those records for good, and the next offset commit would pass them. So after **any** error
from a fetch every assigned partition is put back where the pipeline left it: at the offset after the
last record it took, or, for a partition it has taken nothing from since it was assigned, at the group's
committed offset (the earliest one when there is none, as `auto_offset_reset=earliest`).

A record that cannot be read (a codec aiokafka does not have, a corrupt batch) fails the same way every
time. After an error of that kind each partition with records waiting is read alone: the ones that read
are taken as usual, and the one that fails is read record by record up to the first it cannot read,
which stops that partition there (paused, never skipped). It is said once and loudly - one ERROR line
with topic, partition, offset and cause, the readiness reason `unreadable: TOPIC[PARTITION]@OFFSET`, the
gauge `rating_worker_unreadable_offset{topic,partition}` and the alert RatingWorkerUnreadableRecord -
while every other partition goes on. The partition is tried again every UNREADABLE_RECHECK_S, silently,
and resumes by itself once it reads (docs/operations.md, "A record the worker cannot read").
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from aiokafka import AIOKafkaConsumer, TopicPartition
from aiokafka.errors import (
    CorruptRecordException,
    GroupAuthorizationFailedError,
    InconsistentGroupProtocolError,
    InvalidGroupIdError,
    InvalidSessionTimeoutError,
    KafkaError,
    UnsupportedCodecError,
)

from worker.observability import Metrics, Readiness, log
from worker.pipeline.retry import Backoff

logger = logging.getLogger("rating_worker.intake")

UNREADABLE_RECHECK_S = 60.0
FETCH_RETRY_S = 1.0  # the first wait after a failed fetch (then longer, with jitter: worker.pipeline.retry)
# Longest wait for new records while the oldest batch in flight is still in PostgreSQL (Intake.take_before):
# after it, that batch is completed first.
TAKE_BEHIND_MS = 1000

# Errors of the consumer group itself: the worker is not in the group, so it fetches nothing.
GROUP_ERRORS = (InconsistentGroupProtocolError, GroupAuthorizationFailedError, InvalidSessionTimeoutError,
                InvalidGroupIdError)
_GROUP_HINTS = {
    InconsistentGroupProtocolError: "no partition assignor is offered by every member of the group: a member "
                                    "that offers only other assignors (e.g. cooperative-sticky) is in it",
    GroupAuthorizationFailedError: "the broker refuses this client access to the group (ACLs)",
    InvalidSessionTimeoutError: "KAFKA_SESSION_TIMEOUT_MS is outside the broker's allowed range",
    InvalidGroupIdError: "the group id is not valid",
}


def is_group_error(exc: BaseException) -> bool:
    if isinstance(exc, GROUP_ERRORS):
        return True
    # aiokafka's coordinator wraps what it cannot classify in a plain KafkaError with these words.
    text = str(exc)
    return type(exc) is KafkaError and ("join group" in text or "during coordination" in text)


def group_trouble(exc: BaseException) -> str:
    """The readiness reason for a group error: what is wrong, in words."""
    hint = next((h for cls, h in _GROUP_HINTS.items() if isinstance(exc, cls)), str(exc) or type(exc).__name__)
    return f"group: {type(exc).__name__}: {hint}"


def _is_record_error(exc: BaseException) -> bool:
    """An error the records themselves can cause: it comes back every time they are read."""
    return isinstance(exc, UnsupportedCodecError | CorruptRecordException) or not isinstance(exc, KafkaError)


@dataclass
class Unreadable:
    offset: int
    cause: str
    recheck_at: float
    reason: str


class Intake:
    """Fetches for the pipeline, on its consumer; owns the positions of what has been taken."""

    def __init__(self, consumer: AIOKafkaConsumer, metrics: Metrics, readiness: Readiness,
                 sleep: Callable[[float], Awaitable[None]], probe_ms: int = 1500,
                 clock: Callable[[], float] = time.monotonic, backoff: Backoff | None = None) -> None:
        self.consumer = consumer
        self.metrics = metrics
        self.readiness = readiness
        self._sleep = sleep
        # The waits after failed fetches: about FETCH_RETRY_S, then longer while they go on.
        self._backoff = backoff if backoff is not None else Backoff(FETCH_RETRY_S, FETCH_RETRY_S)
        self._probe_ms = probe_ms  # how long a partition read alone may wait for its records
        self._clock = clock
        self._next: dict[TopicPartition, int] = {}  # offset after the last record taken, per partition
        self._rewind_pending = False
        self.unreadable: dict[TopicPartition, Unreadable] = {}

    # ---- taking records -------------------------------------------------------------------------------

    async def take(self, timeout_ms: int, max_records: int, until: asyncio.Future | None = None
                   ) -> dict[TopicPartition, list]:
        """Records to apply, by partition (maybe none); the fetch is given up once `until` is done (see
        take_before). Raises only group errors (`is_group_error`) and cancellation; every other failure is
        handled here: positions put back, the worker told."""
        try:
            if self._rewind_pending:
                await self._rewind()
            await self._recheck_unreadable()
            records = await self._fetch(timeout_ms, max_records, until)
        except Exception as exc:  # noqa: BLE001 - whatever it was, positions may have moved: put them back
            self._rewind_pending = True
            if is_group_error(exc):
                raise
            return await self._after_error(exc, max_records)
        self._took(records)
        self.readiness.recover("broker: fetch")
        if self._backoff.failures:
            self._backoff.reset()
        return records

    async def take_before(self, busy: asyncio.Future, max_records: int) -> dict[TopicPartition, list]:
        """Records to apply, waited for until `busy` (the oldest batch in flight) is done, at most
        TAKE_BEHIND_MS: with batches in flight, the next one starts as soon as its records are fetched,
        so that its plan is computed while the batch ahead is in PostgreSQL, not after it is complete.
        Without it, at a few thousand games/s each batch ran alone from fetch to offset commit (~130 ms
        for 270 games at 20,000 players), one after the other, just keeping up.

        Only the fetch itself is cut short (`_fetch`); a rewind, a recheck and the recovery from a failed
        fetch, which take records partition by partition, always run to their end."""
        if busy.done():
            return await self.take(0, max_records)
        return await self.take(TAKE_BEHIND_MS, max_records, until=busy)

    async def _fetch(self, timeout_ms: int, max_records: int, until: asyncio.Future | None
                     ) -> dict[TopicPartition, list]:
        """The consumer's getmany, given up (taking nothing) once `until` is done. Safe to give up: aiokafka
        hands records over (moves its positions) only as getmany returns them."""
        if until is None:
            return await self.consumer.getmany(timeout_ms=timeout_ms, max_records=max_records)
        fetch = asyncio.ensure_future(self.consumer.getmany(timeout_ms=timeout_ms, max_records=max_records))
        try:
            await asyncio.wait({fetch, until}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            if not fetch.done():
                fetch.cancel()
                await asyncio.wait({fetch})
        return {} if fetch.cancelled() else fetch.result()

    def _took(self, records: dict[TopicPartition, list]) -> None:
        for tp, recs in records.items():
            if recs:
                self._next[tp] = recs[-1].offset + 1
                known = self.unreadable.get(tp)
                if known is not None and recs[-1].offset >= known.offset:
                    self._readable_again(tp)

    async def _rewind(self, partitions=None) -> None:
        """Every assigned partition (or these) back to the offset after the last record taken, or, for one
        nothing was taken from since, to its committed offset."""
        for tp in sorted(self.consumer.assignment() if partitions is None else partitions):
            offset = self._next.get(tp)
            if offset is None:
                offset = await self.consumer.committed(tp)
            if offset is None:
                await self.consumer.seek_to_beginning(tp)
            else:
                self.consumer.seek(tp, offset)
        if partitions is None:
            self._rewind_pending = False

    async def _after_error(self, exc: Exception, max_records: int) -> dict[TopicPartition, list]:
        found: dict[TopicPartition, list] = {}
        stopped = False
        try:
            await self._rewind()
            if _is_record_error(exc):
                found, stopped = await self._read_alone(max_records)
        except Exception as again:  # noqa: BLE001 - the broker is not answering: positions stay to be put back
            if is_group_error(again):
                raise
            self._rewind_pending = True
            exc = again
        if stopped:
            return found  # said loudly in _stop_at; the other partitions go on
        self.metrics.broker_retries.inc()
        self.readiness.fail("broker: fetch")
        delay = self._backoff.next()
        log(logger, logging.WARNING, "fetch failed, retrying", error=repr(exc), retry_in_s=round(delay, 3))
        if not found:
            await self._sleep(delay)
        return found

    async def _read_alone(self, max_records: int) -> tuple[dict[TopicPartition, list], bool]:
        """Read each partition with records waiting by itself: take what reads, stop the one that does not.
        Also says whether a partition was stopped."""
        found: dict[TopicPartition, list] = {}
        stopped = False
        paused = self.consumer.paused()
        for tp in sorted(self.consumer.assignment()):
            if tp in paused or not self._waiting(tp):
                continue
            try:
                records = await self.consumer.getmany(tp, timeout_ms=self._probe_ms, max_records=max_records)
            except Exception as exc:  # noqa: BLE001 - a partition that cannot be read: find the record
                if is_group_error(exc):
                    raise
                good, stopped_here = await self._up_to_the_unreadable(tp, exc, max_records)
                stopped = stopped or stopped_here
                if good:
                    found[tp] = good
                continue
            self._took(records)
            found.update(records)
        return found, stopped

    def _waiting(self, tp: TopicPartition) -> bool:
        end, taken = self.consumer.highwater(tp), self._next.get(tp)
        return end is None or taken is None or taken < end

    async def _up_to_the_unreadable(self, tp: TopicPartition, exc: Exception, max_records: int) -> tuple[list, bool]:
        """Take `tp`'s records one at a time up to the first that cannot be read, and stop `tp` there.
        (A one-record read moves the position past each record it returns, and a read that fails moves
        nothing, so the position is then the offset of the first record that cannot be read.)"""
        await self._rewind()
        good: list = []
        while len(good) < max_records:
            try:
                records = await self.consumer.getmany(tp, timeout_ms=self._probe_ms, max_records=1)
            except Exception as again:  # noqa: BLE001 - this is the record
                if is_group_error(again):
                    raise
                exc = again
                break
            if not records:
                return good, False  # nothing failed this time: nothing to stop
            good.extend(records[tp])
            self._took(records)
        else:
            return good, False  # as much as one batch takes; the rest on the next fetch
        offset = await self.consumer.position(tp)
        self._stop_at(tp, offset, exc)
        return good, True

    # ---- partitions stopped at a record they cannot read ---------------------------------------------

    def _stop_at(self, tp: TopicPartition, offset: int, exc: Exception) -> None:
        self.consumer.pause(tp)
        known = self.unreadable.get(tp)
        cause = f"{type(exc).__name__}: {exc}"[:300]
        if known is not None and known.offset == offset:
            known.recheck_at = self._clock() + UNREADABLE_RECHECK_S  # still so: said already
            return
        if known is not None:
            self.readiness.recover(known.reason)
        reason = f"unreadable: {tp.topic}[{tp.partition}]@{offset}"
        self.unreadable[tp] = Unreadable(offset, cause, self._clock() + UNREADABLE_RECHECK_S, reason)
        self.metrics.unreadable_offset.labels(tp.topic, str(tp.partition)).set(offset)
        self.readiness.fail(reason)
        log(logger, logging.ERROR, "record cannot be read: its partition is stopped at it, the others go on "
            "(nothing is skipped; docs/operations.md, 'A record the worker cannot read')",
            topic=tp.topic, partition=tp.partition, offset=offset, cause=cause)

    async def _recheck_unreadable(self) -> None:
        """Read a stopped partition again, from where the worker left it, once its time has come."""
        now = self._clock()
        due = [tp for tp, known in self.unreadable.items()
               if now >= known.recheck_at and tp in self.consumer.assignment()]
        for tp in due:
            self.unreadable[tp].recheck_at = now + UNREADABLE_RECHECK_S
        if due:
            await self._rewind(due)
            self.consumer.resume(*due)

    def _readable_again(self, tp: TopicPartition) -> None:
        known = self.unreadable.pop(tp)
        self._drop_gauge(tp)
        self.readiness.recover(known.reason)
        log(logger, logging.INFO, "partition readable again", topic=tp.topic, partition=tp.partition,
            offset=known.offset)

    def _drop_gauge(self, tp: TopicPartition) -> None:
        try:
            self.metrics.unreadable_offset.remove(tp.topic, str(tp.partition))
        except KeyError:
            pass

    # ---- rebalances ------------------------------------------------------------------------------

    def forget(self, partitions) -> None:
        """Partitions taken away: what was taken from them is committed or abandoned, and another worker
        reads them from the group's committed offsets."""
        for tp in partitions:
            self._next.pop(tp, None)
            known = self.unreadable.pop(tp, None)
            if known is not None:
                self._drop_gauge(tp)
                self.readiness.recover(known.reason)

    def rewind_to_committed(self) -> None:
        """The records taken since the last offset commit were given up: take them again, from every
        assigned partition's committed offset, at the next fetch."""
        self._next.clear()
        self._rewind_pending = True

    def stopped(self) -> set[TopicPartition]:
        """The partitions stopped at a record they cannot read (their lag is no work for the watchdog)."""
        return set(self.unreadable)

