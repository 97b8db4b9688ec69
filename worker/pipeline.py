"""The streaming shell: consume a batch -> one PostgreSQL transaction -> publish -> commit offsets.

Delivery guarantee: a message's rating changes are committed in PostgreSQL together with its
(source, id) before its offset is committed, so a crash anywhere redelivers it and the dedupe makes
the second delivery a no-op (effectively once). Changes are published after the database commit and
before the offset commit; a crash in between leaves outbox rows unpublished, which the relay
publishes (at least once, with stable ids so that consumers can drop duplicates).

Knows nothing about rating math: `worker.engine.apply_batch` does that through the state port.
"""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import time
from collections import Counter, deque
from collections.abc import Awaitable, Callable, Sequence
from typing import TypeVar

import asyncpg
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, ConsumerRebalanceListener, TopicPartition
from aiokafka.errors import CommitFailedError, IllegalStateError, KafkaError, MessageSizeTooLargeError
from aiokafka.partitioner import murmur2

from worker import kafka_clients
from worker.config import Config
from worker.contract import deadletter
from worker.contract.binding import OUTPUT_HEADERS
from worker.contract.decode import decode_rateable
from worker.contract.reasons import BadMessage
from worker.engine import BatchResult, Plan, apply_batch, plan_batch
from worker.intake import Intake, group_trouble, is_group_error
from worker.observability import HealthServer, Metrics, Readiness, log, observe_many
from worker.store.base import ChangeRecord, StateStore

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


FAULT_POINTS = ("kill_after_commit", "kill_after_publish")

# The broker probe: a metadata request every BROKER_PROBE_INTERVAL_S, given BROKER_PROBE_TIMEOUT_S to be
# answered. aiokafka keeps a fetch that cannot reach the broker to itself, so without it an idle worker
# (or one waiting in a publish) would look ready through a whole broker outage.
BROKER_PROBE_INTERVAL_S = 5.0
BROKER_PROBE_TIMEOUT_S = 5.0
BROKER_PROBE = "broker: probe"
# The longest key of a dead letter that is hashed to choose its partition (murmur2 is pure Python).
DEAD_LETTER_KEY_HASHED = 1024
# How long closing each Kafka client may take at a stop (leaving the group, flushing the producer): a
# coordinator that does not answer must not hold the exit.
CLOSE_TIMEOUT_S = 5.0


def fault_from_env() -> tuple[str, int] | None:
    """For tests only: RATING_WORKER_FAULT=kill_after_commit[:N] | kill_after_publish[:N] makes the
    process SIGKILL itself at that point of its N-th batch (default the first): after the batch's
    database commit (nothing published, no offset committed), or after its changes are published and
    taken out of the outbox (offsets not committed). Read once, when the pipeline is built; unset, it
    costs one comparison per batch."""
    raw = os.environ.get("RATING_WORKER_FAULT", "").strip()
    if not raw:
        return None
    point, _, n = raw.partition(":")
    if point not in FAULT_POINTS or not (n or "1").isdigit() or int(n or "1") < 1:
        raise ValueError(f"RATING_WORKER_FAULT={raw!r}: expected kill_after_commit[:N] or kill_after_publish[:N]")
    return point, int(n or "1")


class Stopping(Exception):
    """A stop was asked for: the wait or start-up step in progress is given up."""


class Abandoned(Exception):
    """The batches in hand are given up uncommitted: a stop or a rebalance cannot wait for their database
    or broker work, which failed (an outage) or took longer than DRAIN_TIMEOUT_S. Their records are
    delivered again to whoever owns the partitions next."""


class PreviousBatchFailed(Exception):
    """The batch before this one rolled back: roll back too and go again after it (order is kept)."""


class _Batch:
    """One batch in flight, and the hooks that keep concurrent batches in consumption order.

    Several batches may be in PostgreSQL at once (the database works while Python decodes the next
    batch), so that a later batch never overtakes an earlier one for the same player:
    - it takes its locks only once the previous batch holds its own (or has committed), so where
      they share players it waits for the previous commit in PostgreSQL's lock queue;
    - it commits only after the previous batch committed, and rolls back and retries if the previous
      batch's attempt failed (its locks were released, so ours may have been taken too early).
    """

    def __init__(self, prev: _Batch | None, good: list, dead: list, offsets: dict, started: float) -> None:
        self.prev = prev
        self.good, self.dead, self.offsets, self.started = good, dead, offsets, started
        self.attempt = 0
        self.seq = 0  # its number in this process, for its readiness reason
        self.locked = self.failed = self.committed = self.abandoned = False
        self.reported = self.published = False  # steps of its completion done (a stop may interrupt it)
        self.plan: Plan | None = None
        self.records: list = []  # the Kafka records of `good`, for dead-lettering a message that fails
        self.timestamps: list[int] = []  # every record's timestamp (ms), for the record latency
        self.planned = asyncio.Event()
        self._changed = asyncio.Event()
        self._prev_attempt: int | None = None
        self.task: asyncio.Task | None = None

    def notify(self) -> None:
        event, self._changed = self._changed, asyncio.Event()
        event.set()

    async def _next_change(self) -> None:
        await self._changed.wait()

    def _check(self, p: _Batch) -> None:
        if p.abandoned:
            raise Abandoned()  # the batches after an abandoned one are abandoned with it

    async def before_lock(self) -> None:
        p = self.prev
        while p is not None and not (p.committed or p.locked):
            self._check(p)
            await p._next_change()
        self._prev_attempt = p.attempt if p is not None else None

    async def after_lock(self) -> None:
        self.locked = True
        self.notify()

    async def before_commit(self) -> None:
        p = self.prev
        while p is not None and not p.committed:
            self._check(p)
            if p.failed or p.attempt != self._prev_attempt:
                raise PreviousBatchFailed()
            await p._next_change()

    def release(self) -> None:
        """Drop the links once this batch committed (no chain of old batches stays in memory)."""
        self.prev = None
        self.plan = None

    def earlier_plans(self) -> list[Plan]:
        """The plans of the batches before this one that have not committed yet, oldest first."""
        plans, p = [], self.prev
        while p is not None and not p.committed:
            if p.plan is not None:
                plans.append(p.plan)
            p = p.prev
        return plans[::-1]


class _FinishBatchesBeforeRevoke(ConsumerRebalanceListener):
    """Partitions are given away only after the batches in hand are applied, published and committed, or,
    when that cannot happen within DRAIN_TIMEOUT_S (a database or broker outage), abandoned uncommitted:
    the group waits for this worker meanwhile, and its records go to the partitions' next owner."""

    def __init__(self, pipeline: Pipeline) -> None:
        self._pipeline = pipeline

    async def on_partitions_revoked(self, revoked) -> None:
        # aiokafka only logs what a listener raises: a failure here must stop the pipeline itself,
        # or the next batch's offsets could be committed past messages that were never applied.
        try:
            await self._pipeline.drain(self._pipeline.config.drain_timeout_s)
        except BaseException as exc:  # noqa: BLE001 - handed to the pipeline, which re-raises it
            self._pipeline.halt(exc)
        self._pipeline.forget_partitions(revoked)

    async def on_partitions_assigned(self, assigned) -> None:
        self._pipeline.assigned(assigned)


def _by_topic(partitions) -> dict[str, list[int]]:
    out: dict[str, list[int]] = {}
    for tp in sorted(partitions):
        out.setdefault(tp.topic, []).append(tp.partition)
    return out


class Pipeline:
    def __init__(self, config: Config, store: StateStore, metrics: Metrics, health: HealthServer | None = None):
        self.config = config
        self.store = store
        self.metrics = metrics
        self.health = health
        # Shared with /readyz when there is a health server; "starting" until start() has connected.
        self.readiness = health.readiness if health is not None else Readiness(metrics)
        self._launched = 0
        self._complete_lock = asyncio.Lock()
        self._inflight: deque[_Batch] = deque()
        self._last: _Batch | None = None
        self._stopping = asyncio.Event()
        self.consumer: AIOKafkaConsumer | None = None
        self.producer: AIOKafkaProducer | None = None
        self.intake: Intake | None = None
        self.started = False
        self.batches = 0
        self.abandoned = 0  # batches given up uncommitted (stop or rebalance during an outage)
        self._draining = False  # a retry gives up at its next failure (the batch is abandoned)
        self._assignment: set[TopicPartition] = set()
        self._group_trouble: str | None = None
        self._hashes: dict[bytes, int] = {}
        self._halted = False
        self._broken: BaseException | None = None
        self._fault = fault_from_env()
        # For the watchdog: batches taken from the broker and not yet through `_complete`, and the
        # records waiting in the assigned partitions when the lag was last measured.
        self._unfinished = 0
        self._lag_seen = 0
        # The offsets this process committed: a partition that hands out records below them has lost
        # its data (a broker that lost its log or the group's offsets) or was reset by hand.
        self._committed: dict[TopicPartition, int] = {}
        # A series at 0 for every input topic from the start, so that the first fall is an increase.
        for topic in config.kafka_input_topics:
            metrics.offsets_went_back.labels(topic)

    # ---- lifecycle -------------------------------------------------------------------------------

    def stop(self) -> None:
        """Ask for a clean stop: the batches in hand finish and commit, then the loop ends."""
        self._stopping.set()

    async def start(self) -> None:
        c = self.config
        self.producer = kafka_clients.producer(c)
        self.consumer = kafka_clients.group_consumer(c)
        self.intake = Intake(self.consumer, self.metrics, self.readiness, self._sleep,
                             probe_ms=c.kafka_fetch_max_wait_ms + 1000)
        await self._retry_broker("start producer", self.producer.start, interruptible=True)
        await self._retry_broker("start consumer", self.consumer.start, interruptible=True)
        self.consumer.subscribe(list(c.kafka_input_topics), listener=_FinishBatchesBeforeRevoke(self))
        self.started = True
        self.readiness.recover("starting")
        log(logger, logging.INFO, "worker started", topics=list(c.kafka_input_topics), group=c.kafka_group_id)

    async def close(self) -> None:
        """Stop the Kafka clients (leave the group), each within CLOSE_TIMEOUT_S."""
        for name, client in (("consumer", self.consumer), ("producer", self.producer)):
            if client is None:
                continue
            try:
                await asyncio.wait_for(client.stop(), CLOSE_TIMEOUT_S)
            except (KafkaError, TimeoutError) as exc:
                log(logger, logging.WARNING, f"{name} stop failed", error=repr(exc), timeout_s=CLOSE_TIMEOUT_S)

    async def run(self) -> None:
        """Consume until `stop()`. Background: the outbox relay, the lag gauges and the broker probe.

        A stop finishes the batches in hand within DRAIN_TIMEOUT_S and abandons the rest uncommitted."""
        helpers = [asyncio.create_task(self._relay_loop()), asyncio.create_task(self._lag_loop()),
                   asyncio.create_task(self._broker_probe_loop())]
        try:
            while not self._stopping.is_set():
                try:
                    await self._step()
                except Stopping:
                    break  # whatever was waited for is given up; the drain below picks it up again
            await self.drain(self.config.drain_timeout_s)
            if self._broken is not None:
                raise self._broken
        except (Stopping, Abandoned):
            self._abandon()
        except BaseException:
            self._abandon()
            raise
        finally:
            for task in helpers:
                task.cancel()
            await asyncio.gather(*helpers, return_exceptions=True)

    async def _step(self) -> None:
        """One turn of the loop: complete what is finished, then take records or complete the oldest batch.
        Every wait is cut short by a stop (Stopping)."""
        await self._until_stopped(self._complete_finished())
        if len(self._inflight) >= self.config.max_inflight_batches:
            await self._until_stopped(self._complete_oldest())
            return
        # With batches in flight, take only what is already fetched, and otherwise finish one.
        wait = 0 if self._inflight else self.config.batch_wait_ms
        try:
            records = await self._until_stopped(self.intake.take(wait, self.config.batch_size))
        except KafkaError as exc:
            if not is_group_error(exc):
                raise
            self._group_failed(exc)
            await self._sleep(1.0)
            return
        if records:
            await self._launch(records)
        elif self._inflight:
            await self._until_stopped(self._complete_oldest())

    async def _until_stopped(self, coro: Awaitable[T]) -> T:
        """`coro`, cancelled when a stop is asked for (raises Stopping then): for waits that can last
        (a fetch held while a rebalance waits for the coordinator, a client's start-up)."""
        if self._stopping.is_set():
            coro.close()
            raise Stopping()
        work = asyncio.ensure_future(coro)
        stop = asyncio.ensure_future(self._stopping.wait())
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

    # ---- the group ---------------------------------------------------------------------------

    def _group_failed(self, exc: BaseException) -> None:
        """Not in the consumer group (nothing is fetched): said once per kind of trouble, until it joins."""
        reason = group_trouble(exc)
        if reason != self._group_trouble:
            if self._group_trouble is not None:
                self.readiness.recover(self._group_trouble)
            self._group_trouble = reason
            self.readiness.fail(reason)
            log(logger, logging.ERROR, "cannot join the consumer group: retrying, rating nothing meanwhile "
                "(docs/operations.md, 'Consumer group trouble')", group=self.config.kafka_group_id,
                error=repr(exc), reason=reason)

    def assigned(self, partitions) -> None:
        """The group's new assignment (after every rebalance): logged, counted, and the end of group trouble."""
        new, old = set(partitions), self._assignment
        self._assignment = new
        if self._group_trouble is not None:
            self.readiness.recover(self._group_trouble)
            self._group_trouble = None
            log(logger, logging.INFO, "joined the consumer group", group=self.config.kafka_group_id)
        counts = Counter(tp.topic for tp in new)
        for topic in set(self.config.kafka_input_topics) | set(counts):
            self.metrics.assigned_partitions.labels(topic).set(counts.get(topic, 0))
        log(logger, logging.INFO, "partitions assigned", partitions=len(new), gained=_by_topic(new - old),
            lost=_by_topic(old - new))

    def forget_partitions(self, partitions) -> None:
        """Partitions taken away: their lag series and fetch positions are the next owner's."""
        self.forget_lag(partitions)
        if self.intake is not None:
            self.intake.forget(partitions)

    # ---- batches ---------------------------------------------------------------------------------

    async def _launch(self, records: dict[TopicPartition, list]) -> _Batch:
        """Decode a batch and start its database stage; yields now and then so that the batches
        already in PostgreSQL get their round trips answered while this one decodes."""
        started = time.perf_counter()
        good, good_records, dead, offsets, stamps = [], [], [], {}, []
        for tp, recs in records.items():
            if recs[0].offset < self._committed.get(tp, 0):
                self._offsets_went_back(tp, recs[0].offset)
            stamps.extend(r.timestamp for r in recs)
            for i, record in enumerate(recs):
                if i % 500 == 499:
                    await asyncio.sleep(0)
                try:
                    message, _ = decode_rateable(record.value, self.config.max_message_bytes, record.headers)
                    good.append(message)
                    good_records.append(record)
                except BadMessage as exc:
                    dead.append((record, exc))
            offsets[tp] = recs[-1].offset + 1
        # A batch with nothing to apply stays out of the ordering chain: it would "commit" at once and
        # let the next batch overtake the one before it. Its offsets still commit in batch order.
        batch = _Batch(self._last if good else None, good, dead, offsets, started)
        batch.records = good_records
        batch.timestamps = stamps
        self._launched += 1
        batch.seq = self._launched
        if good:
            self._last = batch
        batch.task = asyncio.create_task(self._apply(batch))
        self._inflight.append(batch)
        self._unfinished += 1
        return batch

    async def _apply(self, b: _Batch) -> BatchResult:
        """The database stage, retried until it commits (or shutdown): never skipped, never doubled.

        Whatever ends it other than a commit marks the batch abandoned, so that the batches behind it
        stop waiting for it."""
        try:
            return await self._apply_until_committed(b)
        except BaseException:
            b.abandoned = True
            b.planned.set()
            b.notify()
            raise

    async def _apply_until_committed(self, b: _Batch) -> BatchResult:
        if not b.good:
            b.committed = True
            b.planned.set()
            b.notify()
            return BatchResult()
        reason = f"database: batch {b.seq}"
        try:
            return await self._apply_with_retries(b, reason)
        finally:
            self.readiness.recover(reason)

    async def _apply_with_retries(self, b: _Batch, reason: str) -> BatchResult:
        await self._plan(b)
        delay = 0.1
        while True:
            b.attempt += 1
            b.failed = b.locked = False
            b.notify()
            try:
                result = await apply_batch(self.store, b.good, hooks=b, plan=b.plan)
            except PreviousBatchFailed:
                b.failed, b.locked = True, False
                b.notify()
                continue  # the earlier batch is retrying; go again behind it
            except DB_ERRORS as exc:
                b.failed, b.locked = True, False
                b.notify()
                if not is_transient(exc):
                    # Retrying would stall every partition for good: stop loudly, naming the batch.
                    log(logger, logging.ERROR, "batch failed with a permanent database error", error=repr(exc),
                        sqlstate=getattr(exc, "sqlstate", None), messages=len(b.good),
                        first=f"{b.good[0].source} {b.good[0].id}", last=f"{b.good[-1].source} {b.good[-1].id}")
                    raise
                self.metrics.db_retries.inc()
                self.readiness.fail(reason)
                log(logger, logging.WARNING, "batch rolled back, retrying", error=repr(exc), retry_in_s=delay,
                    messages=len(b.good))
                if self._giving_up():
                    raise Abandoned() from exc
                await self._sleep(delay)
                delay = min(delay * 2, self.config.retry_backoff_max_s)
                continue
            b.committed, b.locked = True, False
            b.release()
            b.notify()
            if delay > 0.1:
                log(logger, logging.INFO, "database reachable again, batch applied", messages=len(b.good))
            return result

    async def _plan(self, b: _Batch) -> None:
        """Compute the batch from a snapshot while earlier batches hold their locks (see engine.Plan).

        Plans are made in batch order, each on top of the earlier ones; a failed read only means
        the batch is computed under its locks instead.
        """
        try:
            if b.prev is not None and not b.prev.committed:
                await b.prev.planned.wait()
            b.plan = await plan_batch(self.store, b.good, b.earlier_plans())
        except Exception as exc:  # noqa: BLE001 - the batch is then computed under its locks, where errors surface
            log(logger, logging.INFO, "planning failed, computing under the locks", error=repr(exc))
        finally:
            b.planned.set()

    async def _complete_finished(self) -> None:
        while self._inflight and self._inflight[0].task.done():
            await self._complete_oldest()

    async def _complete_oldest(self) -> None:
        async with self._complete_lock:
            if self._inflight:
                try:
                    await self._complete_first()
                except Abandoned:
                    self._give_up_inflight("failed")

    async def _complete_first(self) -> None:
        """Complete the oldest batch; it leaves the queue once complete (if it is still there: a drain that
        timed out may have given the queue up meanwhile)."""
        b = self._inflight[0]
        await self._complete(b)
        if self._inflight and self._inflight[0] is b:
            self._inflight.popleft()

    async def drain(self, timeout_s: float) -> None:
        """Finish every batch in hand, in order (before a rebalance, at a stop). A batch not finished
        within `timeout_s`, or whose database or broker work fails meanwhile, is abandoned uncommitted
        with every batch after it: its records come again to whoever owns the partition next."""
        self._draining = True
        try:
            await asyncio.wait_for(self._drain_locked(), timeout_s)
        except TimeoutError:
            self._give_up_inflight("timed out", timeout_s)
        except Abandoned:
            self._give_up_inflight("failed", timeout_s)
        finally:
            self._draining = False

    async def _drain_locked(self) -> None:
        async with self._complete_lock:
            while self._inflight:
                await self._complete_first()

    def _give_up_inflight(self, why: str, timeout_s: float | None = None) -> None:
        """The batches in hand could not be finished: give them up, uncommitted, and carry on afresh."""
        count = self._cancel_inflight()
        self._last = None
        self._unfinished = 0
        if self.intake is not None:
            # Their records must come again: every partition goes back to its committed offset (a
            # rebalance does that too, but nothing may depend on one following).
            self.intake.rewind_to_committed()
        if count:
            log(logger, logging.WARNING, f"finishing the batches in hand {why}: abandoned uncommitted, their "
                "records are delivered again", batches=count, drain_timeout_s=timeout_s or self.config.drain_timeout_s)

    def _giving_up(self) -> bool:
        """After a failure, retry (False) or give the batch up uncommitted (a stop or a rebalance waits)."""
        return self._stopping.is_set() or self._draining

    def halt(self, exc: BaseException) -> None:
        """Stop after a failure outside the main loop (in the rebalance listener): nothing more is
        committed, and `run` raises the failure (a requested stop that could not finish just stops)."""
        if self._broken is None and not isinstance(exc, Stopping | Abandoned):
            self._broken = exc
        log(logger, logging.ERROR, "pipeline halted", error=repr(exc))
        self._abandon()
        self._stopping.set()

    def _abandon(self) -> None:
        """Give up the batches in hand, uncommitted: from now on no offset is committed, since a later
        batch's offsets could pass an abandoned batch's messages (they are redelivered after a restart)."""
        self._halted = True
        self._cancel_inflight()

    def _cancel_inflight(self) -> int:
        """Mark every batch in hand abandoned (the batches waiting behind one stop waiting) and cancel its
        database stage (rolled back unless it committed already); how many there were."""
        count = len(self._inflight)
        for b in self._inflight:
            b.abandoned = True
            b.planned.set()
            b.notify()
            b.task.cancel()
        self._inflight.clear()
        self.abandoned += count
        return count

    async def _complete(self, b: _Batch) -> None:
        """After the database commit: dead letters, publish, mark published, commit offsets (in order).

        A stop may cut it short at any await and the drain then completes the batch again: the batch's
        own task is shielded (a stop does not roll back a transaction that can finish), and each step is
        done once."""
        if self._halted:
            raise Stopping()
        try:
            result = await asyncio.shield(b.task)
        except asyncio.CancelledError:
            current = asyncio.current_task()
            if b.abandoned and not (current is not None and current.cancelling()):
                raise Abandoned() from None  # given up by a drain meanwhile, not our own cancellation
            raise
        if self._fault is not None:
            self._inject_fault("kill_after_commit")
        if not b.reported:
            dead = list(b.dead)
            for index, error in result.failed:
                message = b.good[index]
                log(logger, logging.ERROR, "rating failed, message dead-lettered", type=message.type,
                    source=message.source, id=message.id, error=error)
                dead.append((b.records[index], BadMessage("rating_error", error)))
            if dead:
                await self._dead_letter(dead)
            self._count(b.good, result)
            if b.good:
                self.metrics.batch_plans.labels("held" if result.planned else "recomputed").inc()
            b.reported = True
        if not b.published:
            await self._publish(result.records)
            if result.row_ids:
                await self._retry_db("mark published", lambda: self.store.mark_published(result.row_ids))
            b.published = True
        if self._fault is not None:
            self._inject_fault("kill_after_publish")
        await self._commit(b.offsets)
        self._unfinished = max(0, self._unfinished - 1)
        self._lag_seen = 0  # measured before this batch: the lag loop measures it again within 5 s
        self.batches += 1
        # Records of the old message format have no timestamp (None); a clock behind the producer's, 0.
        now_ms = time.time() * 1000
        observe_many(self.metrics.record_latency,
                     [max(0.0, now_ms - t) / 1000 for t in b.timestamps if t is not None and t > 0])
        self.metrics.batch_size.observe(len(b.good) + len(b.dead))
        self.metrics.batch_seconds.observe(time.perf_counter() - b.started)

    def _inject_fault(self, point: str) -> None:
        if self._fault == (point, self.batches + 1):
            log(logger, logging.WARNING, "fault injected (RATING_WORKER_FAULT): SIGKILL", point=point,
                batch=self.batches + 1)
            os.kill(os.getpid(), signal.SIGKILL)

    def has_work(self) -> bool:
        """For the watchdog: records fetched and not yet committed, or waiting in the partitions, or the
        worker kept out of its consumer group (a fresh process may join where this one cannot)."""
        return self._unfinished > 0 or self._lag_seen > 0 or self._group_trouble is not None

    def _count(self, good, result: BatchResult) -> None:
        counts = Counter(
            (m.type, r.status, r.reason or "")
            for m, r in zip(good, result.messages, strict=True)
            if r.status != "failed"  # counted as dead-lettered
        )
        for labels, n in counts.items():
            self.metrics.messages.labels(*labels).inc(n)
        # An event or attempt that changes nobody's rating is worth a line (a casual game is not: it is common).
        for m, r in zip(good, result.messages, strict=True):
            if r.status == "unrated" and m.type != "game.finished":
                log(logger, logging.INFO, "message not rated", type=m.type, source=m.source, id=m.id, ref=m.ref,
                    reason=r.reason)

    async def _dead_letter(self, dead: Sequence) -> None:
        """Copy each bad record to the DLQ, as whole as fits (worker.contract.deadletter), with the reason in headers."""
        topic = self.config.kafka_dlq_topic
        limit = kafka_clients.request_limit(self.config) - 1024  # the produce request's own framing
        letters = [(record, exc, deadletter.build(record, exc.error_class, exc.reason, limit)) for record, exc in dead]

        async def send_all() -> None:
            futures = [await self._send_letter(topic, record, letter) for record, _, letter in letters]
            results = await asyncio.gather(*futures, return_exceptions=True)
            for (record, exc, _), result in zip(letters, results, strict=True):
                if isinstance(result, MessageSizeTooLargeError):
                    # The broker's limit (message.max.bytes) is below the producer's: the record's parts go.
                    small = deadletter.minimal(record, exc.error_class, exc.reason)
                    await (await self._send_letter(topic, record, small))
                elif isinstance(result, BaseException):
                    raise result

        await self._retry_broker("dead-letter", send_all)
        for record, exc, letter in letters:
            self.metrics.messages.labels("unknown", "dead_lettered", exc.error_class).inc()
            self.metrics.dead_letters.labels(exc.error_class).inc()
            omitted = {name: int(v) for name, v in letter.headers if name.endswith(".omitted")}
            log(
                logger, logging.WARNING, "bad message dead-lettered",
                topic=record.topic, partition=record.partition, offset=record.offset,
                error_class=exc.error_class, reason=exc.reason, **({"omitted": omitted} if omitted else {}),
            )

    async def _send_letter(self, topic: str, record, letter: deadletter.DeadLetter) -> asyncio.Future:
        """One dead letter in a batch of its own (a record may have neither key nor value, which
        aiokafka's send() refuses). A letter with a short key goes where Kafka's partitioner puts the key;
        others go by the partition they came from (a bad record's key may be a megabyte: hashing it would
        block the loop, and caching it like the players' keys would keep it in memory)."""
        partitions = sorted(await self.producer.partitions_for(topic))
        if letter.key is not None and len(letter.key) <= DEAD_LETTER_KEY_HASHED:
            partition = partitions[(murmur2(letter.key) & 0x7FFFFFFF) % len(partitions)]
        else:
            partition = partitions[record.partition % len(partitions)]
        batch = self.producer.create_batch()
        batch.append(key=letter.key, value=letter.value, timestamp=None, headers=letter.headers)
        batch.close()
        return await self.producer.send_batch(batch, topic, partition=partition)

    async def _publish(self, records: Sequence[ChangeRecord]) -> None:
        if not records:
            return
        await self._retry_broker(
            "publish", lambda: self._send_keyed(
                self.config.kafka_output_topic, [(r.key.player_id.encode(), r.payload) for r in records]))
        now = time.time()
        per_rating = Counter((r.key.system, r.key.category) for r in records)
        for (system, category), n in per_rating.items():
            self.metrics.rating_changes.labels(system, category).inc(n)
        # One lag observation per cause (message), not per change.
        causes = {(r.cause_source, r.cause_id): r.changed_at for r in records}
        observe_many(self.metrics.event_lag, [max(0.0, now - changed_at) for changed_at in causes.values()])

    async def _send_keyed(self, topic: str, items: list[tuple[bytes, bytes]]) -> None:
        """Send (key, value) records with Kafka's default partitioner, one producer batch per partition.

        aiokafka's per-record send() costs ~27 us; appending to a batch ~5 us. The partition is the same
        as the Java client's (murmur2 of the key), so consumers keyed by player see one partition per player.
        """
        partitions = sorted(await self.producer.partitions_for(topic))
        by_partition: dict[int, list[tuple[bytes, bytes]]] = {}
        for key, value in items:
            by_partition.setdefault(partitions[self._key_hash(key) % len(partitions)], []).append((key, value))
        futures = []
        for partition, records in by_partition.items():
            batch = self.producer.create_batch()
            for key, value in records:
                if batch.append(key=key, value=value, timestamp=None, headers=OUTPUT_HEADERS) is None:
                    batch.close()
                    futures.append(await self.producer.send_batch(batch, topic, partition=partition))
                    batch = self.producer.create_batch()
                    batch.append(key=key, value=value, timestamp=None, headers=OUTPUT_HEADERS)
            batch.close()
            futures.append(await self.producer.send_batch(batch, topic, partition=partition))
        await asyncio.gather(*futures)

    def _key_hash(self, key: bytes) -> int:
        """murmur2 (pure Python in aiokafka, ~7 us) cached per key; the cache is bounded by clearing it."""
        h = self._hashes.get(key)
        if h is None:
            if len(self._hashes) >= 200_000:
                self._hashes.clear()
            h = self._hashes[key] = murmur2(key) & 0x7FFFFFFF
        return h

    async def _commit(self, offsets: dict[TopicPartition, int]) -> None:
        if self._halted:
            raise Stopping()
        try:
            await self._retry_broker("commit offsets", lambda: self.consumer.commit(offsets))
            self._committed.update(offsets)
        except (CommitFailedError, IllegalStateError) as exc:
            # The partitions went to another worker: it will see these messages again and skip them
            # as duplicates (their ids are in the database), so nothing is lost or applied twice.
            log(logger, logging.WARNING, "offset commit refused after a rebalance", error=repr(exc))

    def _offsets_went_back(self, tp: TopicPartition, offset: int) -> None:
        """Nothing is applied twice (the processed ids are in PostgreSQL), but the operator must know:
        messages the broker lost are lost unless their producers send them again (docs/operations.md)."""
        log(logger, logging.ERROR, "partition went back below an offset this worker committed: the broker lost "
            "its data or the group's offsets, or they were reset; messages already applied will be skipped",
            topic=tp.topic, partition=tp.partition, committed=self._committed[tp], fetched=offset)
        self.metrics.offsets_went_back.labels(tp.topic).inc()
        self._committed[tp] = offset  # once per fall, not once per batch while it catches up

    # ---- outbox relay, lag ---------------------------------------------------------------------

    async def relay_once(self, min_age_s: float) -> int:
        rows = await self.store.unpublished(1000, min_age_s)
        if not rows:
            return 0
        await self._retry_broker("relay publish", lambda: self._send_keyed(
            self.config.kafka_output_topic, [(r.player_id.encode(), r.payload) for r in rows]))
        await self.store.mark_published([r.row_id for r in rows])
        log(logger, logging.INFO, "relay published changes left unpublished", count=len(rows))
        return len(rows)

    async def _relay_loop(self) -> None:
        min_age = 0.0  # at start-up, everything unpublished is a crash's leftover
        while not self._stopping.is_set():
            try:
                while await self.relay_once(min_age) >= 1000:
                    pass
                backlog = getattr(self.store, "outbox_backlog", None)
                if backlog is not None:
                    self.metrics.outbox_backlog.set(await backlog())
            except DB_ERRORS + (KafkaError, Abandoned) as exc:  # Abandoned: a stop or drain cut a retry short
                log(logger, logging.WARNING, "relay failed, will retry", error=repr(exc))
            min_age = self.config.relay_min_age_s
            await self._sleep(self.config.relay_interval_s)

    def forget_lag(self, partitions) -> None:
        """Partitions taken away are another worker's to report: drop their lag series."""
        for tp in partitions:
            try:
                self.metrics.consumer_lag.remove(tp.topic, str(tp.partition))
            except KeyError:
                pass

    async def _lag_loop(self) -> None:
        while not self._stopping.is_set():
            try:
                total = 0
                stopped = self.intake.stopped() if self.intake is not None else set()
                for tp in self.consumer.assignment():
                    end = self.consumer.highwater(tp)
                    if end is not None:
                        lag = end - await self.consumer.position(tp)
                        self.metrics.consumer_lag.labels(tp.topic, str(tp.partition)).set(lag)
                        if tp not in stopped:  # waiting for an operator, not for this worker
                            total += max(0, lag)
                self._lag_seen = total
                for topic in self.config.kafka_input_topics:
                    partitions = self.consumer.partitions_for_topic(topic)
                    if partitions is not None:
                        self.metrics.topic_partitions.labels(topic).set(len(partitions))
            except (KafkaError, IllegalStateError):
                pass
            await self._sleep(5.0)

    async def probe_broker(self, timeout_s: float = BROKER_PROBE_TIMEOUT_S) -> bool:
        """One metadata request (the cluster's brokers and topics, answered by any broker); not ready
        while it fails or goes unanswered for `timeout_s`, ready again (as far as the probe goes) once it
        is answered. True when it was."""
        try:
            await asyncio.wait_for(self.consumer.topics(), timeout_s)
        except Exception as exc:  # noqa: BLE001 - whatever stops the request, the broker is not usable
            if self.readiness.fail(BROKER_PROBE):
                log(logger, logging.WARNING, "broker not answering a metadata request: not ready until it does",
                    error=repr(exc), timeout_s=timeout_s)
            return False
        if self.readiness.recover(BROKER_PROBE):
            log(logger, logging.INFO, "broker answering again")
        return True

    async def _broker_probe_loop(self) -> None:
        while not self._stopping.is_set():
            await self.probe_broker()
            await self._sleep(BROKER_PROBE_INTERVAL_S)

    # ---- retries -------------------------------------------------------------------------------

    async def _sleep(self, seconds: float) -> None:
        try:
            await asyncio.wait_for(self._stopping.wait(), seconds)
        except TimeoutError:
            pass

    async def _retry(self, what: str, action: Callable[[], Awaitable[T]], errors, counter, source: str,
                     interruptible: bool = False) -> T:
        """Retry a transient failure with capped exponential backoff; not ready meanwhile (the reason
        "<source>: <what>": no two retries of the same `what` run at once). A stop or a drain ends it at
        the next failure (Abandoned: it is a batch's work); an `interruptible` one (start-up) also ends its
        attempt at once (Stopping)."""
        reason = f"{source}: {what}"
        delay = 0.1
        try:
            while True:
                try:
                    result = await (self._until_stopped(action()) if interruptible else action())
                    if delay > 0.1:
                        log(logger, logging.INFO, f"{what}: recovered")
                    return result
                except errors as exc:
                    if isinstance(exc, CommitFailedError | IllegalStateError):
                        raise
                    counter.inc()
                    self.readiness.fail(reason)
                    log(logger, logging.WARNING, f"{what} failed, retrying", error=repr(exc), retry_in_s=delay)
                    if self._giving_up():
                        raise (Stopping() if interruptible else Abandoned()) from exc
                    await self._sleep(delay)
                    delay = min(delay * 2, self.config.retry_backoff_max_s)
        finally:
            self.readiness.recover(reason)

    async def _retry_db(self, what: str, action: Callable[[], Awaitable[T]]) -> T:
        return await self._retry(what, action, DB_ERRORS, self.metrics.db_retries, "database")

    async def _retry_broker(self, what: str, action: Callable[[], Awaitable[T]], interruptible: bool = False) -> T:
        return await self._retry(what, action, (KafkaError,), self.metrics.broker_retries, "broker", interruptible)
